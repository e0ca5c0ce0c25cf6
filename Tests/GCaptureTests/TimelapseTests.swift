import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

/// CaptureMovieFileOutput.timelapseInterval: one frame kept every interval of capture, played at 30 fps,
/// proven by the capture times the test camera stamps into its frames' pixels.
final class TimelapseTests: XCTestCase {
    private let stampedCamera = CaptureDevice.makeTestCamera(uniqueID: "test-stamped-timelapse",
                                                             options: .init(maxFrameRate: 30, stampsCaptureTime: true))

    /// Whether every video frame of the movie is a key frame, as ffprobe reads them.
    private func keyFrameFlags(_ url: URL) throws -> [Bool] {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame",
                                                      "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        // One line a frame ("1," when the frame carries side data, which adds an empty line after it).
        return result.stdout.split(whereSeparator: \.isNewline).filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            .map { $0.split(separator: ",").first == "1" }
    }

    /// The yardstick: 6 s at one frame every 0.5 s make 12 frames, 0.4 s of movie at 30 fps, video
    /// only (though the session has a microphone), every frame a key frame; the frames left out never reach
    /// the encoder; the stamps of the first and last frames are 5.5 s apart.
    func testSixSecondsAtHalfASecondMakeTwelveFramesAtThirtyFPS() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.timelapseInterval = 0.5
        let session = try await startSession(camera: stampedCamera, microphone: .testMicrophone, outputs: [movie])
        let url = folder.appendingPathComponent("timelapse.mp4")
        let waiter = await startRecording(movie, to: url)
        // Frames reaching the recording's own encoder (none shared: the recording has one of its own).
        let encoded = Atomic<Int>(0)
        let encoder = try XCTUnwrap(movie.recordingBin?.element(named: VideoEncode.encoderName)?.staticPad("sink"),
                                    "the timelapse has no encoder of its own")
        encoder.addProbe(.buffer) { _ in
            encoded.add(1, ordering: .relaxed)
            return .ok
        }
        XCTAssertEqual(movie.activeVideoEncoder, movie.recordingVideoEncoderElement?.factoryName)
        try await Task.sleep(for: .seconds(6))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        let statistics = movie.lastStatistics
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let probed = try probe(url)
        let frames = try XCTUnwrap(probed.videoFrames)
        let first = try captureTimeStamp(url, width: 640), last = try captureTimeStamp(url, width: 640, lastFrame: true)
        let apart = Double(Int32(bitPattern: last &- first)) / 1000
        print("timelapse 0.5 s for 6 s: \(frames) frames, \(probed.duration) s of movie, \(encoded.load(ordering: .relaxed)) frames "
              + "encoded after the start, first and last frames captured \(apart) s apart; statistics \(statistics)")
        XCTAssertEqual(frames, 12, accuracy: 1)
        XCTAssertEqual(probed.duration, Double(frames) / 30, accuracy: 1.0 / 30 + 0.001)
        XCTAssertEqual(probed.stream("video")?["r_frame_rate"] as? String, "30/1")
        XCTAssertEqual(probed.codecs, ["h264"], "a timelapse has no audio track")
        XCTAssertTrue(try ffmpegDecodes(url))
        XCTAssertEqual(apart, Double(frames - 1) * 0.5, accuracy: 0.1, "the kept frames are not half a second of capture apart")
        XCTAssertEqual(apart, 5.5, accuracy: 0.6)
        XCTAssertEqual(try keyFrameFlags(url), Array(repeating: true, count: frames), "every frame of a timelapse is a key frame")
        XCTAssertLessThanOrEqual(encoded.load(ordering: .relaxed), frames, "frames left out reached the encoder")
        XCTAssertEqual(statistics.frames, frames)
        XCTAssertEqual(statistics.duration, probed.duration, accuracy: 0.04, "the statistics count the movie's time")
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: url).path), "a clean stop leaves no sidecar")
    }

    /// maxRecordedDuration counts capture time in a timelapse: 2 s at one frame every 0.5 s stop by
    /// themselves after 4 frames, with a complete file.
    func testTheDurationLimitCountsCaptureTime() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.timelapseInterval = 0.5
        movie.maxRecordedDuration = 2
        let session = try await startSession(camera: stampedCamera, outputs: [movie])
        let url = folder.appendingPathComponent("limited.mp4")
        let finished = await recordUntilItEnds(movie, to: url, timeout: 20)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let answer = try XCTUnwrap(finished, "the limit did not stop the timelapse")
        guard case .maximumDurationReached? = answer.error else { return XCTFail("ended with \(String(describing: answer.error))") }
        let probed = try probe(url)
        XCTAssertEqual(probed.videoFrames ?? 0, 4, accuracy: 1)
        XCTAssertTrue(try ffmpegDecodes(url))
        let first = try captureTimeStamp(url, width: 640), last = try captureTimeStamp(url, width: 640, lastFrame: true)
        XCTAssertEqual(Double(Int32(bitPattern: last &- first)) / 1000, 1.5, accuracy: 0.6)
    }

    /// A pause takes its time out of the capture clock: frames are kept on the same grid after it, and
    /// none of the paused time is in the movie.
    func testAPauseLeavesNoFramesFromItsTime() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.timelapseInterval = 0.5
        movie.timelapseFrameRate = 10
        let session = try await startSession(camera: stampedCamera, outputs: [movie])
        let url = folder.appendingPathComponent("paused.mp4")
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .seconds(2))
        movie.pauseRecording()
        try await Task.sleep(for: .seconds(2))
        movie.resumeRecording()
        try await Task.sleep(for: .seconds(2))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let probed = try probe(url)
        let frames = try XCTUnwrap(probed.videoFrames)
        // About 4 s of capture recorded: 8 frames (the pause's edges may cost or give one each).
        XCTAssertEqual(frames, 8, accuracy: 2)
        XCTAssertEqual(probed.stream("video")?["r_frame_rate"] as? String, "10/1")
        XCTAssertEqual(probed.duration, Double(frames) / 10, accuracy: 0.11)
        let first = try captureTimeStamp(url, width: 640), last = try captureTimeStamp(url, width: 640, lastFrame: true)
        // The first and last frames span the recording, pause included (about 5.5 s of the clock).
        XCTAssertGreaterThan(Double(Int32(bitPattern: last &- first)) / 1000, Double(frames - 1) * 0.5 + 1.0,
                             "the pause's time did not pass between the frames")
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// Beside a plain recording, which takes its H.264 from the session's shared encoder, a timelapse of
    /// the same session encodes on its own (the shared encode sees every frame; the timelapse's encoder only
    /// those it keeps), and both files play.
    func testATimelapseNeverTakesTheSharedEncoder() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), timelapse = CaptureMovieFileOutput()
        timelapse.timelapseInterval = 0.5
        let session = try await startSession(camera: stampedCamera, outputs: [movie, timelapse])
        let clip = folder.appendingPathComponent("clip.mp4"), lapse = folder.appendingPathComponent("lapse.mp4")
        let clipWaiter = await startRecording(movie, to: clip)
        let lapseWaiter = await startRecording(timelapse, to: lapse)
        XCTAssertNil(movie.recordingBin?.element(named: VideoEncode.encoderName), "the plain recording is expected to share an encoder")
        XCTAssertNotNil(timelapse.recordingBin?.element(named: VideoEncode.encoderName), "the timelapse has no encoder of its own")
        XCTAssertEqual(try XCTUnwrap(session.runningGraph?.sharedEncoders).count, 1)
        try await Task.sleep(for: .seconds(2))
        movie.stopRecording()
        timelapse.stopRecording()
        try await assertFinishedWithoutError(clipWaiter)
        try await assertFinishedWithoutError(lapseWaiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertGreaterThanOrEqual(try probe(clip).videoFrames ?? 0, 55)
        XCTAssertEqual(try probe(lapse).videoFrames ?? 0, 4, accuracy: 1)
        XCTAssertTrue(try ffmpegDecodes(clip))
        XCTAssertTrue(try ffmpegDecodes(lapse))
    }

    /// A pre-roll asked of an output that records timelapses keeps no ring (it would encode every frame for
    /// nothing) and feeds no recording: the timelapse begins at its start, from the camera.
    func testATimelapseTakesNoPreRoll() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.preRollDuration = 2
        movie.timelapseInterval = 0.5
        let session = try await startSession(camera: stampedCamera, outputs: [movie])
        try await Task.sleep(for: .seconds(1.5))
        XCTAssertEqual(movie.preRollHolding.bytes, 0, "a ring runs beside the timelapse")
        let url = folder.appendingPathComponent("no-pre-roll.mp4")
        let pressed = monotonicMilliseconds()
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .seconds(1.5))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertGreaterThan(millisecondsFrom(pressed, to: try captureTimeStamp(url, width: 640)), -100, "the timelapse began before its start")
        XCTAssertEqual(try probe(url).videoFrames ?? 0, 3, accuracy: 1)
    }

    /// The choice itself, on made-up capture times: the first frame of each interval, on a grid from the
    /// first frame (the camera's jitter never accumulates; an interval no frame fell into is skipped, not
    /// made up), one frame apart in the movie whatever the gaps, and no rounding drift over a long shoot.
    func testTheSelectionKeepsTheFirstFrameOfEachIntervalOnTheGrid() {
        let timelapse = Timelapse(interval: 0.5, frameRate: 30)
        var selection = TimelapseSelection(timelapse)
        var kept: [(capture: UInt64, pts: UInt64, duration: UInt64)] = []
        // 30 fps with ±3 ms of jitter, a stall from 2.0 s to 3.3 s.
        for index in 0..<150 {
            let capture = UInt64(index) * 33_333_333 + UInt64([0, 3_000_000, 1_000_000][index % 3])
            if capture > 2_000_000_000, capture < 3_300_000_000 { continue }
            guard let placed = selection.placement(at: capture) else { continue }
            selection.keep(at: capture)
            kept.append((capture, placed.pts, placed.duration))
        }
        XCTAssertEqual(kept.map { $0.capture / 500_000_000 }, [0, 1, 2, 3, 6, 7, 8, 9], "one frame an interval; the stall's skipped")
        // Each the first of its interval (a frame and jitter into it); after the stall, the first frame that came.
        for frame in kept where frame.capture / 500_000_000 != 6 {
            XCTAssertLessThan(frame.capture % 500_000_000, 40_000_000, "not the first frame of its interval")
        }
        XCTAssertEqual(kept[4].capture, 100 * 33_333_333 + 3_000_000)
        XCTAssertEqual(kept.map(\.pts), (0..<8).map { UInt64($0) * 1_000_000_000 / 30 })
        XCTAssertEqual(kept.map(\.duration).reduce(0, +), 8 * 1_000_000_000 / 30, accuracy: 1)
        XCTAssertEqual(selection.kept, 8)
        // A day at one frame a second: 86,400 frames end exactly 2,880 s into the movie.
        XCTAssertEqual(timelapse.movieTime(ofFrame: 86_400), 2_880_000_000_000)
        // Fragments hold the capture's fragment interval: two frames at 0.5 s, never less than one.
        XCTAssertEqual(timelapse.fragmentDuration(holdingCaptureOf: 1), 66_666_666)
        XCTAssertEqual(Timelapse(interval: 10, frameRate: 30).fragmentDuration(holdingCaptureOf: 1), 33_333_333)
    }
}
