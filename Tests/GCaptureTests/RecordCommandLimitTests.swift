import Foundation
@testable import GCapture
import XCTest

/// `gcapture record`'s limits and failures as a user meets them, checked with ffprobe.
final class RecordCommandLimitTests: XCTestCase {
    /// The `recordingFinished` event of a --json run.
    private func finishedEvent(_ stdout: String) throws -> [String: Any] {
        let line = try XCTUnwrap(stdout.split(separator: "\n").last { $0.contains("\"recordingFinished\"") }, stdout)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    /// --duration is honoured to a frame (it was rounded up to the 0.2 s check: 0.5 gave 0.63 s), and the
    /// frames the command reports are the frames in the file.
    func testTheDurationLimitIsHonouredToAFrame() throws {
        let folder = try temporaryFolder()
        for seconds in [0.5, 1.3] {
            let movie = folder.appendingPathComponent("d\(seconds).mp4")
            let result = try runProduct("gcapture", ["record", "--microphone", "test-microphone", "--preset", "vga640x480",
                                                     "--duration", "\(seconds)", "--output", movie.path, "--json"])
            XCTAssertEqual(result.status, 0, result.stderr)
            let probed = try probe(movie)
            XCTAssertEqual(probed.duration, seconds, accuracy: 1.0 / 30, "--duration \(seconds)")
            let videoDuration = try XCTUnwrap((probed.stream("video")?["duration"] as? String).flatMap(Double.init))
            XCTAssertEqual(videoDuration, seconds, accuracy: 1.0 / 30)
            XCTAssertEqual(probed.videoFrames, Int((seconds * 30).rounded()))
            let event = try finishedEvent(result.stdout)
            XCTAssertEqual(event["frames"] as? Int, probed.videoFrames, "the command's frame count against ffprobe's")
            XCTAssertEqual(event["duration"] as? Double ?? 0, videoDuration, accuracy: 0.001)
            XCTAssertTrue(try ffmpegDecodes(movie))
        }
    }

    /// --max-size is a hard limit, and not undershot by more than 10% (or a second of video, if less).
    func testTheSizeLimitIsNeverExceededNorMuchUndershot() throws {
        let folder = try temporaryFolder()
        for (limit, preset) in [(100_000, "vga640x480"), (1_000_000, "hd1280x720"), (3_000_000, "hd1280x720")] {
            let movie = folder.appendingPathComponent("s\(limit).mp4")
            let result = try runProduct("gcapture", ["record", "--microphone", "test-microphone", "--preset", preset,
                                                     "--max-size", "\(limit)", "--duration", "30", "--output", movie.path, "--json"])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(result.stdout.contains("maximum file size"), result.stdout)
            let size = try fileSize(movie)
            let probed = try probe(movie)
            let oneSecond = Double(size) / probed.duration
            XCTAssertLessThanOrEqual(size, limit, "--max-size \(limit)")
            XCTAssertGreaterThanOrEqual(Double(size), Double(limit) - min(0.1 * Double(limit), oneSecond), "--max-size \(limit): \(size) bytes")
            XCTAssertEqual(try finishedEvent(result.stdout)["frames"] as? Int, probed.videoFrames)
            XCTAssertTrue(try ffmpegDecodes(movie))
        }
        // A limit no frame fits in is not a finished recording (it printed "finished" beside a 72 KB file).
        let tiny = folder.appendingPathComponent("tiny.mp4")
        let refused = try runProduct("gcapture", ["record", "--microphone", "none", "--max-size", "2000", "--duration", "5",
                                                  "--output", tiny.path])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("maximum file size is smaller than"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: tiny.path))
    }

    /// A microphone the audio server does not have, or no audio server: the command fails before recording,
    /// naming the microphone (and the server), and leaves no file.
    func testAMicrophoneThatCannotBeOpenedFailsTheCommand() throws {
        let server = try PulseAudioServer()
        defer { server.stop() }
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("mic.mp4")
        let missing = try runProduct("gcapture", ["record", "--microphone", "pulse:nosuch", "--duration", "1", "--output", movie.path],
                                     environment: ["PULSE_SERVER": server.address])
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertFalse(missing.stdout.contains("finished"), missing.stdout)
        XCTAssertTrue(missing.stderr.contains("microphone nosuch [pulse:nosuch]") && missing.stderr.contains("no source named 'nosuch'"), missing.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: movie.path))

        let nobody = folder.appendingPathComponent("no-server").path
        let noServer = try runProduct("gcapture", ["record", "--microphone", "pulse:default", "--duration", "1", "--output", movie.path],
                                      environment: ["PULSE_SERVER": "unix:" + nobody])
        XCTAssertNotEqual(noServer.status, 0)
        XCTAssertTrue(noServer.stderr.contains("microphone") && noServer.stderr.contains("PulseAudio server at unix:\(nobody) does not answer"),
                      noServer.stderr)
        XCTAssertFalse(noServer.stderr.contains("Test Camera"), noServer.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: movie.path))
    }

    /// Outputs that cannot be written are named for what they are.
    func testAnOutputThatCannotBeWrittenIsNamedForWhatItIs() throws {
        let folder = try temporaryFolder()
        let cases: [(String, String)] = [("/proc/gcapture-x.mp4", "/proc/gcapture-x.mp4: cannot write there"),
                                         ("/sys/gcapture-x.mp4", "/sys/gcapture-x.mp4: cannot write there"),
                                         (folder.path, "\(folder.path) is a directory")]
        for (output, expected) in cases {
            let result = try runProduct("gcapture", ["record", "--microphone", "none", "--duration", "1", "--output", output])
            XCTAssertNotEqual(result.status, 0)
            XCTAssertTrue(result.stderr.contains(expected), "\(output): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("recorded already") || result.stderr.contains("GstBin") || result.stderr.contains("state"),
                           result.stderr)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), [])
    }

    /// A small real file system (tmpfs, 2 MiB): the recording that fills it ends with an error and a movie
    /// that plays; the next one fails to start, saying the disk is full, and leaves nothing behind.
    func testAFullDiskEndsWithAPlayableMovieAndTheNextRecordingLeavesNothing() throws {
        let folder = try temporaryFolder()
        let mounted = try runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", folder.path])
        guard mounted.status == 0 else { throw TestEnvironment.missing("a small tmpfs to fill (mount: \(mounted.stderr))") }
        addTeardownBlock { _ = try? self.runTool("/bin/umount", [folder.path]) }
        let first = folder.appendingPathComponent("first.mp4")
        let filled = try runProduct("gcapture", ["record", "--microphone", "test-microphone", "--preset", "hd1280x720",
                                                 "--duration", "20", "--output", first.path])
        XCTAssertNotEqual(filled.status, 0)
        XCTAssertTrue(filled.stderr.contains("the disk of \(folder.path) is full"), filled.stderr)
        XCTAssertGreaterThan(try probe(first).duration, 0.5)
        XCTAssertTrue(try ffmpegDecodes(first))
        // Whatever room is left, it is filled: the next recording has none.
        let filler = folder.appendingPathComponent("filler")
        FileManager.default.createFile(atPath: filler.path, contents: nil)
        if let handle = try? FileHandle(forWritingTo: filler) {
            while (try? handle.write(contentsOf: Data(count: 64 * 1024))) != nil {}
            try? handle.close()
        }
        let second = folder.appendingPathComponent("second.mp4")
        let refused = try runProduct("gcapture", ["record", "--microphone", "test-microphone", "--duration", "2", "--output", second.path])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("is full"), refused.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted(), ["filler", "first.mp4"])
    }
}
