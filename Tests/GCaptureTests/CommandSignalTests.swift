import Foundation
@testable import GCapture
import XCTest

/// Every way a user or a system ends a command (Ctrl-C, kill, a closed terminal, SIGQUIT, a reader of its
/// output going away) ends it cleanly: the movie finalized, the photos requested written, the report printed.
final class CommandSignalTests: XCTestCase {
    private func startRecording(_ movie: URL, environment: [String: String] = [:], readsStdout: Bool = true) throws -> LaunchedCommand {
        let command = try launch("gcapture", ["record", "--microphone", "test-microphone", "--preset", "vga640x480",
                                              "--output", movie.path, "--json"], environment: environment, readsStdout: readsStdout)
        return command
    }

    func testEveryTerminatingSignalFinalizesTheRecording() throws {
        let folder = try temporaryFolder()
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP"), (SIGQUIT, "SIGQUIT")] {
            let movie = folder.appendingPathComponent("\(name).mp4")
            let recording = try startRecording(movie)
            XCTAssertTrue(recording.waitForEvent("progress", count: 5), "\(name): no progress: \(recording.errorOutput)")
            Thread.sleep(forTimeInterval: 0.5)
            recording.signal(number)
            XCTAssertTrue(recording.waitForExit(timeout: 10), "\(name) did not end the recording")
            XCTAssertEqual(recording.status, 0, "\(name): \(recording.errorOutput)")
            XCTAssertFalse(recording.errorOutput.contains("crashed"), "\(name): \(recording.errorOutput)")
            // Each signal is checked whatever became of the others.
            guard let finished = recording.events("recordingFinished").first, let reported = finished["duration"] as? Double else {
                XCTFail("\(name): no recordingFinished")
                continue
            }
            XCTAssertEqual(finished["stoppedBy"] as? String, name)
            XCTAssertGreaterThan(reported, 0.6, name)

            let probed = try probe(movie)
            XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"], name)
            XCTAssertEqual(probed.duration, reported, accuracy: 0.1, "\(name): the file is not what the command reported")
            XCTAssertTrue(try ffmpegDecodes(movie), name)
            XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path),
                           "\(name): the movie was left for crash recovery, not finalized")
        }
    }

    /// The first signal starts the finalization; a second one is someone who will not wait: out at once,
    /// with 128 + its number, the movie left as its crash-safe fragments.
    func testASecondSignalExitsAtOnce() throws {
        let movie = try temporaryFolder().appendingPathComponent("twice.mp4")
        let recording = try startRecording(movie)
        // Two seconds in (progress comes every 0.2 s): past the first one-second fragment, which is what a
        // process cut short leaves playable. At one second the first fragment may still be open.
        XCTAssertTrue(recording.waitForEvent("progress", count: 10), recording.errorOutput)
        recording.signal(SIGINT)
        Thread.sleep(forTimeInterval: 0.02)
        let second = Date()
        recording.signal(SIGTERM)
        XCTAssertTrue(recording.waitForExit(timeout: 5))
        XCTAssertLessThan(Date().timeIntervalSince(second), 1, "the second signal did not end the process at once")
        XCTAssertEqual(recording.status, 128 + SIGTERM, recording.errorOutput)
        XCTAssertTrue(recording.errorOutput.contains("second signal"), recording.errorOutput)
        XCTAssertTrue(recording.events("recordingFinished").isEmpty, "it finished after all")
        XCTAssertGreaterThan(try probe(movie).duration, 0.1, "the fragments written so far play")
    }

    /// `gcapture record --json | head -3`: when the reader goes away the recording stops and is finalized,
    /// instead of SIGPIPE killing it in the middle of a write.
    /// Also with stdout line-buffered by `stdbuf -oL` (as scripts/test.sh runs the suite), where the failed
    /// write happens inside print() and a flush after it has nothing left to fail on.
    func testAClosedStdoutFinalizesTheRecording() throws {
        let folder = try temporaryFolder()
        let lineBuffered = ["LD_PRELOAD": "/usr/libexec/coreutils/libstdbuf.so", "_STDBUF_O": "L"]
        guard FileManager.default.fileExists(atPath: lineBuffered["LD_PRELOAD"]!) else {
            throw TestEnvironment.missing("coreutils' libstdbuf.so")
        }
        for (name, environment) in [("default", [:]), ("line-buffered", lineBuffered)] {
            try closeStdout(of: folder.appendingPathComponent("pipe-\(name).mp4"), environment: environment)
        }
    }

    private func closeStdout(of movie: URL, environment: [String: String]) throws {
        let recording = try startRecording(movie, environment: environment, readsStdout: false)
        var seen = Data()
        let deadline = Date().addingTimeInterval(20)
        while !String(decoding: seen, as: UTF8.self).contains("\"event\":\"progress\""), Date() < deadline {
            // availableData blocks until the child writes: wait for that no longer than the deadline.
            var ready = pollfd(fd: recording.stdout.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(max(0, deadline.timeIntervalSinceNow) * 1000)) > 0 else { break }
            let chunk = recording.stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        XCTAssertTrue(String(decoding: seen, as: UTF8.self).contains("progress"), recording.errorOutput)
        Thread.sleep(forTimeInterval: 0.5)
        try recording.stdout.fileHandleForReading.close()
        XCTAssertTrue(recording.waitForExit(timeout: 10), "a closed stdout did not end the recording (\(environment))")
        XCTAssertEqual(recording.process.terminationReason, .exit, "killed by SIGPIPE")
        XCTAssertEqual(recording.status, 0, recording.errorOutput)
        XCTAssertGreaterThan(try probe(movie).duration, 0.5)
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path), "not finalized")
    }

    /// `gcapture frames | tee log` interrupted: the report reaches the pipe.
    func testInterruptedFramesPrintsItsReportToAPipe() throws {
        for json in [true, false] {
            let frames = try launch("gcapture", ["frames", "--duration", "60", "--preset", "vga640x480"] + (json ? ["--json"] : []))
            let started = Date().addingTimeInterval(20)
            while !frames.output.contains(json ? "\"started\"" : "capturing from"), Date() < started { Thread.sleep(forTimeInterval: 0.02) }
            XCTAssertTrue(frames.output.contains(json ? "\"started\"" : "capturing from"), "not started: \(frames.errorOutput)")
            Thread.sleep(forTimeInterval: 1)
            frames.signal(SIGINT)
            XCTAssertTrue(frames.waitForExit(timeout: 10), "SIGINT did not end gcapture frames")
            XCTAssertEqual(frames.status, 0, frames.errorOutput)
            if json {
                let finished = try XCTUnwrap(frames.events("finished").first, "no report: \(frames.output)")
                XCTAssertGreaterThanOrEqual(finished["frames"] as? Int ?? 0, 20)
                XCTAssertEqual(finished["stoppedBy"] as? String, "SIGINT")
                XCTAssertLessThan(finished["seconds"] as? Double ?? 60, 30, "the report gives the time it really ran")
            } else {
                XCTAssertTrue(frames.output.contains("fps), 640x480"), "no report: \(frames.output)")
                XCTAssertTrue(frames.output.contains("(stopped by SIGINT)"), frames.output)
            }
        }
    }

    /// A burst stopped by a signal writes the photos already requested, reports them, and exits.
    func testAStoppedBurstWritesWhatItRequested() throws {
        let folder = try temporaryFolder()
        let burst = try launch("gcapture", ["photo", "--count", "100", "--interval", "0.2", "--preset", "vga640x480",
                                            "--output", folder.appendingPathComponent("shot-%d.jpg").path, "--json"])
        XCTAssertTrue(burst.waitForEvent("photo", count: 3), burst.errorOutput)
        burst.signal(SIGTERM)
        XCTAssertTrue(burst.waitForExit(timeout: 10), "SIGTERM did not end the burst")
        XCTAssertEqual(burst.status, 0, burst.errorOutput)
        let stopped = try XCTUnwrap(burst.events("stopped").first, "no stopped event: \(burst.output)")
        XCTAssertEqual(stopped["signal"] as? String, "SIGTERM")
        let requested = try XCTUnwrap(stopped["requested"] as? Int)
        XCTAssertLessThan(requested, 100)
        let photos = burst.events("photo")
        XCTAssertEqual(photos.count, requested, "every photo requested is written and reported")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".jpg") }
        XCTAssertEqual(files.count, requested, "\(files)")
    }
}
