import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// The movie output across interruptions (issue 11, "nothing captured is lost"), on a real session whose
/// devices InterruptionDriver interrupts the way the session's machinery does; files checked by ffprobe and
/// ffmpeg.
final class RecordingInterruptionTests: XCTestCase {
    private let camera = CaptureDevice.makeTestCamera(options: .init(maxFrameRate: 30))

    /// Seconds of each track, as ffprobe reads them from the file.
    private func trackDurations(_ url: URL) throws -> (video: Double, audio: Double) {
        let probed = try probe(url, countFrames: false)
        // MP4 gives each stream's duration; GStreamer's Matroska none: there, first packet to last packet's end.
        func seconds(_ type: String) throws -> Double? {
            guard let stream = probed.stream(type) else { return nil }
            if let duration = (stream["duration"] as? String).flatMap(Double.init) { return duration }
            let packets = try self.packets(url, stream: type == "video" ? "v" : "a")
            guard let first = packets.first, let last = packets.max(by: { $0.0 < $1.0 }) else { return nil }
            return last.0 + last.1 - first.0
        }
        let video = try XCTUnwrap(try seconds("video"), "no video track")
        let audio = try XCTUnwrap(try seconds("audio"), "no audio track")
        return (video, audio)
    }

    /// The longest hole in the file's audio track: seconds between one packet's end and the next one's start,
    /// as ffprobe reads them. Players that play audio sample after sample would run everything after a hole
    /// that much early.
    private func longestAudioHole(_ url: URL) throws -> Double {
        let packets = try packets(url, stream: "a")
        XCTAssertGreaterThan(packets.count, 10, "no audio packets")
        return zip(packets, packets.dropFirst()).map { $1.0 - ($0.0 + $0.1) }.max() ?? 0
    }

    /// A stream's packets ("v" or "a"), (start, duration) in seconds, in file order.
    private func packets(_ url: URL, stream: String) throws -> [(Double, Double)] {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", stream, "-show_entries",
                                                       "packet=pts_time,duration_time", "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.split(separator: "\n").compactMap { line -> (Double, Double)? in
            let fields = line.split(separator: ",").compactMap { Double($0) }
            return fields.count == 2 ? (fields[0], fields[1]) : nil
        }
    }

    private func pause(_ seconds: Double) async throws { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }

    func testByDefaultARecordingGoesThroughACameraInterruptionInOneFile() async throws {
        try await recordThroughACameraInterruption(.mp4)
    }

    func testAMatroskaRecordingGoesThroughACameraInterruptionInOneFile() async throws {
        try await recordThroughACameraInterruption(.matroska)
    }

    private func recordThroughACameraInterruption(_ fileType: CaptureMovieFileOutput.FileType) async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        XCTAssertEqual(movie.interruptionBehavior, .continueThroughGap)
        movie.fileType = fileType
        let session = try await startSession(camera: camera, microphone: .testMicrophone, outputs: [movie, driver])
        let url = folder.appendingPathComponent(fileType == .mp4 ? "clip.mp4" : "clip.mkv")
        let log = RecordingLog()
        movie.startRecording(to: url, recordingDelegate: log)
        try await log.wait(for: 1, "the recording's start")
        try await pause(1.5)
        // The camera goes away as v4l2src does: its end-of-stream runs through the tee first.
        try await driver.interrupt(.videoDeviceUnplugged, pushEndOfStream: true)
        try await pause(1.5)
        XCTAssertTrue(movie.isRecording)
        XCTAssertEqual(movie.outputFileURL, url)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await pause(1.5)
        movie.stopRecording()
        try await log.wait(for: 2, "the recording's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        XCTAssertEqual(log.events, [.started(url), .finished(url, nil)])
        XCTAssertGreaterThan(driver.fillerBuffers.withLock { $0 }, 20, "the filler delivered frames")
        let probed = try probe(url)
        XCTAssertEqual(probed.duration, 4.5, accuracy: 0.4, "one timeline through the gap")
        let (video, audio) = try trackDurations(url)
        print("through the gap (\(fileType)): \(probed.duration) s, video \(video) s, audio \(audio) s")
        XCTAssertEqual(video, audio, accuracy: 0.1, "video \(video) s, audio \(audio) s")
        XCTAssertTrue(try ffmpegDecodes(url))
        // Colour bars, then the filler's black for about the gap, then colour bars again.
        let lumas = try frameLumas(url)
        let black = lumas.filter { $0 < 24 }.count
        XCTAssertEqual(Double(black) / 30, 1.5, accuracy: 0.35, "\(black) black frames of \(lumas.count)")
        XCTAssertGreaterThan(lumas.first ?? 0, 40)
        XCTAssertGreaterThan(lumas.last ?? 0, 40, "the camera's frames after recovery are in the file")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), [url.lastPathComponent])
    }

    /// A recording with `.finalizeAndResume` started into NAME.mp4 of a new folder; NAME-2.mp4 is where it goes on.
    private func startFinalizingRecording(named name: String) async throws
        -> (CaptureSession, CaptureMovieFileOutput, InterruptionDriver, RecordingLog, first: URL, second: URL) {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        movie.interruptionBehavior = .finalizeAndResume
        let session = try await startSession(camera: camera, microphone: .testMicrophone, outputs: [movie, driver])
        let first = folder.appendingPathComponent("\(name).mp4"), second = folder.appendingPathComponent("\(name)-2.mp4")
        let log = RecordingLog()
        movie.startRecording(to: first, recordingDelegate: log)
        try await log.wait(for: 1, "the recording's start")
        return (session, movie, driver, log, first, second)
    }

    func testFinalizeAndResumeEndsTheFileAtTheInterruptionAndGoesOnInTheNextFile() async throws {
        let (session, movie, driver, log, first, second) = try await startFinalizingRecording(named: "clip")
        try await pause(1.5)
        // The session hears of the cause after its filler is in: the filler's frames stay out all the same.
        try await driver.interrupt(.videoDeviceInUseByAnotherClient, pushEndOfStream: true, hooksAfter: 0.2)
        // Finalized while the camera is still away: the file is complete and plays now.
        try await log.wait(for: 2, "the first file's end")
        XCTAssertEqual(log.events.last, .finished(first, .sessionWasInterrupted(.videoDeviceInUseByAnotherClient)))
        XCTAssertTrue(CaptureError.sessionWasInterrupted(.videoDeviceInUseByAnotherClient).recordingFinishedSuccessfully)
        XCTAssertTrue(movie.isRecording, "the recording waits for the camera")
        XCTAssertNil(movie.outputFileURL, "no file is open between files")
        XCTAssertEqual(try probe(first).duration, 1.5, accuracy: 0.3)
        XCTAssertTrue(try ffmpegDecodes(first))
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: first).path))
        try await pause(1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: second.path), "nothing is recorded while the camera is away")
        try await driver.endInterruption(.videoDeviceInUseByAnotherClient)
        try await log.wait(for: 3, "the next file's start")
        XCTAssertEqual(movie.outputFileURL, second)
        try await pause(1.5)
        movie.stopRecording()
        try await log.wait(for: 4, "the next file's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        XCTAssertEqual(log.events, [.started(first), .finished(first, .sessionWasInterrupted(.videoDeviceInUseByAnotherClient)),
                                    .started(second), .finished(second, nil)])
        XCTAssertGreaterThan(driver.fillerBuffers.withLock { $0 }, 20, "the filler delivered frames")
        for url in [first, second] {
            XCTAssertTrue(try ffmpegDecodes(url), url.lastPathComponent)
            let (video, audio) = try trackDurations(url)
            XCTAssertEqual(video, audio, accuracy: 0.1, "\(url.lastPathComponent): video \(video) s, audio \(audio) s")
            let lumas = try frameLumas(url)
            XCTAssertEqual(lumas.filter { $0 < 24 }.count, 0, "\(url.lastPathComponent) holds filler frames: \(lumas)")
        }
        XCTAssertEqual(try probe(second).duration, 1.5, accuracy: 0.3)
    }

    func testFinalizeAndResumeAcrossABriefInterruptionTellsTheDelegateInOrder() async throws {
        let (session, movie, driver, log, first, second) = try await startFinalizingRecording(named: "brief")
        try await pause(1)
        // Back before the first file is settled (its fragments are rewritten as a plain MP4 meanwhile).
        try await driver.interrupt(.videoDeviceUnplugged)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await log.wait(for: 3, "the next file's start")
        try await pause(1)
        movie.stopRecording()
        try await log.wait(for: 4, "the next file's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(log.events, [.started(first), .finished(first, .sessionWasInterrupted(.videoDeviceUnplugged)),
                                    .started(second), .finished(second, nil)])
        for url in [first, second] {
            XCTAssertEqual(try probe(url).duration, 1, accuracy: 0.3, url.lastPathComponent)
            XCTAssertTrue(try ffmpegDecodes(url), url.lastPathComponent)
        }
    }

    func testFinalizeAndResumeCarriesAPauseToTheNextFileAndAResumeBetweenFilesToo() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        movie.interruptionBehavior = .finalizeAndResume
        let session = try await startSession(camera: camera, outputs: [movie, driver])
        let first = folder.appendingPathComponent("paused.mp4"), second = folder.appendingPathComponent("paused-2.mp4")
        let third = folder.appendingPathComponent("paused-3.mp4")
        let log = RecordingLog()
        movie.startRecording(to: first, recordingDelegate: log)
        try await log.wait(for: 1, "the recording's start")
        try await pause(1)
        movie.pauseRecording()
        try await driver.interrupt(.videoDeviceUnplugged)
        try await log.wait(for: 2, "the first file's end")
        XCTAssertTrue(movie.isRecordingPaused, "paused between files")
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await log.wait(for: 3, "the second file's start")
        try await pause(0.8)
        XCTAssertTrue(movie.isRecordingPaused, "the next file begins paused")
        XCTAssertEqual(movie.recordedDuration, 0, "nothing recorded while paused")
        movie.resumeRecording()
        try await pause(1)
        try await driver.interrupt(.videoDeviceUnplugged)
        try await log.wait(for: 4, "the second file's end")
        // Paused and resumed between files: the third file records from its start.
        movie.pauseRecording()
        movie.resumeRecording()
        XCTAssertFalse(movie.isRecordingPaused)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await log.wait(for: 5, "the third file's start")
        try await pause(1)
        movie.stopRecording()
        try await log.wait(for: 6, "the third file's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        for url in [first, second, third] {
            XCTAssertEqual(try probe(url).duration, 1, accuracy: 0.3, url.lastPathComponent)
        }
    }

    /// A file begun paused (a pause carried across an interruption, or one right after the start, before the
    /// first frame) starts at the first frame after the resume: the pause took nothing out of it. The
    /// timeline used to count that pause against a start it did not have yet and trapped on the underflow.
    func testATimelinePausedBeforeItsFirstFrameStartsAtTheResume() {
        let timeline = RecordingTimeline()
        let second: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333
        timeline.pause()
        XCTAssertNil(timeline.admitVideo(second, duration: frame))
        timeline.resume()
        XCTAssertEqual(timeline.admitVideo(2 * second, duration: frame), 2 * second, "the file starts at this frame")
        XCTAssertEqual(timeline.admitVideo(2 * second + frame, duration: frame), 2 * second)
    }

    /// A frame not a moment after the one before (two cameras' frames of one moment at a switch) stays out of the
    /// file: mp4mux made it a sample of no duration, and one earlier than the file's first frame trapped.
    func testAFrameNotAfterTheOneBeforeStaysOut() {
        let timeline = RecordingTimeline()
        let second: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333
        XCTAssertEqual(timeline.admitVideo(second, duration: frame), second)
        XCTAssertEqual(timeline.admitVideo(second + frame, duration: frame), second)
        XCTAssertNil(timeline.admitVideo(second + frame, duration: frame), "a second frame of the same moment")
        XCTAssertNil(timeline.admitVideo(second + frame + 100_000, duration: frame), "100 µs later: one tick of mp4mux's at 30 fps")
        XCTAssertNil(timeline.admitVideo(second - frame, duration: frame), "a frame from before the file's start")
        XCTAssertEqual(timeline.admitVideo(second + 2 * frame, duration: frame), second)
        XCTAssertEqual(timeline.stats.frames, 0, "counted as they reach the muxer, not here")
    }

    /// A stop ends the file at the time it was asked: frames taken before it enter when they come, the first one
    /// after it ends the file, and audio stops where that last frame may end.
    func testAStopLetsInTheFramesTakenBeforeItAndNoneAfter() {
        let timeline = RecordingTimeline()
        let second: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333, buffer: ClockTime = 10_000_000
        XCTAssertEqual(timeline.admitVideo(second, duration: frame), second)
        XCTAssertNotNil(timeline.admitAudio(second, duration: buffer))
        timeline.end(after: UInt64(second + 3 * frame))
        XCTAssertEqual(timeline.admitVideo(second + frame, duration: frame), second, "taken before the stop, come after it")
        XCTAssertNotNil(timeline.admitAudio(second + 3 * frame, duration: buffer), "within the last frame")
        XCTAssertEqual(timeline.admitVideo(second + 3 * frame, duration: frame), second, "taken at the stop")
        XCTAssertNil(timeline.admitAudio(second + 4 * frame, duration: buffer), "past where the last frame may end")
        XCTAssertNil(timeline.admitVideo(second + 4 * frame, duration: frame), "taken after the stop")
        XCTAssertNil(timeline.admitVideo(second + 5 * frame, duration: frame), "the file has ended")
        // Ended: the wait for the video returns at once.
        let waited = ContinuousClock().measure { timeline.waitForVideoToReachEnd(idle: .seconds(5), timeout: .seconds(5)) }
        XCTAssertLessThan(waited, .seconds(1))
    }

    /// A camera that stays silent after a stop ends the file where it is, after the idle time, not the whole timeout.
    func testAStopWithASilentCameraEndsTheFileAfterTheIdleTime() {
        let timeline = RecordingTimeline()
        let second: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333
        XCTAssertEqual(timeline.admitVideo(second, duration: frame), second)
        timeline.end(after: UInt64(2 * second))
        let waited = ContinuousClock().measure { timeline.waitForVideoToReachEnd(idle: .milliseconds(300), timeout: .seconds(10)) }
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(300))
        XCTAssertLessThan(waited, .seconds(5))
        XCTAssertNil(timeline.admitVideo(second + frame, duration: frame), "a frame after the wait gave up")
    }

    func testFinalizeAndResumeNamesTheNextFileAfterOnesThatExist() throws {
        let folder = try temporaryFolder()
        let url = folder.appendingPathComponent("take.mov.mp4")
        XCTAssertEqual(CaptureMovieFileOutput.nextFileURL(after: url, number: 2).lastPathComponent, "take.mov-2.mp4")
        XCTAssertTrue(FileManager.default.createFile(atPath: folder.appendingPathComponent("take.mov-2.mp4").path, contents: Data()))
        let sidecar = MovieRecovery.sidecarURL(for: folder.appendingPathComponent("take.mov-3.mp4"))
        XCTAssertTrue(FileManager.default.createFile(atPath: sidecar.path, contents: Data()))
        XCTAssertEqual(CaptureMovieFileOutput.nextFileURL(after: url, number: 2).lastPathComponent, "take.mov-4.mp4")
    }

    func testFinalizeAndResumeStartedWhileInterruptedBeginsWhenTheCameraIsBackAndAStopBetweenFilesEndsIt() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        movie.interruptionBehavior = .finalizeAndResume
        let session = try await startSession(camera: camera, outputs: [movie, driver])
        let url = folder.appendingPathComponent("late.mp4")
        try await driver.interrupt(.videoDeviceUnplugged)
        let log = RecordingLog()
        movie.startRecording(to: url, recordingDelegate: log)
        try await pause(0.8)
        XCTAssertEqual(log.events, [], "no file begins while the camera is away")
        XCTAssertTrue(movie.isRecording)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await log.wait(for: 1, "the start once the camera is back")
        XCTAssertEqual(log.events, [.started(url)], "the first file is the one asked for")
        try await pause(1)
        try await driver.interrupt(.videoDeviceStalled)
        try await log.wait(for: 2, "the file's end at the second interruption")
        // Stopped between files: the recording ends, with no file to finish and no further callback.
        movie.stopRecording()
        XCTAssertFalse(movie.isRecording)
        try await driver.endInterruption(.videoDeviceStalled)
        try await pause(0.8)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(log.events, [.started(url), .finished(url, .sessionWasInterrupted(.videoDeviceStalled))])
        XCTAssertEqual(try probe(url).duration, 1, accuracy: 0.3)
        XCTAssertEqual(try frameLumas(url).filter { $0 < 24 }.count, 0, "filler frames in the file")
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent("late-2.mp4").path))
    }

    func testFinalizeAndResumeStartedWhileInterruptedAndStoppedBeforeTheCameraIsBackIsAnswered() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        movie.interruptionBehavior = .finalizeAndResume
        let session = try await startSession(camera: camera, outputs: [movie, driver])
        let url = folder.appendingPathComponent("never.mp4")
        try await driver.interrupt(.videoDeviceUnplugged)
        let log = RecordingLog()
        movie.startRecording(to: url, recordingDelegate: log)
        try await pause(0.3)
        movie.stopRecording()
        try await log.wait(for: 1, "the answer to the start")
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await pause(0.5)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(log.events, [.finished(url, .noFramesRecorded)])
        XCTAssertFalse(movie.isRecording)
        XCTAssertFalse(FileManager.default.fileExists(atPath: url.path))
    }

    func testAnAudioInterruptionKeepsTheRecordingGoingWithItsAudioInSync() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        // Even a recording that splits at camera interruptions goes on through the microphone's (the real
        // microphone's test below runs with the default behaviour).
        movie.interruptionBehavior = .finalizeAndResume
        let session = try await startSession(camera: camera, microphone: .testMicrophone, outputs: [movie, driver])
        let url = folder.appendingPathComponent("audio-gap.mp4")
        let log = RecordingLog()
        movie.startRecording(to: url, recordingDelegate: log)
        try await log.wait(for: 1, "the recording's start")
        let started = Date()
        try await pause(1.5)
        // The audio server goes away as pulsesrc reports it: end-of-stream through the audio tee first, then
        // no audio at all until the session's silence comes.
        try await driver.interrupt(.audioServerUnavailable, pushEndOfStream: true, fillerAfter: 0.3)
        try await pause(1.5)
        XCTAssertTrue(movie.isRecording, "an audio interruption does not end the recording")
        try await driver.endInterruption(.audioServerUnavailable)
        try await pause(1.5)
        movie.stopRecording()
        let recorded = Date().timeIntervalSince(started)
        try await log.wait(for: 2, "the recording's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(log.events, [.started(url), .finished(url, nil)])
        XCTAssertEqual(try probe(url).duration, recorded, accuracy: 0.4)
        let (video, audio) = try trackDurations(url)
        let hole = try longestAudioHole(url)
        print("across the audio interruption: video \(video) s, audio \(audio) s, longest audio hole \(hole) s")
        XCTAssertLessThan(hole, 0.025, "the audio track has a hole of \(hole) s")
        XCTAssertEqual(video, audio, accuracy: 0.1, "video \(video) s, audio \(audio) s")
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// The same with a real PulseAudio microphone, its server killed in the gap and a new one started: the
    /// fresh pulsesrc's timestamps continue the file's timeline. (The session's own reaction to the server's
    /// death is the interruption machinery's; here the driver swaps the source, as that machinery will.)
    func testARealMicrophoneInterruptedAcrossAnAudioServerRestartStaysInSync() async throws {
        let folder = try temporaryFolder()
        let server = try PulseAudioServer()
        var restarted: PulseAudioServer?
        defer {
            server.stop()
            restarted?.stop()
        }
        let microphone = try XCTUnwrap(CaptureDevice.device(withUniqueID: PulseAudioServer.microphoneID))
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        let session = try await startSession(camera: camera, microphone: microphone, outputs: [movie, driver])
        let url = folder.appendingPathComponent("pulse-gap.mp4")
        let log = RecordingLog()
        movie.startRecording(to: url, recordingDelegate: log)
        try await log.wait(for: 1, "the recording's start")
        let started = Date()
        try await pause(1.5)
        try await driver.interrupt(.audioServerUnavailable, pushEndOfStream: true)
        server.kill()
        // Its own folder and socket; clients of this process find it through the environment.
        restarted = try PulseAudioServer()
        try await pause(1)
        try await driver.endInterruption(.audioServerUnavailable)
        try await pause(1.5)
        movie.stopRecording()
        let recorded = Date().timeIntervalSince(started)
        try await log.wait(for: 2, "the recording's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(log.events, [.started(url), .finished(url, nil)])
        let (video, audio) = try trackDurations(url)
        print("across an audio server restart: \(recorded) s recorded, video \(video) s, audio \(audio) s")
        XCTAssertEqual(video, recorded, accuracy: 0.4, "one timeline through the gap")
        XCTAssertEqual(video, audio, accuracy: 0.1, "video \(video) s, audio \(audio) s")
        XCTAssertTrue(try ffmpegDecodes(url))
    }
}

/// What a movie output tells its delegate, in order.
final class RecordingLog: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
    enum Event: Equatable, CustomStringConvertible {
        case started(URL)
        case finished(URL, CaptureError?)
        var description: String {
            switch self {
            case .started(let url): "started \(url.lastPathComponent)"
            case .finished(let url, let error): "finished \(url.lastPathComponent)" + (error.map { ": \($0)" } ?? "")
            }
        }
    }

    private let lock = NSLock()
    private var logged: [Event] = []
    var events: [Event] { lock.withLock { logged } }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        lock.withLock { logged.append(.started(fileURL)) }
    }
    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        lock.withLock { logged.append(.finished(outputFileURL, error.map { $0 as! CaptureError })) }
    }

    /// Waits until `count` events have come (15 s at most).
    func wait(for count: Int, _ what: String) async throws {
        let deadline = Date().addingTimeInterval(15)
        while events.count < count {
            guard Date() < deadline else { throw DeadlineExceeded(description: "\(what): only \(events) within 15 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
