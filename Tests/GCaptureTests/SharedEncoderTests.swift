import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// A recording and a stream of one session take their H.264 from one encoder where the stream can carry
/// the recording's encode; each output comes and goes without disturbing the other, and every file and
/// stream begins (and a recording resumes) at a key frame.
final class SharedEncoderTests: XCTestCase {
    /// H.264 encoders in the session's running graph, counted from the graph GStreamer describes.
    private func encoderCount(_ session: CaptureSession) -> Int {
        (session.launchDescription ?? "").components(separatedBy: "x264enc").count - 1
    }

    private func waitFor(_ stream: CaptureStreamOutput, _ name: String, within seconds: Double) async throws {
        _ = try await firstElement(of: stream.stateUpdates(), within: seconds, "the stream going \(name)") { $0.name == name || $0.name == "failed" }
        XCTAssertEqual(stream.state.name, name)
    }

    private func session(_ outputs: [CaptureOutput]) async throws -> CaptureSession {
        try await startSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), microphone: .testMicrophone,
                               preset: .vga640x480, outputs: outputs)
    }

    /// Key-frame flags of a file's video packets, in order.
    private func keyFlags(_ url: URL) throws -> [Bool] {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=flags",
                                                      "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.split(separator: "\n").map { $0.contains("K") }
    }

    func testARecordingAndAStreamOfOneSessionShareOneEncode() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), stream = CaptureStreamOutput()
        stream.keyFrameInterval = 2
        let session = try await session([movie, stream])
        defer { Task { await session.stop() } }
        let url = folder.appendingPathComponent("shared.mp4"), playlist = folder.appendingPathComponent("live.m3u8")
        let waiter = await startRecording(movie, to: url)
        XCTAssertEqual(encoderCount(session), 1)
        try stream.startStreaming(to: playlist.path)
        try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(encoderCount(session), 1, "the stream carries the recording's encode")
        try await Task.sleep(for: .seconds(3))
        // The stream ends; the recording goes on from the same encoder, without a gap.
        stream.stopStreaming()
        try await waitFor(stream, "idle", within: 5)
        let sent = stream.statistics
        try await Task.sleep(for: .seconds(1))
        XCTAssertEqual(encoderCount(session), 1)
        movie.stopRecording()
        let outcome = await waiter.waitForFinish()
        let finished = try XCTUnwrap(outcome)
        XCTAssertNil(finished.error)
        XCTAssertEqual(encoderCount(session), 0, "an encoder nobody uses is gone")

        let recorded = movie.lastStatistics
        XCTAssertEqual(recorded.droppedFrames, 0, "the stream's coming and going cost the recording no frame")
        let probed = try probe(url)
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.stream("video")?["profile"] as? String, "Main")
        XCTAssertEqual(Double(probed.videoFrames ?? 0), probed.duration * 30, accuracy: 3, "a frame every 1/30 s throughout")
        XCTAssertGreaterThan(probed.duration, 4)
        XCTAssertTrue(try ffmpegDecodes(url))
        XCTAssertEqual(try keyFlags(url).first, true, "the movie begins at a key frame")
        // The stream played: its segments decode, with the stream's profile and chroma.
        let streamed = try probe(playlist, countFrames: false)
        XCTAssertEqual(streamed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(streamed.stream("video")?["pix_fmt"] as? String, "yuv420p")
        XCTAssertGreaterThan(sent.videoFramesSent, 60, "\(sent)")
        XCTAssertTrue(try ffmpegDecodes(playlist))
    }

    /// A kiosk streams all day and records now and then: a recording started while a stream (all settings
    /// left at their defaults) runs joins the stream's encode, its bit rate and its key frames every 2 s,
    /// begins at a key frame it asks for, and leaves the stream alone when it ends.
    func testARecordingThatJoinsARunningEncodeBeginsAtAKeyFrame() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), stream = CaptureStreamOutput()
        let session = try await session([movie, stream])
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: folder.appendingPathComponent("live.m3u8").path)
        try await waitFor(stream, "live", within: 10)
        // Half-way between the stream's key frames.
        try await Task.sleep(for: .seconds(1.5))
        let url = folder.appendingPathComponent("joined.mp4")
        let waiter = await startRecording(movie, to: url)
        XCTAssertEqual(encoderCount(session), 1, "the recording joined the stream's encode")
        try await Task.sleep(for: .seconds(1.2))
        movie.pauseRecording()
        try await Task.sleep(for: .seconds(0.7))
        movie.resumeRecording()
        try await Task.sleep(for: .seconds(1.2))
        movie.stopRecording()
        let outcome = await waiter.waitForFinish()
        let finished = try XCTUnwrap(outcome)
        XCTAssertNil(finished.error)
        XCTAssertEqual(stream.state.name, "live", "the recording's end left the stream alone")
        XCTAssertEqual(encoderCount(session), 1)
        stream.stopStreaming()
        try await waitFor(stream, "idle", within: 5)

        let keys = try keyFlags(url)
        XCTAssertEqual(keys.first, true, "the movie begins at a key frame, not at the running encode's next frame")
        XCTAssertLessThanOrEqual(keys.count(where: { $0 }), 4, "the stream's key frames (every 2 s) and the ones asked for: \(keys)")
        XCTAssertTrue(try ffmpegDecodes(url), "every frame decodes: the resume began at a key frame too")
        let probed = try probe(url)
        XCTAssertEqual(probed.duration, 2.4, accuracy: 0.3, "the pause is not in the movie")
        let video = (probed.stream("video")?["duration"] as? String).flatMap(Double.init) ?? 0
        let audio = (probed.stream("audio")?["duration"] as? String).flatMap(Double.init) ?? 0
        XCTAssertEqual(video, audio, accuracy: 0.1, "the tracks stay together across the pause")
    }

    /// A stream given a bit rate of its own does not take the recording's: it encodes separately.
    func testAStreamWithItsOwnBitRateEncodesSeparately() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), stream = CaptureStreamOutput()
        stream.videoBitRate = 400_000
        let session = try await session([movie, stream])
        defer { Task { await session.stop() } }
        let waiter = await startRecording(movie, to: folder.appendingPathComponent("own.mp4"))
        try stream.startStreaming(to: folder.appendingPathComponent("live.m3u8").path)
        try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(encoderCount(session), 2)
        movie.stopRecording()
        let outcome = await waiter.waitForFinish()
        XCTAssertNil(try XCTUnwrap(outcome).error)
        XCTAssertEqual(encoderCount(session), 1, "the recording's encoder left with it; the stream's runs on")
        XCTAssertEqual(stream.state.name, "live")
        stream.stopStreaming()
        try await waitFor(stream, "idle", within: 5)
    }

    /// Frames the shared encoder could not take (it stalled for longer than its input queue holds) count
    /// as dropped in the stream's statistics, though they never reached the stream's branch.
    func testAStreamCountsTheFramesItsEncoderDropped() async throws {
        let folder = try temporaryFolder()
        let stream = CaptureStreamOutput()
        let session = try await session([stream])
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: folder.appendingPathComponent("live.m3u8").path)
        try await waitFor(stream, "live", within: 10)
        let encoder = try XCTUnwrap(session.runningGraph?.sharedEncoders.first?.encoderElement?.staticPad("sink"))
        XCTAssertEqual(stream.statistics.droppedFrames, 0, "\(stream.statistics)")
        // 2.5 s stuck in front of the encoder: its 1 s input queue overflows and drops about 45 frames.
        let stuck = FirstTime()
        encoder.addProbe(.buffer) { _ in
            if stuck.claim() { Thread.sleep(forTimeInterval: 2.5) }
            return .ok
        }
        try await Task.sleep(for: .seconds(3.5))
        let figures = stream.statistics
        stream.stopStreaming()
        try await waitFor(stream, "idle", within: 5)
        XCTAssertGreaterThan(figures.droppedFrames, 25, "\(figures)")
        XCTAssertLessThan(figures.droppedFrames, 75, "\(figures)")
    }

    /// Who joins whose encode: the same pictures always; key frames where a stream cuts its segments, often
    /// enough for a recording; the bit rate only where the joiner set one.
    func testWhichEncodeSatisfiesWhom() throws {
        let x264 = H264Encoder(factory: "x264enc")
        func encode(bitRate: Int = 1_228_800, keyInterval: Int = 30, profile: String = "main", width: Int = 640) -> VideoEncode {
            VideoEncode(encoder: x264, bitRate: bitRate, keyInterval: keyInterval, profile: profile, frameRate: 30,
                        frameSize: .init(width: width, height: 480), inputFormat: "I420")
        }
        let recordingDefault = VideoEncodeRequest(encode: encode(), acceptsAnyBitRate: true, longestKeyInterval: 60)
        let streamDefault = VideoEncodeRequest(encode: encode(bitRate: 614_400, keyInterval: 60), acceptsAnyBitRate: true)
        XCTAssertTrue(encode().satisfies(streamDefault), "1 s key frames serve a stream cut every 2 s")
        XCTAssertTrue(encode(bitRate: 614_400, keyInterval: 60).satisfies(recordingDefault), "a recording takes a stream's 2 s")
        XCTAssertFalse(encode(keyInterval: 90).satisfies(recordingDefault), "3 s between key frames is too long for a recording")
        XCTAssertFalse(encode(keyInterval: 45).satisfies(streamDefault), "key frames off the stream's interval")
        XCTAssertFalse(encode().satisfies(VideoEncodeRequest(encode: encode(bitRate: 400_000, keyInterval: 60))), "a bit rate set by the user")
        XCTAssertFalse(encode().satisfies(VideoEncodeRequest(encode: encode(keyInterval: 60, profile: "constrained-baseline"),
                                                             acceptsAnyBitRate: true)))
        XCTAssertFalse(encode(width: 1280).satisfies(recordingDefault), "other pictures")
    }

    /// Frames missing between two that reach the file are counted by the gap's length in frame intervals, rounded:
    /// a camera's frames arrive a little early or late, and a busy encoder lets go of most of them.
    func testFramesMissingFromTheFileAreCountedByTheGapRounded() {
        let timeline = RecordingTimeline()
        let frame: ClockTime = 40_000_000, jitter: ClockTime = 3_000_000
        // Three frames missing before each kept one, the gap 0.075 intervals over four or short of it by as much,
        // then one frame missing, the gap 1.525 intervals.
        var times: [ClockTime] = [0]
        for index in 0..<19 { times.append(times.last! + (index % 2 == 0 ? 4 * frame + jitter : 4 * frame - jitter)) }
        times.append(times.last! + frame * 3 / 2 + frame / 40)
        for (index, time) in times.enumerated() {
            XCTAssertTrue(timeline.muxVideo(time, duration: frame, bytes: 1000, isKeyFrame: index == 0))
        }
        XCTAssertEqual(timeline.stats.frames, times.count)
        XCTAssertEqual(timeline.stats.droppedFrames, 19 * 3 + 1)
    }

    /// With encoded frames, the file and every resume begin at a key frame: delta frames before one are
    /// left out, and the pause lasts until it.
    func testATimelineOfEncodedFramesBeginsAndResumesAtKeyFrames() {
        let timeline = RecordingTimeline()
        let frame: ClockTime = 33_333_333
        XCTAssertNil(timeline.admitEncodedVideo(0, duration: frame, isKeyFrame: false)?.shift, "no file begins with a delta frame")
        XCTAssertEqual(timeline.admitEncodedVideo(frame, duration: frame, isKeyFrame: true)?.shift, frame)
        XCTAssertEqual(timeline.admitEncodedVideo(2 * frame, duration: frame, isKeyFrame: false)?.shift, frame)
        timeline.pause()
        XCTAssertNil(timeline.admitEncodedVideo(3 * frame, duration: frame, isKeyFrame: true)?.shift)
        timeline.resume()
        XCTAssertNil(timeline.admitEncodedVideo(4 * frame, duration: frame, isKeyFrame: false)?.shift, "a resume waits for a key frame")
        XCTAssertTrue(timeline.isResuming)
        XCTAssertEqual(timeline.admitEncodedVideo(5 * frame, duration: frame, isKeyFrame: true)?.shift, 3 * frame,
                       "the pause lasted from the first frame left out to the key frame")
        XCTAssertFalse(timeline.isResuming)
    }

    /// An encoded frame of the same moment as the one before (a camera's frames bunched under load, two cameras'
    /// at a switch) goes in a moment after it, not out: the frames after it need it. Dropped, a key frame left
    /// twelve frames that ffmpeg could not decode (CameraSwitchV4L2Tests: 345 frames of 357 in the file).
    func testAnEncodedFrameOfTheSameMomentGoesInAMomentLater() throws {
        let timeline = RecordingTimeline()
        let second: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333, moment = SourceCut.oneMoment(frameDuration: frame)
        XCTAssertEqual(timeline.admitEncodedVideo(second, duration: frame, isKeyFrame: true), .init(shift: second))
        let key = try XCTUnwrap(timeline.admitEncodedVideo(second + 100_000, duration: frame, isKeyFrame: true), "a key frame 100 µs later")
        XCTAssertEqual(key, .init(shift: second, later: moment + 1 - 100_000))
        let delta = try XCTUnwrap(timeline.admitEncodedVideo(second + 200_000, duration: frame, isKeyFrame: false))
        XCTAssertEqual(delta.later, 2 * (moment + 1) - 200_000, "and the next one a moment after that")
        XCTAssertEqual(timeline.admitEncodedVideo(second + frame, duration: frame, isKeyFrame: false), .init(shift: second),
                       "a frame a moment later keeps its time")
        XCTAssertNil(timeline.admitVideo(second + frame + 100_000, duration: frame), "a raw frame of the same moment stays out")
    }

    /// A pause and a resume with no frame between them leave the timeline running, audio included (the
    /// resume used to keep the pause for good when no frame had fallen into it).
    func testAPauseNoFrameFellIntoTakesNothingOut() {
        let timeline = RecordingTimeline()
        let frame: ClockTime = 33_333_333
        XCTAssertEqual(timeline.admitVideo(0, duration: frame), 0)
        timeline.pause()
        timeline.resume()
        XCTAssertEqual(timeline.admitVideo(frame, duration: frame), 0)
        XCTAssertFalse(timeline.isPaused)
        XCTAssertNotNil(timeline.admitAudio(frame, duration: 1_000_000), "audio goes on after the resume")
    }
}
