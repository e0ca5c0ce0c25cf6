import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// Interruptions on this machine: the classifier on the errors GStreamer really posts, the session's
/// filling and recovery with the test camera, and the audio server going away (the tests' real PulseAudio).
final class InterruptionTests: XCTestCase {
    private typealias Reason = CaptureSession.InterruptionReason
    private let camera = CaptureDevice(uniqueID: "/dev/v4l/by-path/platform-vivid.0-video-index0", localizedName: "vivid",
                                       modelID: "vivid", manufacturer: "vivid", deviceType: .builtInWideAngleCamera, position: .unspecified,
                                       mediaType: .video, nodePath: "/dev/video0", formats: [], backend: .v4l2(path: "/dev/video0"))

    private func resourceError(_ code: Int, _ message: String, _ debug: String) -> GStreamerError {
        GStreamerError(kind: .gError, domain: "gst-resource-error-quark", code: code, message: message, debug: debug,
                       sourcePath: "/GstPipeline:session-1/GstBin:video-source-1/GstV4l2Src:v4l2src0")
    }

    /// v4l2src's errors as GStreamer 1.22 posted them in the VM (vivid), copied from its bus.
    func testTheClassifierReadsWhatV4L2SrcReports() {
        let unplugged = resourceError(9, "Could not read from resource.", """
            ../sys/v4l2/gstv4l2bufferpool.c(1198): gst_v4l2_buffer_pool_poll (): /GstPipeline:session-1/GstBin:video-source-1/GstV4l2Src:v4l2src0:
            poll error 1: No data available (61)
            """)
        XCTAssertEqual(InterruptionClassifier.reason(for: unplugged, from: camera), .videoDeviceUnplugged)
        // The same disconnect, when the allocation failure is posted before the poll error (seen under load).
        let allocation = resourceError(14, "Failed to allocate a buffer",
                                       "../sys/v4l2/gstv4l2src.c(1374): gst_v4l2src_create (): /GstPipeline:session-1/GstBin:video-source-1/GstV4l2Src:v4l2src0")
        XCTAssertEqual(InterruptionClassifier.reason(for: allocation, from: camera), .videoDeviceUnplugged)
        let busy = resourceError(4, "Device '/dev/video0' is busy", """
            ../sys/v4l2/gstv4l2object.c(4103): gst_v4l2_object_set_format_full (): /GstPipeline:pipeline0/GstV4l2Src:v4l2src0:
            Call to S_FMT failed for YUYV @ 640x480: Device or resource busy
            """)
        XCTAssertEqual(InterruptionClassifier.reason(for: busy, from: camera), .videoDeviceInUseByAnotherClient)
        let reopenedWhileGone = resourceError(7, "Could not open device '/dev/video0' for reading and writing.",
                                              "../sys/v4l2/v4l2_calls.c(657): gst_v4l2_open (): system error: No such device")
        XCTAssertEqual(InterruptionClassifier.reason(for: reopenedWhileGone, from: camera), .videoDeviceUnplugged)
        // Not interruptions: a driver's I/O error, vivid's injected streamon failure, a stream error.
        XCTAssertNil(InterruptionClassifier.reason(for: resourceError(9, "Could not read from resource.", "read error: Input/output error (5)"), from: camera))
        XCTAssertNil(InterruptionClassifier.reason(for: resourceError(13, "Failed to allocate required memory.",
                                                                      "gst_v4l2src_decide_allocation: Buffer pool activation failed"), from: camera))
        let stream = GStreamerError(kind: .gError, domain: "gst-stream-error-quark", code: 1, message: "Internal data stream error.",
                                    debug: "streaming stopped, reason error (-5)")
        XCTAssertNil(InterruptionClassifier.reason(for: stream, from: camera))
        // The test camera is generated in-process: nothing outside takes it away.
        XCTAssertNil(InterruptionClassifier.reason(for: unplugged, from: .testCamera))
        XCTAssertEqual(InterruptionClassifier.reasonForRemoval(of: camera), .videoDeviceUnplugged)
    }

    /// An error whose words say nothing of a missing device (a buffer pool failing to activate) is an unplug
    /// when the camera's node no longer opens, and stays an error when it opens.
    func testACameraErrorIsAnUnplugWhenTheDeviceNoLongerOpens() throws {
        func camera(at node: String) -> CaptureDevice {
            CaptureDevice(uniqueID: "usb-camera", localizedName: "USB camera", modelID: "uvc", manufacturer: "", deviceType: .external,
                          position: .unspecified, mediaType: .video, nodePath: node, formats: [], backend: .v4l2(path: node))
        }
        XCTAssertEqual(InterruptionClassifier.reasonAskingTheDevice(camera(at: "/dev/video-that-was-unplugged")), .videoDeviceUnplugged)
        // /dev/null opens: a device that is there.
        XCTAssertNil(InterruptionClassifier.reasonAskingTheDevice(camera(at: "/dev/null")))
        XCTAssertNil(InterruptionClassifier.reasonAskingTheDevice(.testCamera))
    }

    /// pulsesrc's errors, from the real server: killed while capturing, then absent when opened again.
    func testTheClassifierReadsWhatPulseSrcReportsWhenTheServerDies() async throws {
        let server = try PulseAudioServer()
        defer { server.stop() }
        let microphone = try XCTUnwrap(CaptureDevice.device(withUniqueID: PulseAudioServer.microphoneID))
        let capturing = try await firstError(of: "pulsesrc device=gcapture_mic ! fakesink sync=false") { server.kill() }
        XCTAssertEqual(InterruptionClassifier.reason(for: capturing, from: microphone), .audioServerUnavailable, "\(capturing)")
        let opening = try await firstError(of: "pulsesrc device=gcapture_mic ! fakesink sync=false") {}
        XCTAssertEqual(InterruptionClassifier.reason(for: opening, from: microphone), .audioServerUnavailable, "\(opening)")
        let unknown = GStreamerError(kind: .gError, domain: "gst-resource-error-quark", code: 1, message: "Failed to connect stream: No such entity")
        XCTAssertEqual(InterruptionClassifier.reason(for: unknown, from: microphone), .audioDeviceUnplugged)
    }

    /// Plays `description`, runs `action` once it plays (or failed to), and returns the first error it posts.
    private func firstError(of description: String, after action: () -> Void) async throws -> GStreamerError {
        let pipeline = try Pipeline.launch(description)
        defer { pipeline.shutDown() }
        let messages = pipeline.bus.messages()
        _ = try? pipeline.setState(.playing)
        try await Task.sleep(for: .milliseconds(500))
        action()
        let reader = Task { () -> GStreamerError? in
            for await message in messages { if case .error(let value) = message.kind { return value } }
            return nil
        }
        let deadline = Task { try await Task.sleep(for: .seconds(5)); reader.cancel() }
        defer { deadline.cancel() }
        let error = await reader.value
        return try XCTUnwrap(error, "no error from \(description)")
    }

    /// The entry point a stall watchdog or system pressure uses, with the test camera: outputs keep one
    /// timeline through the gap (black frames), the camera comes back with no call, ended is posted.
    func testAnInterruptedCameraIsFilledWithBlackOnOneTimelineAndComesBack() async throws {
        let frames = CaptureVideoDataOutput()
        let movie = CaptureMovieFileOutput()
        let brightness = FrameLog(frames)
        let session = try makeSession(camera: CaptureDevice.makeTestCamera(uniqueID: "test-bars", options: TestCameraOptions()),
                                      preset: .vga640x480, outputs: [frames, movie])
        let log = SessionEventLog(session)
        // AVFoundation's way: the notification with the reason's raw value under the key.
        let posted = Locked<[String]>([])
        let observers = [CaptureSession.wasInterruptedNotification, CaptureSession.interruptionEndedNotification].map { name in
            NotificationCenter.default.addObserver(forName: name, object: session, queue: nil) { note in
                posted.withLock { $0.append("\(note.name.rawValue) \(note.userInfo?[CaptureSessionInterruptionReasonKey] as? Int ?? -1)") }
            }
        }
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = try temporaryFolder().appendingPathComponent("gap.mp4")
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .milliseconds(700))
        session.queue.async { session.interruptions.interrupt(.video, reason: .videoDeviceStalled) }
        let interrupted = await log.wait(timeout: 2) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted)
        XCTAssertEqual(log.interruptions.map(\.reason), [.videoDeviceStalled])
        let ended = await log.wait(timeout: 5) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "\(log.all.map { "\($0.event)" })")
        XCTAssertEqual(log.endings.map(\.reason), [.videoDeviceStalled])
        XCTAssertFalse(session.isInterrupted)
        XCTAssertEqual(posted.withLock { $0 }, ["GCaptureSessionWasInterrupted 101", "GCaptureSessionInterruptionEnded 101"])
        try await Task.sleep(for: .milliseconds(700))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let seen = brightness.all
        let start = log.interruptions[0].at, end = log.endings[0].at
        XCTAssertTrue(seen.contains { $0.at > start && $0.at < end && !FrameLog.isPicture($0) }, "no black frames in the gap")
        XCTAssertTrue(seen.contains { $0.at > end && FrameLog.isPicture($0) })
        let times = seen.map(\.time)
        XCTAssertEqual(times, times.sorted(), "timestamps went back")
        XCTAssertLessThan(zip(times.dropFirst(), times).map { $0 - $1 }.max() ?? 1, 0.1, "a hole in the timeline")
        XCTAssertTrue(log.runtimeErrors.isEmpty, "\(log.runtimeErrors)")
        let probed = try probe(url)
        XCTAssertEqual(probed.duration, (monotonicMilliseconds() - start) / 1000, accuracy: 1.5)
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// The audio server dies mid-recording: the microphone is interrupted, video and the recording go on
    /// (silence in the gap), and when the server is back so is the microphone, with no call; the file's
    /// audio and video stay in step.
    func testTheAudioServerDyingInterruptsTheMicrophoneAndTheRecordingKeepsSync() async throws {
        let server = try PulseAudioServer()
        defer { server.stop() }
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let frames = CaptureVideoDataOutput()
        let frameLog = FrameLog(frames)
        let microphone = try XCTUnwrap(CaptureDevice.device(withUniqueID: PulseAudioServer.microphoneID))
        let session = try makeSession(microphone: microphone, preset: .vga640x480, outputs: [movie, frames])
        let log = SessionEventLog(session)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = folder.appendingPathComponent("server-gone.mp4")
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .milliseconds(1500))
        server.kill()
        let interrupted = await log.wait(timeout: 5) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted, "\(log.all.map { "\($0.event)" })")
        XCTAssertEqual(log.interruptions.map(\.reason), [.audioServerUnavailable])
        XCTAssertEqual(session.interruptionReasons, [.audioServerUnavailable])
        let during = await frameLog.collect(for: 1.0)
        XCTAssertGreaterThan(during.count, 15, "video must go on without the microphone")
        XCTAssertTrue(movie.isRecording, "the recording must go on through the audio gap")
        XCTAssertNil(waiter.finished.map { "\($0.error.map { "\($0)" } ?? "finished")" })

        try server.restart()
        let ended = await log.wait(timeout: 10) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "the microphone did not come back within 10 s of the server: \(log.all.map { "\($0.event)" })")
        XCTAssertEqual(log.endings.map(\.reason), [.audioServerUnavailable])
        XCTAssertFalse(session.isInterrupted)
        try await Task.sleep(for: .milliseconds(1500))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertTrue(log.runtimeErrors.isEmpty, "\(log.runtimeErrors)")

        let audio = try streamDuration(url, "a"), video = try streamDuration(url, "v")
        print("audio \(audio) s, video \(video) s")
        XCTAssertEqual(audio, video, accuracy: 0.1, "audio and video drifted apart across the gap")
        XCTAssertGreaterThan(video, 4)
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// A stream's duration as ffprobe reads it from its packets (start of the first to end of the last).
    private func streamDuration(_ url: URL, _ stream: String) throws -> Double {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "\(stream):0", "-show_entries",
                                                      "packet=pts_time,duration_time", "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let packets = result.stdout.split(separator: "\n").compactMap { line -> (Double, Double)? in
            let fields = line.split(separator: ",").map { Double($0) }
            guard fields.count >= 2, let pts = fields[0], let duration = fields[1] else { return nil }
            return (pts, duration)
        }
        guard let first = packets.map(\.0).min(), let last = packets.map({ $0.0 + $0.1 }).max() else {
            throw CheckFailed(description: "no \(stream) packets in \(url.path)")
        }
        return last - first
    }
}
