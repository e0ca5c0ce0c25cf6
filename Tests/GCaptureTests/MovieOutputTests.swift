import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

final class MovieOutputTests: XCTestCase {
    private func session(camera: CaptureDevice = .makeTestCamera(options: .init(maxFrameRate: 30)), microphone: CaptureDevice?,
                         preset: CaptureSession.Preset = .hd1280x720, outputs: [CaptureOutput]) async throws -> CaptureSession {
        try await startSession(camera: camera, microphone: microphone, preset: preset, outputs: outputs)
    }

    private func record(_ movie: CaptureMovieFileOutput, to url: URL, seconds: Double, expectStart: Bool = true,
                        during: (() async throws -> Void)? = nil) async throws -> CaptureError? {
        let waiter = RecordingWaiter()
        movie.startRecording(to: url, recordingDelegate: waiter)
        guard expectStart else { return await waiter.waitForFinish()?.error }
        let started = await waiter.waitForStart()
        XCTAssertTrue(started, "the recording did not start: \(waiter.finished?.error.map { "\($0)" } ?? "no answer")")
        let begin = Date()
        try await during?()
        let left = seconds - Date().timeIntervalSince(begin)
        if left > 0 { try await Task.sleep(for: .milliseconds(Int(left * 1000))) }
        movie.stopRecording()
        let finished = await waiter.waitForFinish()
        XCTAssertNotNil(finished, "the recording never finished")
        return finished?.error
    }

    /// The issue's yardstick: 5 s from the test camera with a real PulseAudio microphone.
    func testFiveSecondsWithARealMicrophonePlayInSyncWhileOtherOutputsRun() async throws {
        let server = try PulseAudioServer()
        defer { server.stop() }
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let frames = CaptureVideoDataOutput()
        let photos = CapturePhotoOutput()
        let log = FrameLog(frames)
        let microphone = try XCTUnwrap(CaptureDevice.device(withUniqueID: PulseAudioServer.microphoneID))
        let session = try await session(microphone: microphone, outputs: [movie, frames, photos])
        try await Task.sleep(for: .milliseconds(300))
        let url = folder.appendingPathComponent("five.mp4")
        let before = log.count
        var shots = 0
        let error = try await record(movie, to: url, seconds: 5) {
            for _ in 0..<3 {
                try await Task.sleep(for: .milliseconds(800))
                _ = try await photos.capturePhoto(within: engineDeadline)
                shots += 1
            }
        }
        let during = Array(log.all.dropFirst(before))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(error)
        let probed = try probe(url)
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.duration, 5, accuracy: 0.2)
        XCTAssertGreaterThanOrEqual(probed.videoFrames ?? 0, 146, "97% of 150 frames")
        let videoStart = try XCTUnwrap(probed.startTime("video")), audioStart = try XCTUnwrap(probed.startTime("audio"))
        XCTAssertLessThanOrEqual(abs(videoStart - audioStart), 0.05, "video starts at \(videoStart) s, audio at \(audioStart) s")
        XCTAssertTrue(try ffmpegDecodes(url))
        XCTAssertEqual(shots, 3)
        XCTAssertLessThan(FrameLog.longestGap(during), 0.1, "the frame output stalled while recording")
        XCTAssertGreaterThan(during.count, 140)
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: url).path), "a clean stop leaves no sidecar")
    }

    func testBackToBackRecordingsAndPauseResume() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try await session(microphone: .testMicrophone, preset: .vga640x480, outputs: [movie, frames])
        let before = log.count
        for index in 0..<3 {
            let url = folder.appendingPathComponent("clip-\(index).mp4")
            let error = try await record(movie, to: url, seconds: 1)
            XCTAssertNil(error)
            XCTAssertEqual(try probe(url).duration, 1, accuracy: 0.2)
        }
        // One second, a second's pause, one more second: two seconds of movie, tracks still together.
        let paused = folder.appendingPathComponent("paused.mp4")
        let error = try await record(movie, to: paused, seconds: 3) {
            try await Task.sleep(for: .seconds(1))
            movie.pauseRecording()
            XCTAssertTrue(movie.isRecordingPaused)
            try await Task.sleep(for: .seconds(1))
            movie.resumeRecording()
        }
        let during = Array(log.all.dropFirst(before))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(error)
        let probed = try probe(paused)
        XCTAssertEqual(probed.duration, 2, accuracy: 0.25)
        let videoDuration = (probed.stream("video")?["duration"] as? String).flatMap(Double.init) ?? 0
        let audioDuration = (probed.stream("audio")?["duration"] as? String).flatMap(Double.init) ?? 0
        XCTAssertEqual(videoDuration, audioDuration, accuracy: 0.1, "a pause must shift both tracks alike")
        XCTAssertLessThan(FrameLog.longestGap(during), 0.1, "recordings starting and stopping disturbed the frame output")
    }

    /// The connection's rotation is the MP4's display matrix (players turn the picture; the pixels keep the
    /// sensor's layout); Matroska (H.264 + Opus) cannot carry one, so there the pixels are turned.
    func testRotationBecomesTheDisplayMatrixOrTurnedPixels() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        // A still picture, so the turned pixels can be compared with the unturned recording's.
        let session = try await session(camera: .makeTestCamera(options: .init(motion: 0, maxFrameRate: 30)),
                                        microphone: .testMicrophone, preset: .vga640x480, outputs: [movie])
        for angle in [0, 90, 180, 270] {
            movie.connection.videoRotationAngle = Double(angle)
            let url = folder.appendingPathComponent("turned-\(angle).mp4")
            let error = try await record(movie, to: url, seconds: 0.6)
            XCTAssertNil(error)
            let probed = try probe(url)
            XCTAssertEqual(probed.clockwiseRotation, angle, "\(url.lastPathComponent): side data \(String(describing: probed.rotation))")
            XCTAssertEqual(probed.videoSize?.width, 640)
            XCTAssertTrue(try ffmpegDecodes(url))
            let boxes = try topLevelBoxes(url)
            XCTAssertTrue(boxes.contains("moov") && !boxes.contains("moof"), "a clean stop leaves a plain MP4: \(boxes)")
        }
        // Keeping the fragments is a choice; that file plays as well.
        movie.defragmentsMovieOnStop = false
        let fragmented = folder.appendingPathComponent("fragmented.mp4")
        let kept = try await record(movie, to: fragmented, seconds: 0.6)
        XCTAssertNil(kept)
        XCTAssertTrue(try topLevelBoxes(fragmented).contains("moof"))
        XCTAssertEqual(try probe(fragmented).clockwiseRotation, 270)
        XCTAssertTrue(try ffmpegDecodes(fragmented))
        movie.connection.videoRotationAngle = 90
        movie.fileType = .matroska
        let turned = folder.appendingPathComponent("turned.mkv")
        let error = try await record(movie, to: turned, seconds: 0.6)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(error)
        let probed = try probe(turned)
        XCTAssertEqual(probed.videoSize?.width, 480)
        XCTAssertEqual(probed.videoSize?.height, 640)
        XCTAssertEqual(probed.clockwiseRotation, 0)
        // 90 and 270 give the same size: the picture itself must be the unturned one turned clockwise.
        let sensor = try firstFrame(of: folder.appendingPathComponent("turned-0.mp4"), in: folder)
        XCTAssertEqual(try clockwiseTurn(of: try firstFrame(of: turned, in: folder), from: sensor), 90)
        XCTAssertEqual(probed.codecs.sorted(), ["h264", "opus"])
        XCTAssertEqual(probed.duration, 0.6, accuracy: 0.2)
        XCTAssertTrue(try ffmpegDecodes(turned))
    }

    /// A copy into a plain MP4 that runs out of time is abandoned, and the fragmented movie stays finished: no
    /// sidecar, no half-written copy beside it, and it plays. That is what a service's stop gets from a long
    /// recording (CaptureController gives the copy 20 s). With time, the same output makes the plain MP4.
    func testACopyPastTheDefragmentTimeLimitLeavesTheFinishedFragmentedMovie() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        XCTAssertEqual(movie.defragmentTimeLimit, 600)
        let session = try await session(microphone: .testMicrophone, preset: .vga640x480, outputs: [movie])
        movie.defragmentTimeLimit = 0
        let cutShort = folder.appendingPathComponent("cut-short.mp4")
        let error = try await record(movie, to: cutShort, seconds: 1.0)
        movie.defragmentTimeLimit = 600
        let plain = folder.appendingPathComponent("plain.mp4")
        let plainError = try await record(movie, to: plain, seconds: 1.0)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        XCTAssertNil(error, "a movie kept fragmented is finished")
        XCTAssertTrue(try topLevelBoxes(cutShort).contains("moof"), "the copy was abandoned and the fragments stayed")
        XCTAssertEqual(try probe(cutShort).duration, 1.0, accuracy: 0.3)
        XCTAssertEqual(try probe(cutShort).codecs.sorted(), ["aac", "h264"])
        XCTAssertTrue(try ffmpegDecodes(cutShort))
        XCTAssertNil(plainError)
        let plainBoxes = try topLevelBoxes(plain)
        XCTAssertTrue(plainBoxes.contains("moov") && !plainBoxes.contains("moof"), "given time, the copy is made: \(plainBoxes)")
        // Neither sidecar nor the abandoned copy (a hidden `.NAME.remuxing.mp4`) is left in the folder.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted(), ["cut-short.mp4", "plain.mp4"])
    }

    /// A movie's first frame as a PNG, as stored (no display matrix applied).
    private func firstFrame(of movie: URL, in folder: URL) throws -> URL {
        let png = folder.appendingPathComponent(movie.deletingPathExtension().lastPathComponent + "-first.png")
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-noautorotate", "-i", movie.path,
                                                      "-frames:v", "1", png.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return png
    }

    /// Hardware encoders come first where GStreamer registers one; the names of their rate-control
    /// properties differ, so they are matched on the real element.
    func testTheH264EncoderIsChosenAndConfiguredByWhatIsInstalled() throws {
        XCTAssertEqual(try H264Encoder.choose(isInstalled: { ["x264enc", "vah264enc"].contains($0) }).factory, "vah264enc")
        XCTAssertEqual(try H264Encoder.choose(isInstalled: { $0 == "openh264enc" }).factory, "openh264enc")
        XCTAssertThrowsError(try H264Encoder.choose("nosuch264enc")) { error in
            XCTAssertEqual(error as? CaptureError, .missingPlugin("nosuch264enc"))
        }
        // x264enc stands in for a hardware encoder here: the properties it shares with them get the settings.
        let element = try Element.make("x264enc")
        try H264Encoder(factory: "nvh264enc").configure(element, bitRate: 6_000_000, keyInterval: 25)
        XCTAssertEqual(element.intProperty("bitrate"), 6000)
        XCTAssertEqual(element.intProperty("key-int-max"), 25)
        XCTAssertEqual(element.intProperty("bframes"), 0)
        // The camera's 4:2:0 frames go to the encoder unconverted where it takes them.
        XCTAssertEqual(H264Encoder(factory: "x264enc").inputFormat(forCameraFormat: "NV12"), "NV12")
        XCTAssertEqual(H264Encoder(factory: "x264enc").inputFormat(forCameraFormat: "YUY2"), "I420")
        XCTAssertEqual(H264Encoder(factory: "openh264enc").inputFormat(forCameraFormat: "NV12"), "I420")
        XCTAssertEqual(H264Encoder(factory: "vah264enc").inputFormat(forCameraFormat: "YUY2"), "NV12")
    }

    func testAnotherEncoderCanBeAskedFor() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.videoEncoder = "openh264enc"
        let session = try await session(microphone: .testMicrophone, preset: .vga640x480, outputs: [movie])
        let url = folder.appendingPathComponent("openh264.mp4")
        let error = try await record(movie, to: url, seconds: 1)
        XCTAssertEqual(movie.lastStatistics.frames > 0, true)
        movie.videoEncoder = "nosuch264enc"
        let refused = try await record(movie, to: folder.appendingPathComponent("refused.mp4"), seconds: 0, expectStart: false)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(error)
        XCTAssertEqual(refused, .missingPlugin("nosuch264enc"))
        let probed = try probe(url)
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.duration, 1, accuracy: 0.2)
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// Two cameras recording into one folder: the second's start looks for crashed recordings there and
    /// must leave the first's live one alone.
    func testARecordingStartingBesideALiveOneLeavesItAlone() async throws {
        let folder = try temporaryFolder()
        let first = CaptureMovieFileOutput(), second = CaptureMovieFileOutput()
        let firstSession = try await session(microphone: nil, preset: .vga640x480, outputs: [first])
        let secondSession = try await session(microphone: nil, preset: .vga640x480, outputs: [second])
        let firstURL = folder.appendingPathComponent("first.mp4"), secondURL = folder.appendingPathComponent("second.mp4")
        var interruptedWhileLive: [URL] = []
        let error = try await record(first, to: firstURL, seconds: 3) {
            try await Task.sleep(for: .milliseconds(500))
            interruptedWhileLive = MovieRecovery.interruptedRecordings(in: folder)
            let secondError = try await self.record(second, to: secondURL, seconds: 1)
            XCTAssertNil(secondError)
        }
        try await within(engineDeadline, "firstSession.stop()") { await firstSession.stop() }
        try await within(engineDeadline, "secondSession.stop()") { await secondSession.stop() }
        XCTAssertNil(error)
        XCTAssertEqual(interruptedWhileLive, [], "a live recording is not an interrupted one")
        XCTAssertEqual(try probe(firstURL).duration, 3, accuracy: 0.25)
        XCTAssertEqual(try probe(secondURL).duration, 1, accuracy: 0.25)
        XCTAssertTrue(try ffmpegDecodes(firstURL))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted(), ["first.mp4", "second.mp4"])
    }

    /// What the camera took until stopRecording is in the movie, however late its frames come (a camera that
    /// delivers a frame long after it took it, a slow encoder): the file used to end where the frames had got to
    /// at the stop, which lost the last second of a recording in the VM's emulated CPU.
    func testAStopKeepsTheFramesTakenBeforeItThatComeLate() async throws {
        let delay = 1.0
        let late = CaptureDevice.makeTestCamera(uniqueID: "late-frames", options: .init(
            pattern: .checkers, motion: 2, sizes: [.init(width: 640, height: 480)], maxFrameRate: 30, deliveryDelay: delay))
        let movie = CaptureMovieFileOutput()
        let session = try makeSession(camera: late, outputs: [movie])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        // The camera's first second of frames all say they were taken at its start (no time is before zero).
        try await Task.sleep(for: .milliseconds(Int(delay * 1000) + 300))
        let url = try temporaryFolder().appendingPathComponent("late.mp4")
        let recording = await startRecording(movie, to: url)
        // Heard after the branch is attached: the file's first frame is one that came after this, taken `delay` earlier.
        let started = Date()
        try await Task.sleep(for: .milliseconds(1500))
        let stopped = Date()
        movie.stopRecording()
        try await assertFinishedWithoutError(recording)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        // From a frame taken `delay` before the start was heard to the last frame taken before the stop; the frames
        // taken in the last `delay` before the stop came after it.
        let duration = try probe(url).duration
        let heard = stopped.timeIntervalSince(started)
        XCTAssertGreaterThan(duration, heard + delay / 2, "the frames taken before the stop that came after it are missing")
        XCTAssertLessThan(duration, heard + delay + 0.3, "frames taken after the stop are in")
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    func testTheSizeLimitStopsWithACompleteFile() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.maxRecordedFileSize = 1_500_000
        let session = try await session(microphone: .testMicrophone, preset: .hd1280x720, outputs: [movie])
        let url = folder.appendingPathComponent("limited.mp4")
        let finished = await recordUntilItEnds(movie, to: url, timeout: 20)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(finished?.error, .maximumFileSizeReached)
        XCTAssertTrue(finished?.error?.recordingFinishedSuccessfully ?? false)
        let size = try fileSize(url)
        XCTAssertLessThanOrEqual(size, 1_500_000)
        XCTAssertGreaterThan(try probe(url).duration, 0.5)
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    func testAnUnwritablePathIsATypedErrorAndTheSessionRunsOn() async throws {
        let movie = CaptureMovieFileOutput()
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try await session(microphone: nil, preset: .vga640x480, outputs: [movie, frames])
        let waiter = RecordingWaiter()
        movie.startRecording(to: URL(fileURLWithPath: "/nonexistent-gcapture/x.mp4"), recordingDelegate: waiter)
        let finished = await waiter.waitForFinish()
        XCTAssertTrue("\(finished?.error.map { "\($0)" } ?? "")".contains("/nonexistent-gcapture does not exist"))
        let after = await log.collect(for: 0.3)
        XCTAssertTrue(session.isRunning)
        XCTAssertGreaterThan(after.count, 5)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// As AVFoundation's: a file at the URL is never replaced, the recording fails with a typed error and the
    /// file keeps every byte; removeMovie(at:) clears the way, and refuses while a recording writes the file.
    func testARecordingNeverReplacesAFileUnlessItIsRemovedFirst() async throws {
        let folder = try temporaryFolder()
        let url = folder.appendingPathComponent("taken.mp4")
        let earlier = Data("yesterday's recording".utf8)
        try earlier.write(to: url)
        let movie = CaptureMovieFileOutput()
        let session = try await session(microphone: nil, preset: .vga640x480, outputs: [movie])
        let error = try await record(movie, to: url, seconds: 0, expectStart: false)
        XCTAssertEqual(error, .fileAlreadyExists(path: url.path))
        XCTAssertEqual(try Data(contentsOf: url), earlier)
        XCTAssertFalse(movie.isRecording)

        try CaptureMovieFileOutput.removeMovie(at: url)
        let waiter = RecordingWaiter()
        movie.startRecording(to: url, recordingDelegate: waiter)
        let started = await waiter.waitForStart()
        XCTAssertTrue(started)
        XCTAssertThrowsError(try CaptureMovieFileOutput.removeMovie(at: url), "a movie being recorded is not removed") { error in
            XCTAssertTrue("\(error)".contains("is being recorded"), "\(error)")
        }
        try await Task.sleep(for: .milliseconds(700))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertGreaterThan(try probe(url).duration, 0.5)
    }
}
