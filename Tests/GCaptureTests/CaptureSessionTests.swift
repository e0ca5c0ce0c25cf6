import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

final class CaptureSessionTests: XCTestCase {
    func testStartAndStopChangeStateAndNotify() async throws {
        let output = CaptureVideoDataOutput()
        let session = try makeSession(outputs: [output])
        let notifications = Locked<[Notification.Name]>([])
        let observers = [CaptureSession.didStartRunningNotification, CaptureSession.didStopRunningNotification].map { name in
            NotificationCenter.default.addObserver(forName: name, object: session, queue: nil) { note in
                notifications.withLock { $0.append(note.name) }
            }
        }
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        XCTAssertFalse(session.isRunning)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        XCTAssertTrue(session.isRunning)
        try await within(engineDeadline, "session.start()") { try await session.start() } // starting a running session changes nothing
        XCTAssertNotNil(session.graphDescription)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertFalse(session.isRunning)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        try withinBlocking(engineDeadline, "session.startRunning()") { session.startRunning() } // the blocking variants
        XCTAssertTrue(session.isRunning)
        try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }
        XCTAssertFalse(session.isRunning)
        XCTAssertNil(session.graphDescription)
        XCTAssertEqual(notifications.withLock { $0 }, [CaptureSession.didStartRunningNotification, CaptureSession.didStopRunningNotification,
                                                       CaptureSession.didStartRunningNotification, CaptureSession.didStopRunningNotification])
    }

    func testFramesArriveAtTheConfiguredSizeAndRate() async throws {
        let output = CaptureVideoDataOutput()
        let log = FrameLog(output)
        let session = try makeSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), preset: .hd1280x720, outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let frames = await log.collect(for: 1.5)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        // 1.5 s at 30 fps is 45 frames; allow for a loaded machine, not for a wrong rate.
        XCTAssertGreaterThanOrEqual(frames.count, 40)
        XCTAssertLessThanOrEqual(frames.count, 47)
        let span = try XCTUnwrap(frames.last).time - XCTUnwrap(frames.first).time
        XCTAssertEqual(Double(frames.count - 1) / span, 30, accuracy: 0.5, "rate from timestamps")
        XCTAssertTrue(frames.allSatisfy { $0.width == 1280 && $0.height == 720 && $0.format == "NV12" })
        XCTAssertLessThan(FrameLog.longestGap(frames), 0.07)
    }

    func testAddingAndRemovingAnOutputKeepsTheOtherFlowing() async throws {
        let main = CaptureVideoDataOutput()
        let mainLog = FrameLog(main)
        let session = try makeSession(outputs: [main])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await mainLog.require(5, "the first frames")
        let startCount = mainLog.count
        for _ in 0..<3 {
            // Counted by a delegate, which removal does not disconnect: a stream would end at removal and
            // stop counting even if the output's branch were left on the tee.
            let extra = CaptureVideoDataOutput()
            let counter = DelegateFrameCounter()
            let queue = DispatchQueue(label: "extra")
            extra.setSampleBufferDelegate(counter, queue: queue)
            try session.add(extra)
            let arrived = await counter.waitFor(5, timeout: 3)
            XCTAssertTrue(arrived, "the added output got no frames")
            session.removeOutput(extra)
            queue.sync {}
            let afterRemoval = counter.count
            _ = await mainLog.collect(for: 0.3)
            queue.sync {}
            // One frame may have been on its way to the delegate queue as the branch was cut.
            XCTAssertLessThanOrEqual(counter.count, afterRemoval + 1, "a removed output still receives frames")
        }
        let frames = Array(mainLog.all.dropFirst(startCount))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertGreaterThan(frames.count, 15)
        XCTAssertLessThan(FrameLog.longestGap(frames), 0.1, "the main output stalled while the other was added/removed")
        XCTAssertEqual(session.outputs.count, 1)
    }

    func testAFailingCommitLeavesTheRunningGraphAsItWas() async throws {
        let main = CaptureVideoDataOutput()
        let mainLog = FrameLog(main)
        let camera = CaptureDevice.makeTestCamera(options: .init(sizes: [.init(width: 640, height: 480), .init(width: 1280, height: 720)]))
        let session = try makeSession(camera: camera, preset: .vga640x480, outputs: [main])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await mainLog.require(3, "the first frames")

        // An impossible preset together with a new output: neither is applied.
        let extra = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.add(extra)
        session.sessionPreset = .hd1920x1080
        XCTAssertThrowsError(try withinBlocking(engineDeadline, "the commit") { try session.commitAndWait() }) { error in
            XCTAssertEqual("\(error)", "Test Camera [test] offers 640x480, 1280x720 (NV12, I420, YUY2); preset hd1920x1080 needs 1920x1080")
        }
        XCTAssertEqual(session.sessionPreset, .vga640x480)
        XCTAssertEqual(session.outputs, [main])

        // An output whose settings cannot be built: the commit fails, the rest runs on.
        let broken = CaptureVideoDataOutput()
        broken.videoSettings = .init(pixelFormat: "NOT-A-FORMAT!")
        XCTAssertThrowsError(try session.add(broken)) { error in
            XCTAssertTrue("\(error)".contains("NOT-A-FORMAT!"), "\(error)")
        }
        // An output that cannot link to the camera's frames fails at attach time, also without harm.
        let unlinkable = FailingOutput(fragment: "capsfilter caps=video/x-raw,format=RGB,width=7,height=3 ! fakesink")
        XCTAssertThrowsError(try session.add(unlinkable))
        XCTAssertEqual(session.outputs, [main])

        let frames = await mainLog.collect(for: 0.5)
        XCTAssertTrue(session.isRunning)
        XCTAssertGreaterThanOrEqual(frames.count, 10, "frames stopped after the failed commits")
        XCTAssertTrue(frames.allSatisfy { $0.width == 640 })
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    func testAnOutputThatFailsWhileRunningIsDetachedAndTheSessionRunsOn() async throws {
        let main = CaptureVideoDataOutput()
        let mainLog = FrameLog(main)
        let session = try makeSession(outputs: [main])
        let errors = session.runtimeErrors()
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let failing = FailingOutput(fragment: "identity error-after=5 ! fakesink")
        try session.add(failing)
        let reported = try await firstElement(of: errors, within: 5, "the failing output's runtime error")
        XCTAssertFalse(reported.isFatal)
        XCTAssertTrue(reported.output === failing)
        XCTAssertTrue(failing.failed.withLock { $0 })
        let frames = await mainLog.collect(for: 0.5)
        XCTAssertTrue(session.isRunning)
        XCTAssertGreaterThanOrEqual(frames.count, 10)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    func testSwitchingCamerasWhileRunningKeepsOutputsRunning() async throws {
        let output = CaptureVideoDataOutput()
        let log = FrameLog(output)
        let session = try makeSession(preset: .vga640x480, outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await log.require(3, "the first frames")
        let second = CaptureDevice.makeTestCamera(uniqueID: "test-ball", options: .init(pattern: .ball))
        session.beginConfiguration()
        session.removeInput(session.inputs[0])
        try session.add(CaptureDeviceInput(device: second))
        session.sessionPreset = .hd1280x720
        try withinBlocking(engineDeadline, "session.commitAndWait()") { try session.commitAndWait() }
        let frames = await log.collect(for: 0.5)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertGreaterThanOrEqual(frames.count, 10)
        XCTAssertTrue(frames.allSatisfy { $0.width == 1280 }, "frames from the new camera at the new preset")
        XCTAssertEqual((session.inputs.first as? CaptureDeviceInput)?.device.uniqueID, "test-ball")
    }

    func testASwapToACameraThatCannotOpenLeavesThePreviousCameraRunning() async throws {
        let output = CaptureVideoDataOutput()
        let log = FrameLog(output)
        let session = try makeSession(preset: .vga640x480, outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let started = await log.waitFor(3)
        XCTAssertTrue(started)
        // A real node that v4l2src opens and rejects: the character device /dev/null is no camera.
        let broken = CaptureDevice(uniqueID: "/dev/null", localizedName: "Not A Camera", modelID: "", manufacturer: "",
                                   deviceType: .external, position: .unspecified, mediaType: .video, nodePath: "/dev/null",
                                   formats: TestCameraOptions().formats, backend: .v4l2(path: "/dev/null"))
        session.beginConfiguration()
        session.removeInput(session.inputs[0])
        try session.add(CaptureDeviceInput(device: broken))
        XCTAssertThrowsError(try withinBlocking(engineDeadline, "the commit") { try session.commitAndWait() }) { error in
            XCTAssertTrue("\(error)".contains("Not A Camera"), "\(error)")
        }
        XCTAssertEqual((session.inputs.first as? CaptureDeviceInput)?.device, .testCamera)
        let before = log.count
        let resumed = await log.waitFor(before + 10, timeout: 3)
        XCTAssertTrue(resumed, "the previous camera delivered \(log.count - before) frames after the failed swap")
        let frames = await log.collect(for: 0.3)
        XCTAssertGreaterThanOrEqual(frames.count, 5, "frames stopped after the failed swap")
        XCTAssertTrue(frames.allSatisfy { $0.width == 640 })
        XCTAssertTrue(session.isRunning)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// A removal that cannot be applied (the camera kept was unplugged since) is not silent: removeOutput
    /// reports it as a runtime error, remove(_:) throws it, and the output stays where it was.
    func testARemovalThatCannotBeAppliedIsReported() async throws {
        let node = try temporaryFolder().appendingPathComponent("video-gone").path
        XCTAssertTrue(FileManager.default.createFile(atPath: node, contents: nil))
        let camera = CaptureDevice(uniqueID: node, localizedName: "Unplugged Camera", modelID: "", manufacturer: "",
                                   deviceType: .external, position: .unspecified, mediaType: .video, nodePath: node,
                                   formats: TestCameraOptions().formats, backend: .v4l2(path: node))
        let session = CaptureSession()
        let frames = CaptureVideoDataOutput(), photos = CapturePhotoOutput()
        try session.add(CaptureDeviceInput(device: camera))
        try session.add(frames)
        try session.add(photos)
        try FileManager.default.removeItem(atPath: node)

        let errors = Locked<[CaptureSession.RuntimeError]>([])
        let observer = NotificationCenter.default.addObserver(forName: CaptureSession.runtimeErrorNotification, object: session,
                                                              queue: nil) { notification in
            if let error = notification.userInfo?[CaptureSession.runtimeErrorUserInfoKey] as? CaptureSession.RuntimeError {
                errors.withLock { $0.append(error) }
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        session.removeOutput(frames)
        let reported = errors.withLock { $0 }
        XCTAssertEqual(reported.count, 1, "removeOutput said nothing of a removal it did not apply")
        XCTAssertTrue(reported.first.map { "\($0)".contains("video-gone") } ?? false, "\(reported)")
        XCTAssertTrue(reported.first?.output === frames)
        XCTAssertTrue(session.outputs.contains(frames), "the session is as it was")
        XCTAssertThrowsError(try session.remove(photos)) { XCTAssertTrue("\($0)".contains("video-gone"), "\($0)") }
        XCTAssertEqual(session.outputs.count, 2)
        // Removing the unplugged camera itself is applied, and then the outputs go too.
        try session.remove(session.inputs[0])
        try session.remove(photos)
        XCTAssertEqual(session.outputs, [frames])
    }

    func testQoSMessagesOfTheGraphAreCounted() async throws {
        let main = CaptureVideoDataOutput()
        let session = try makeSession(outputs: [main])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        XCTAssertEqual(session.qualityFigures?.messages, 0)
        // A sink synchronised to the clock behind an element that holds each frame 60 ms, allowing 5 ms of
        // lateness: it drops late frames, and posts a QoS message for each.
        let slow = FailingOutput(fragment: "identity sleep-time=60000 ! fakesink sync=true qos=true max-lateness=5000000")
        try session.add(slow)
        let deadline = Date().addingTimeInterval(5)
        while (session.qualityFigures?.messages ?? 0) < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let figures = try XCTUnwrap(session.qualityFigures)
        XCTAssertGreaterThanOrEqual(figures.messages, 3, "QoS messages of a late sink")
        XCTAssertGreaterThan(figures.droppedBuffers, 0)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    func testBusWarningsAreLogged() async throws {
        let log = LogCapture.shared
        let main = CaptureVideoDataOutput()
        let session = try makeSession(outputs: [main])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        // A sink that has rendered nothing for over a second of late buffers posts a bus WARNING
        // ("A lot of buffers are being dropped").
        let slow = FailingOutput(fragment: "identity sleep-time=60000 ! fakesink name=late-sink sync=true qos=true max-lateness=5000000")
        try session.add(slow)
        let deadline = Date().addingTimeInterval(6)
        var warnings: [LogCapture.Line] = []
        while warnings.isEmpty, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            warnings = log.lines(label: "gcapture.session").filter { $0.level == .warning && $0.message.contains(session.name) }
        }
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let warning = try XCTUnwrap(warnings.first, "the sink's bus warning was not logged")
        XCTAssertTrue(warning.message.contains("dropped"), warning.message)
        XCTAssertTrue(log.lines(label: "gcapture.session").contains { $0.level == .debug && $0.message.hasPrefix("QoS:") },
                      "QoS messages are logged at debug")
    }

    func testUnknownDeviceIsAClearError() {
        XCTAssertThrowsError(try CaptureDeviceInput(deviceWithUniqueID: "/dev/video42")) { error in
            XCTAssertTrue("\(error)".hasPrefix("no device with id '/dev/video42'; devices present: "), "\(error)")
            XCTAssertTrue("\(error)".contains("test"))
        }
    }

    func testOnlyOneInputPerMediaType() throws {
        let session = CaptureSession()
        try session.add(CaptureDeviceInput(device: .testCamera))
        let other = try CaptureDeviceInput(device: .makeTestCamera(uniqueID: "test-2", options: .init()))
        XCTAssertFalse(session.canAddInput(other))
        XCTAssertThrowsError(try session.add(other))
        XCTAssertTrue(session.canAddInput(try CaptureDeviceInput(device: .testMicrophone)))
    }

    func testDelegateReceivesFramesAndDropsWhenLate() async throws {
        final class SlowDelegate: CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
            let outputs = Atomic<Int>(0), drops = Atomic<Int>(0)
            func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
                outputs.add(1, ordering: .relaxed)
                Thread.sleep(forTimeInterval: 0.1) // a consumer slower than the camera
            }
            func captureOutput(_ output: CaptureOutput, didDrop sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
                drops.add(1, ordering: .relaxed)
            }
        }
        let output = CaptureVideoDataOutput()
        let delegate = SlowDelegate()
        let delegateQueue = DispatchQueue(label: "slow")
        output.setSampleBufferDelegate(delegate, queue: delegateQueue)
        let session = try makeSession(outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await Task.sleep(for: .seconds(1))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        delegateQueue.sync {} // let the callbacks already queued run
        let delivered = delegate.outputs.load(ordering: .relaxed)
        XCTAssertGreaterThanOrEqual(delivered, 6)
        XCTAssertLessThanOrEqual(delivered, 12, "a 100 ms consumer cannot take more than ~10 frames a second")
        XCTAssertGreaterThanOrEqual(delegate.drops.load(ordering: .relaxed), 10)
        XCTAssertEqual(output.droppedFrameCount, delegate.drops.load(ordering: .relaxed))
    }

    func testWithoutDiscardingALateDelegateGetsEveryFrameInOrder() async throws {
        final class Recorder: CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
            let times = Locked<[Double]>([])
            func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
                times.withLock { $0.append(sampleBuffer.presentationTime) }
                Thread.sleep(forTimeInterval: 0.04) // slower than 30 fps, for a short while
            }
        }
        let output = CaptureVideoDataOutput()
        output.alwaysDiscardsLateVideoFrames = false
        let recorder = Recorder()
        let delegateQueue = DispatchQueue(label: "recorder")
        output.setSampleBufferDelegate(recorder, queue: delegateQueue)
        let session = try makeSession(outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await Task.sleep(for: .milliseconds(700))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        delegateQueue.sync {}
        let times = recorder.times.withLock { $0 }
        XCTAssertEqual(output.droppedFrameCount, 0, "a backlog under a second must not drop")
        XCTAssertGreaterThanOrEqual(times.count, 18)
        XCTAssertEqual(times, times.sorted(), "frames out of order")
        XCTAssertLessThan(FrameLog.longestGap(times.map { .init(time: $0, width: 0, height: 0, format: "", arrival: Date(), luma: 0, at: 0) }), 0.07)
    }

    func testTestCameraNoiseIsRealNoise() async throws {
        func lumaSpread(noise: Int) async throws -> Double {
            let output = CaptureVideoDataOutput()
            let camera = CaptureDevice.makeTestCamera(options: .init(pattern: .black, motion: 0, noiseLevel: noise))
            let session = try makeSession(camera: camera, preset: .low, outputs: [output])
            let frames = output.sampleBuffers()
            try await within(engineDeadline, "session.start()") { try await session.start() }
            let frame = try await firstElement(of: frames, within: 5, "a frame")
            let spread = frame.withPlanes { planes -> Double in
                let luma = planes[0]
                var sum = 0.0, sumSquares = 0.0, count = 0.0
                for row in 0..<luma.height {
                    for column in 0..<luma.rowBytes {
                        let value = Double(luma.bytes[row * luma.stride + column])
                        sum += value; sumSquares += value * value; count += 1
                    }
                }
                return (sumSquares / count - (sum / count) * (sum / count)).squareRoot()
            } ?? 0
            try await within(engineDeadline, "session.stop()") { await session.stop() }
            return spread
        }
        let clean = try await lumaSpread(noise: 0)
        let noisy = try await lumaSpread(noise: 20)
        XCTAssertLessThan(clean, 0.5)
        // Uniform noise of ±20 has a standard deviation of about 20/sqrt(3) = 11.5.
        XCTAssertEqual(noisy, 11.5, accuracy: 1.5)
    }
}

/// Counts the frames a delegate is given.
final class DelegateFrameCounter: CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
    private let delivered = Atomic<Int>(0)
    var count: Int { delivered.load(ordering: .relaxed) }
    func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
        delivered.add(1, ordering: .relaxed)
    }

    func waitFor(_ count: Int, timeout: TimeInterval) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while self.count < count, Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return self.count >= count
    }
}

/// An output with an arbitrary branch, for failures no real output would produce on purpose.
final class FailingOutput: CaptureOutput, @unchecked Sendable {
    let fragment: String
    let failed = Locked(false)
    init(fragment: String) { self.fragment = fragment }
    override func branchDescription() throws(CaptureError) -> String { fragment }
    override func didFail(_ error: GStreamerError) { failed.withLock { $0 = true } }
}
