import Foundation
@testable import GCapture
import XCTest

/// A take a crash interrupted comes back at the next recording in its folder, and the user hears of it:
/// the library posts a notification, the command says so on stderr and in JSON, and a name the recovered
/// take now holds is refused in those words. A sidecar that cannot be recovered is reported once and set aside.
final class RecoveryReportTests: XCTestCase {
    /// Records to `movie` until it has run `seconds`, then kills the command: the movie and its sidecar stay.
    private func recordAndKill(_ movie: URL, after seconds: TimeInterval) throws {
        let program = try launch("gcapture", ["record", "--microphone", "none", "--duration", "30", "--output", movie.path, "--json"])
        XCTAssertTrue(program.waitForEvent("recordingStarted"), "the recording never started: \(program.errorOutput)")
        Thread.sleep(forTimeInterval: seconds)
        program.signal(SIGKILL)
        XCTAssertTrue(program.waitForExit(timeout: 10), "SIGKILL did not end it")
        XCTAssertTrue(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path), "no sidecar to recover")
    }

    /// Runs gcapture to its end (killed after two minutes) and hands back the finished command.
    private func run(_ arguments: [String]) throws -> LaunchedCommand {
        let command = try launch("gcapture", arguments)
        XCTAssertTrue(command.waitForExit(timeout: 120), "gcapture \(arguments.joined(separator: " ")) still ran after 120 s")
        command.kill()
        return command
    }

    func testARecoveredTakeIsReportedAndTheNameItTakesIsRefusedInThoseWords() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4")
        try recordAndKill(movie, after: 3)
        // The user deletes the broken-looking movie and records to the same name again.
        try FileManager.default.removeItem(at: movie)
        let again = try run(["record", "--microphone", "none", "--duration", "1", "--output", movie.path, "--json"])
        let recovered = again.events("recovered")
        XCTAssertEqual(recovered.count, 1, "no recovered event: \(again.output)")
        XCTAssertEqual(recovered.first?["path"] as? String, movie.path)
        XCTAssertGreaterThan(recovered.first?["duration"] as? Double ?? 0, 2.5, "\(recovered)")
        XCTAssertTrue(again.errorOutput.contains("recovered \(movie.path)"), again.errorOutput)
        XCTAssertEqual(again.status, 64, again.errorOutput)
        XCTAssertTrue(again.errorOutput.contains("\(movie.path) is a take recovered from an interrupted recording; give another --output or --overwrite"),
                      again.errorOutput)
        XCTAssertGreaterThan(try probe(movie).duration, 2.5, "the recovered take is kept")
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path))
    }

    /// The library's own word: `didRecoverMovieNotification` with the movie's path and duration.
    func testTheLibraryPostsTheRecoveredMoviesPathAndDuration() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("take.mp4")
        try recordAndKill(movie, after: 3)
        let posted = expectation(forNotification: CaptureMovieFileOutput.didRecoverMovieNotification, object: nil) { note in
            note.userInfo?[CaptureMovieFileOutput.recoveredMoviePathKey] as? String == movie.path
                && (note.userInfo?[CaptureMovieFileOutput.recoveredMovieDurationKey] as? Double ?? 0) > 2.5
        }
        let results = CaptureMovieFileOutput.recoverInterruptedRecordings(in: folder)
        XCTAssertEqual(results.count, 1)
        XCTAssertEqual(try results.first?.get().path, movie.path)
        wait(for: [posted], timeout: 5)
    }

    /// A sidecar whose frames no MP4 can hold (here MJPEG, not H.264) fails to remux: it is reported once,
    /// moved aside under a name no later start retries, and the next recording says nothing more of it.
    func testAnUnrecoverableSidecarIsReportedOnceAndSetAside() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("broken.mp4")
        let sidecar = MovieRecovery.sidecarURL(for: movie)
        let made = try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=10", "!", "jpegenc", "!", "matroskamux",
                                                          "!", "filesink", "location=\(sidecar.path)"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let first = try run(["record", "--microphone", "none", "--duration", "1",
                              "--output", folder.appendingPathComponent("one.mp4").path, "--json"])
        XCTAssertEqual(first.status, 0, first.errorOutput)
        let failed = first.events("recoveryFailed")
        XCTAssertEqual(failed.count, 1, first.output)
        XCTAssertEqual(failed.first?["path"] as? String, movie.path)
        let aside = MovieRecovery.failedSidecarURL(for: movie)
        XCTAssertEqual(failed.first?["sidecar"] as? String, aside.path)
        XCTAssertTrue(first.errorOutput.contains("cannot recover \(movie.path)"), first.errorOutput)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sidecar.path), "the sidecar would be retried at every start")
        XCTAssertTrue(FileManager.default.fileExists(atPath: aside.path), "what was left is kept for the user")

        let second = try run(["record", "--microphone", "none", "--duration", "1",
                               "--output", folder.appendingPathComponent("two.mp4").path, "--json"])
        XCTAssertEqual(second.status, 0, second.errorOutput)
        XCTAssertFalse(second.output.contains("recoveryFailed") || second.errorOutput.contains("cannot recover"), second.output + second.errorOutput)
    }
}
