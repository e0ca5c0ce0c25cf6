import Foundation
@testable import GCapture
import XCTest

/// `gcapture record --timelapse` as a user runs it: the movie it makes, its mistakes, a kill mid-way.
final class TimelapseCommandTests: XCTestCase {
    /// 6 s at one frame every 0.5 s: 12 frames at 30 fps, video only, and it plays.
    func testATimelapseOfSixSecondsAtHalfASecondIsTwelveFramesAtThirtyFPS() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("timelapse.mp4")
        let result = try runGCapture(["record", "--camera", "test", "--timelapse", "0.5", "--duration", "6", "--output", movie.path, "--json"],
                                     timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr)
        let finished = result.stdout.split(separator: "\n").first { $0.contains("\"recordingFinished\"") }
        XCTAssertNotNil(finished, "no recordingFinished event: \(result.stdout)")
        let probed = try probe(movie)
        let frames = try XCTUnwrap(probed.videoFrames)
        XCTAssertEqual(frames, 12, accuracy: 1)
        XCTAssertEqual(probed.duration, Double(frames) / 30, accuracy: 1.0 / 30 + 0.001)
        XCTAssertEqual(probed.stream("video")?["r_frame_rate"] as? String, "30/1")
        XCTAssertEqual(probed.codecs, ["h264"], "a timelapse has no audio track")
        XCTAssertTrue(try ffmpegDecodes(movie))
    }

    /// --timelapse-frame-rate sets the movie's rate.
    func testTheFrameRateIsTheMovies() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("slow.mp4")
        let result = try runGCapture(["record", "--camera", "test", "--timelapse", "0.25", "--timelapse-frame-rate", "10",
                                      "--duration", "2", "--output", movie.path], timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr)
        let probed = try probe(movie)
        XCTAssertEqual(probed.videoFrames ?? 0, 8, accuracy: 1)
        XCTAssertEqual(probed.stream("video")?["r_frame_rate"] as? String, "10/1")
        XCTAssertEqual(probed.duration, Double(probed.videoFrames ?? 0) / 10, accuracy: 0.101)
    }

    /// Bad values are refused before anything opens, naming the option and what it takes.
    func testBadValuesAreRefusedClearly() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("never.mp4")
        let cases: [([String], String)] = [
            (["--timelapse", "0"], "--timelapse"),
            (["--timelapse", "-2"], "--timelapse"),
            (["--timelapse", "soon"], "--timelapse"),
            (["--timelapse", "1", "--timelapse-frame-rate", "0"], "--timelapse-frame-rate"),
            (["--timelapse-frame-rate", "30"], "give --timelapse SECONDS too"),
            (["--timelapse", "1", "--microphone", "test-microphone"], "records no audio"),
        ]
        for (arguments, expected) in cases {
            let result = try runProduct("gcapture", ["record", "--camera", "test", "--duration", "1", "--output", movie.path] + arguments)
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: movie.path), "\(arguments) wrote a file")
        }
        let help = try runProduct("gcapture", ["record", "--help"])
        XCTAssertTrue(help.stdout.contains("--timelapse <timelapse>") && help.stdout.contains("--timelapse-frame-rate"), help.stdout)
    }

    /// Killed mid-way, the timelapse plays as it is (every frame a key frame, a fragment every two frames
    /// at 0.5 s), and the next recording in the folder recovers it from its sidecar.
    func testAKilledTimelapsePlaysAndIsRecovered() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("killed.mp4")
        let program = try launch("gcapture", ["record", "--camera", "test", "--timelapse", "0.5", "--duration", "60",
                                              "--output", movie.path, "--json"])
        XCTAssertTrue(program.waitForEvent("recordingStarted"), "the recording never started: \(program.errorOutput)")
        // Progress events tell the frames written; kill once 8 have been.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !program.output.contains("\"frames\":8") { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertTrue(program.output.contains("\"frames\":8"), "8 frames were never written: \(program.output)")
        program.signal(SIGKILL)
        XCTAssertTrue(program.waitForExit(timeout: 10), "SIGKILL did not end it")

        let killed = try probe(movie)
        XCTAssertGreaterThanOrEqual(killed.videoFrames ?? 0, 6, "a kill may cost a fragment (two frames), not more")
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertTrue(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path))

        let next = try runProduct("gcapture", ["record", "--camera", "test", "--microphone", "none", "--duration", "1",
                                               "--output", folder.appendingPathComponent("next.mp4").path])
        XCTAssertEqual(next.status, 0, next.stderr)
        let recovered = try probe(movie)
        XCTAssertGreaterThanOrEqual(recovered.videoFrames ?? 0, 8, "recovery lost frames the sidecar had")
        XCTAssertEqual(recovered.codecs, ["h264"])
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path))
    }
}
