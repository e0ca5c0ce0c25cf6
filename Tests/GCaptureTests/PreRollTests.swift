import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// CaptureMovieFileOutput.preRollDuration: a recording that begins before it was asked for, proven by the
/// capture times the test camera stamps into its frames' pixels (CLOCK_MONOTONIC, GStreamer's system clock).
final class PreRollTests: XCTestCase {
    private let stampedCamera = CaptureDevice.makeTestCamera(uniqueID: "test-stamped-preroll",
                                                             options: .init(maxFrameRate: 30, stampsCaptureTime: true))

    /// Starts a recording now, records `seconds` and stops; returns the milliseconds of the call (monotonic).
    private func record(_ movie: CaptureMovieFileOutput, to url: URL, seconds: Double) async throws -> (pressed: Double, stopped: Double) {
        let waiter = RecordingWaiter()
        let pressed = monotonicMilliseconds()
        movie.startRecording(to: url, recordingDelegate: waiter)
        let started = await waiter.waitForStart()
        XCTAssertTrue(started, "the recording did not start: \(waiter.finished?.error.map { "\($0)" } ?? "no answer")")
        try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        let stopped = monotonicMilliseconds()
        movie.stopRecording()
        let finished = await waiter.waitForFinish()
        XCTAssertNotNil(finished, "the recording never finished")
        XCTAssertNil(finished?.error)
        return (pressed, stopped)
    }

    /// The issue's yardstick: 8 s into a session with a 5 s pre-roll, a recording begins 5 s (to one key-frame
    /// interval, a second) before the call, ends at the stop, plays, and has its audio in step.
    func testARecordingStartedEightSecondsInBeginsFiveSecondsBeforeTheCall() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.preRollDuration = 5
        let session = try await startSession(camera: stampedCamera, microphone: .testMicrophone, outputs: [movie])
        try await Task.sleep(for: .seconds(8))
        let holding = movie.preRollHolding
        let url = folder.appendingPathComponent("event.mp4")
        let (pressed, stopped) = try await record(movie, to: url, seconds: 2)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let first = millisecondsFrom(pressed, to: try captureTimeStamp(url, width: 640))
        let last = millisecondsFrom(stopped, to: try captureTimeStamp(url, width: 640, lastFrame: true))
        let probed = try probe(url)
        print("pre-roll 5 s: the movie begins \(Int(first)) ms from the call, ends \(Int(last)) ms from the stop; \(probed.duration) s, "
              + "\(probed.videoFrames ?? 0) frames; the ring held \(holding.bytes) bytes, \(holding.seconds) s")
        XCTAssertLessThanOrEqual(first, -5000 + 1, "the first frame is not 5 s before the call")
        XCTAssertGreaterThan(first, -6000 - 34, "the first frame is more than a key-frame interval before the pre-roll")
        XCTAssertEqual(last, 0, accuracy: 250, "the last frame is not the stop's")
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.duration, (stopped - pressed - first) / 1000, accuracy: 0.3)
        XCTAssertGreaterThanOrEqual(probed.videoFrames ?? 0, Int(probed.duration * 30 * 0.97), "frames missing")
        let videoStart = try XCTUnwrap(probed.startTime("video")), audioStart = try XCTUnwrap(probed.startTime("audio"))
        XCTAssertLessThanOrEqual(abs(videoStart - audioStart), 0.05, "video starts at \(videoStart) s, audio at \(audioStart) s")
        XCTAssertTrue(try ffmpegDecodes(url))
        XCTAssertGreaterThanOrEqual(holding.seconds, 5)
        XCTAssertLessThan(holding.seconds, 6.1, "the ring keeps more than the pre-roll and a key-frame interval")
    }

    /// The ring's memory is what it holds, bounded: the pre-roll and a key-frame interval of the video's and
    /// the AAC audio's bit rates (the audio is kept encoded), 10% over for the key frames' size.
    func testTheRingStaysWithinItsBitRatesAndCanBeTurnedOff() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.preRollDuration = 2
        let session = try await startSession(camera: stampedCamera, microphone: .testMicrophone, outputs: [movie])
        var peak = CaptureMovieFileOutput.PreRollHolding()
        for _ in 0..<20 {
            try await Task.sleep(for: .milliseconds(200))
            let now = movie.preRollHolding
            if now.bytes > peak.bytes { peak = now }
        }
        let videoBitRate = MovieEncoding.defaultBitRate(width: 640, height: 480), audioBitRate = 128_000
        let bound = Double(videoBitRate + audioBitRate) / 8 * 3 * 1.1
        print("pre-roll 2 s at 640x480: the ring peaked at \(peak.bytes) bytes (\(peak.videoBytes) video, \(peak.audioBytes) audio, "
              + "\(peak.seconds) s); bound \(Int(bound)): \(String(format: "%.3f", Double(peak.bytes) / bound * 1.1))x the bit rates")
        XCTAssertGreaterThan(peak.videoBytes, 0)
        // AAC at 128 kbit/s is ~16 KB a second; raw, the same audio would be 192 KB.
        XCTAssertEqual(Double(peak.audioBytes), Double(audioBitRate) / 8 * peak.seconds, accuracy: Double(audioBitRate) / 8 * 0.5)
        XCTAssertLessThanOrEqual(Double(peak.bytes), bound)

        // Off: nothing kept, the shared encoder gone, and a recording as before (it begins at the call).
        movie.preRollDuration = 0
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(movie.preRollHolding.bytes, 0)
        let url = folder.appendingPathComponent("live.mp4")
        let (pressed, _) = try await record(movie, to: url, seconds: 1)
        let first = millisecondsFrom(pressed, to: try captureTimeStamp(url, width: 640))
        XCTAssertGreaterThan(first, -100, "without a pre-roll the movie begins at the call")

        // On again while the session runs: the next recording reaches back.
        movie.preRollDuration = 1
        try await Task.sleep(for: .seconds(2))
        let again = folder.appendingPathComponent("again.mp4")
        let (pressedAgain, _) = try await record(movie, to: again, seconds: 1)
        let firstAgain = millisecondsFrom(pressedAgain, to: try captureTimeStamp(again, width: 640))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertLessThanOrEqual(firstAgain, -1000 + 1)
        XCTAssertGreaterThan(firstAgain, -2000 - 34)
        XCTAssertTrue(try ffmpegDecodes(again))
    }

    /// A Matroska file with a pre-roll takes the ring's AAC (without one it encodes Opus): it reaches back, has
    /// both tracks, and plays.
    func testAMatroskaRecordingTakesTheRingsAudio() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.fileType = .matroska
        movie.preRollDuration = 1
        let session = try await startSession(camera: stampedCamera, microphone: .testMicrophone, outputs: [movie])
        try await Task.sleep(for: .seconds(2.5))
        let url = folder.appendingPathComponent("event.mkv")
        let (pressed, _) = try await record(movie, to: url, seconds: 1)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let first = millisecondsFrom(pressed, to: try captureTimeStamp(url, width: 640))
        XCTAssertLessThanOrEqual(first, -1000 + 1, "the first frame is not the pre-roll's")
        XCTAssertEqual(try probe(url).codecs.sorted(), ["aac", "h264"])
        XCTAssertTrue(try ffmpegDecodes(url))
    }
}
