import Foundation
import XCTest

/// `gcapture stream … --record` to an SRT server that is not there: the connection is retried for as long
/// as the run lasts, and an attempt under way never delays the end (the duration, a signal) or lengthens
/// the recording.
final class StreamCommandStopTests: XCTestCase {
    func testAConnectionUnderWayDelaysNeitherTheDurationNorTheRecording() throws {
        let port = try freeLoopbackPort(udp: true)
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4")
        let started = Date()
        let run = try runProduct("gcapture", ["stream", "srt://127.0.0.1:\(port)", "--camera", "test", "--microphone", "none",
                                              "--record", movie.path, "--duration", "4", "--json"], timeout: 30)
        let took = Date().timeIntervalSince(started)
        XCTAssertEqual(run.status, 1, "the stream never went live: \(run.stderr)")
        XCTAssertLessThan(took, 5.5, "a 4 s run took \(took) s")
        let recorded = try probe(movie)
        XCTAssertEqual(recorded.duration, 4, accuracy: 0.25, "the recording keeps to --duration")
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent(".clip.mp4.gcapture-recovery.mkv").path),
                       "the recording was finalized")
    }

    func testASignalDuringAConnectionEndsTheRunAtOnce() throws {
        let port = try freeLoopbackPort(udp: true)
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4")
        let stream = try launch("gcapture", ["stream", "srt://127.0.0.1:\(port)", "--camera", "test", "--microphone", "none",
                                             "--record", movie.path, "--json"])
        // Past the first attempt's three seconds, into the second attempt's connection.
        let deadline = Date().addingTimeInterval(30)
        while !stream.events("streamState").contains(where: { $0["state"] as? String == "reconnecting" }), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertTrue(stream.events("streamState").contains { $0["state"] as? String == "reconnecting" }, stream.output)
        Thread.sleep(forTimeInterval: 1)
        let signalled = Date()
        kill(stream.process.processIdentifier, SIGINT)
        XCTAssertTrue(stream.waitForExit(timeout: 10))
        let took = Date().timeIntervalSince(signalled)
        XCTAssertLessThan(took, 1.5, "SIGINT took \(took) s to end the run")
        let recorded = try probe(movie)
        XCTAssertGreaterThan(recorded.duration, 3)
        XCTAssertGreaterThan(recorded.videoFrames ?? 0, 60)
    }
}
