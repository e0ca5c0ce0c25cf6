import Foundation
@testable import GCapture
import XCTest

/// What a power cut right after "finished" would find, read from the system calls the command makes
/// (strace): a finished movie's data and name are on disk (fsync of the file, the rename, fsync of its
/// folder) before the recovery sidecar that could rebuild it is removed (and that removal synced too), all
/// before the command says finished; a photo is fsynced, linked into place, and its folder fsynced.
/// scripts/power-cut-test.sh cuts the power for real inside ../shared/testbed/v4l2-vm.
final class DurabilityTests: XCTestCase {
    /// How strace prints the JSON photo event's start (its quotes escaped).
    private static let photoEvent = #"\"event\":\"photo\""#

    /// The traced calls of gcapture `arguments`, one a line, paths resolved (`-y`); writes to pipes (its JSON
    /// events) kept only where they are the finish or a photo.
    private func trace(_ arguments: [String], in folder: URL) throws -> [String] {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else { throw TestEnvironment.missing("strace is missing") }
        let log = folder.appendingPathComponent("strace.log")
        let result = try runProduct("gcapture", arguments, launcher: [
            "/usr/bin/strace", "-f", "-y", "-qq", "-s", "300", "-o", log.path,
            "-e", "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat,unlink,unlinkat,write"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map(String.init)
            .filter { !$0.contains("<pipe:") || $0.contains("recordingFinished") || $0.contains(Self.photoEvent) }
    }

    /// The index of the first line after `start` that has every one of `parts`; fails the test when none.
    private func firstLine(_ lines: [String], after start: Int = -1, with parts: String..., file: StaticString = #filePath,
                           line: UInt = #line) -> Int {
        let found = lines.indices.first { $0 > start && parts.allSatisfy(lines[$0].contains) }
        XCTAssertNotNil(found, "no call with \(parts) after line \(start) in:\n" + lines.filter { !$0.contains("write(") }.joined(separator: "\n"),
                        file: file, line: line)
        return found ?? Int.max
    }

    func testAFinishedMovieIsDurableBeforeItsSidecarGoesAndBeforeItIsCalledFinished() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4")
        let calls = try trace(["record", "--microphone", "none", "--duration", "1", "--output", movie.path, "--json"], in: folder)
        let temporary = MovieRemux.temporaryURL(for: movie).path, sidecar = MovieRecovery.sidecarURL(for: movie).path
        let dataSynced = firstLine(calls, with: "fsync(", "<\(temporary)>")
        let renamed = firstLine(calls, after: dataSynced, with: "rename", "\"\(temporary)\"", "\"\(movie.path)\"")
        let nameSynced = firstLine(calls, after: renamed, with: "fsync(", "<\(folder.path)>")
        let sidecarRemoved = firstLine(calls, after: nameSynced, with: "unlink", "\"\(sidecar)\"")
        let removalSynced = firstLine(calls, after: sidecarRemoved, with: "fsync(", "<\(folder.path)>")
        let finished = firstLine(calls, with: "recordingFinished")
        XCTAssertLessThan(removalSynced, finished, "the command said finished before the files were durable")
        XCTAssertGreaterThan(try probe(movie).duration, 0.5)
    }

    func testAPhotoIsSyncedRenamedIntoPlaceAndItsFolderSynced() throws {
        let folder = try temporaryFolder()
        let photo = folder.appendingPathComponent("shot.jpg")
        let calls = try trace(["photo", "--preset", "vga640x480", "--output", photo.path, "--json"], in: folder)
        // Linked into place (a photo never replaces a file), from the temporary name: link's first argument.
        let renamed = calls.firstIndex { $0.contains("\"\(photo.path)\"") && !$0.contains("unlink") && $0.contains("link") } ?? Int.max
        XCTAssertLessThan(renamed, calls.count, "the photo was not linked into place:\n" + calls.joined(separator: "\n"))
        guard renamed < calls.count else { return }
        let temporary = try XCTUnwrap(calls[renamed].split(separator: "\"").dropFirst().first.map(String.init))
        let dataSynced = firstLine(calls, with: "fsync(", "<\(temporary)>")
        XCTAssertLessThan(dataSynced, renamed, "the photo's data must be on disk before its name")
        let nameSynced = firstLine(calls, after: renamed, with: "fsync(", "<\(folder.path)>")
        XCTAssertLessThan(nameSynced, firstLine(calls, with: Self.photoEvent), "the command reported the photo before its name was durable")
    }
}
