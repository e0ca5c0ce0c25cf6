import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// `gcapture record` as a user runs it, including the worst case: the process killed mid-recording.
final class RecordCommandTests: XCTestCase {
    func testAKillLosesAtMostAFragmentAndTheNextRunRecoversTheRest() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("killed.mp4")
        let program = try launch("gcapture", ["record", "--microphone", "test-microphone", "--preset", "hd1280x720",
                                               "--duration", "10", "--rotation", "270", "--output", movie.path, "--json"])
        // Six seconds of recording after it started, then kill -9.
        XCTAssertTrue(program.waitForEvent("recordingStarted"), "the recording never started: \(program.errorOutput)")
        Thread.sleep(forTimeInterval: 6)
        program.signal(SIGKILL)
        XCTAssertTrue(program.waitForExit(timeout: 10), "SIGKILL did not end it")

        // Without repair: ffprobe, ffmpeg and GStreamer's discoverer all read it.
        let killed = try probe(movie)
        XCTAssertGreaterThanOrEqual(killed.duration, 5, "a kill may cost one fragment, not more")
        XCTAssertEqual(killed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(killed.clockwiseRotation, 270, "the crash-safe header carries the rotation")
        XCTAssertTrue(try topLevelBoxes(movie).contains("moof"), "killed while fragmented")
        XCTAssertTrue(try ffmpegDecodes(movie))
        let discovered = try MediaInfo.discover(movie)
        XCTAssertEqual(discovered.videoStreamCount, 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path), "the interrupted movie is recognisable")

        // Recording to the same name again would replace it: refused, the killed movie and its sidecar kept.
        let again = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "1", "--output", movie.path])
        XCTAssertEqual(again.status, 64, again.stderr)
        XCTAssertTrue(again.stderr.contains("\(movie.path) already exists") && again.stderr.contains("--overwrite"), again.stderr)
        XCTAssertEqual(try probe(movie).duration, killed.duration)
        XCTAssertTrue(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path))

        // The next recording in the folder recovers it first.
        let next = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "1",
                                               "--output", folder.appendingPathComponent("next.mp4").path, "--json"])
        XCTAssertEqual(next.status, 0, next.stderr)
        let recovered = try probe(movie)
        XCTAssertGreaterThanOrEqual(recovered.duration, 5.8, "recovery must lose at most 0.2 s")
        XCTAssertGreaterThan(recovered.duration, killed.duration)
        XCTAssertEqual(recovered.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(recovered.clockwiseRotation, 270, "recovery keeps the rotation")
        XCTAssertFalse(try topLevelBoxes(movie).contains("moof"), "recovered as a plain MP4")
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path))
    }

    /// A file size limit of the process (ulimit -f, as a full disk would) ends the recording with an error
    /// and a file that plays up to the failure.
    func testAWriteFailureEndsWithAPlayableFile() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("limited.mp4")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else { throw TestEnvironment.missing("prlimit is missing") }
        let result = try runProduct("gcapture", ["record", "--microphone", "none", "--preset", "hd1280x720", "--duration", "10",
                                                 "--output", movie.path, "--json"],
                                    launcher: ["/usr/bin/prlimit", "--fsize=3000000"])
        XCTAssertNotEqual(result.status, 0, "a failed recording must fail the command")
        XCTAssertTrue(result.stderr.contains("Error: recording failed"), result.stderr)
        let probed = try probe(movie)
        XCTAssertGreaterThan(probed.duration, 1)
        XCTAssertTrue(try ffmpegDecodes(movie))
    }

    /// A movie is named .mp4 or .mkv, and a second run to the same name leaves the first movie alone unless
    /// --overwrite is given; then the new movie replaces it, and a crash's sidecar beside it goes too.
    func testTheOutputMustBeAMovieNameAndAnExistingMovieIsKeptUnlessOverwritten() throws {
        let folder = try temporaryFolder()
        for name in ["clip.avi", "clip"] {
            let path = folder.appendingPathComponent(name).path
            let result = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "1", "--output", path])
            XCTAssertEqual(result.status, 64, "\(name): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(".mp4") && result.stderr.contains(".mkv"), result.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(name) was written")
        }
        let movie = folder.appendingPathComponent("clip.mp4")
        let first = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "1", "--output", movie.path])
        XCTAssertEqual(first.status, 0, first.stderr)
        let firstBytes = try Data(contentsOf: movie)
        let second = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "2", "--output", movie.path])
        XCTAssertEqual(second.status, 64, second.stderr)
        XCTAssertTrue(second.stderr.contains("already exists"), second.stderr)
        XCTAssertEqual(try Data(contentsOf: movie), firstBytes, "the first movie was touched")

        let sidecar = MovieRecovery.sidecarURL(for: movie)
        try Data("a crash's leftovers".utf8).write(to: sidecar)
        let replaced = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "2", "--overwrite",
                                                   "--output", movie.path])
        XCTAssertEqual(replaced.status, 0, replaced.stderr)
        XCTAssertEqual(try probe(movie).duration, 2, accuracy: 0.1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sidecar.path))
        XCTAssertTrue(try ffmpegDecodes(movie))
    }
}
