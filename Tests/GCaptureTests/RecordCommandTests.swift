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
}
