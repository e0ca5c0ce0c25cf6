import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// CaptureMotionOutput on the test camera's scripted scene (TestCameraOptions.Scene): a still SMPTE picture
/// (its snow corner changes every frame, a hard case of noise), an object that appears at a known time, sensor
/// noise and a slow change of the light. When the object appeared is read from the frames themselves, through a
/// CaptureVideoDataOutput of the same session: the first frame whose pixels show it.
final class MotionOutputTests: XCTestCase {
    /// Over the bars' white, yellow and cyan (luma 235, 210 and 170): a black object.
    private static let objectRect = CGRect(x: 0.10, y: 0.15, width: 0.25, height: 0.30)
    private static let objectLuma: UInt8 = 16
    private static let frameRate = 30

    private func sceneCamera(_ name: String, appearsAfter: Double? = 1.5, noise: Int = 4, brightnessRamp: Double = 0) -> CaptureDevice {
        let object = appearsAfter.map {
            TestCameraOptions.SceneObject(rect: Self.objectRect, luma: Self.objectLuma, appearsAfter: $0)
        }
        return CaptureDevice.makeTestCamera(
            uniqueID: "test-motion-\(name)",
            options: .init(pattern: .smpte, motion: 0, noiseLevel: noise, noiseSeed: 7, maxFrameRate: Self.frameRate,
                           scene: .init(object: object, brightnessRamp: brightnessRamp)))
    }

    /// The object is detected in one of the first three frames that show it, with a box around it; proven by
    /// the frames' own timestamps and pixels, not by the detector's word alone.
    func testTheScriptedObjectIsDetectedWithinThreeFramesOfItsAppearance() async throws {
        let motion = CaptureMotionOutput()
        let frames = CaptureVideoDataOutput()
        frames.alwaysDiscardsLateVideoFrames = false
        let log = ObjectFrameLog(frames, watching: Self.objectRect, objectLuma: Self.objectLuma)
        let events = motion.events()
        let delegateQueue = DispatchQueue(label: "test.motion-delegate")
        let delegate = MotionDelegate(expectedQueue: delegateQueue)
        delegateQueue.setSpecific(key: MotionDelegate.key, value: ObjectIdentifier(delegateQueue))
        motion.setDelegate(delegate, queue: delegateQueue)
        let hooked = Locked<[CaptureMotionOutput.Motion]>([])
        motion.onMotionBegan = { motion in hooked.withLock { $0.append(motion) } }
        let session = try await startSession(camera: sceneCamera("appears"), outputs: [motion, frames])
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }

        let began = try await firstElement(of: events, within: engineDeadline, "motionBegan")
        guard case .motionBegan(let detected) = began else {
            return XCTFail("the first event is \(began), not motionBegan")
        }
        // Frames up to the detection's reach the log too (the detection frame went through the other branch).
        try await within(engineDeadline, "the frame log reaching the detection") {
            while log.latestTimeStamp < detected.presentationTimeStamp { try await Task.sleep(for: .milliseconds(10)) }
        }
        let entries = log.all
        let appearance = try XCTUnwrap(entries.firstIndex { $0.showsObject }, "no frame shows the object")
        XCTAssertGreaterThan(appearance, 0, "the first frame already shows the object: it never appeared")
        let interval = UInt64(1_000_000_000 / Self.frameRate)
        let before = entries[appearance - 1], first = entries[appearance]
        // The frame before is the one right before (none was lost between them) and shows the still picture.
        XCTAssertLessThan(first.timeStamp - before.timeStamp, interval * 3 / 2, "a frame is missing before the appearance")
        XCTAssertFalse(before.showsObject)
        XCTAssertTrue(entries[appearance...].allSatisfy(\.showsObject), "the object does not stay")
        // The detection is a frame of the log: the how-manieth showing the object.
        let detection = try XCTUnwrap(entries.firstIndex { $0.timeStamp == detected.presentationTimeStamp },
                                      "the event's time \(detected.presentationTimeStamp) is no frame's")
        let framesFromAppearance = detection - appearance + 1
        print("motion: the object appeared in the frame at \(Double(first.timeStamp) / 1e9) s, detected in the "
              + "\(framesFromAppearance). frame showing it (at \(detected.presentationTime) s), score \(detected.score), "
              + "box \(detected.boundingBox)")
        XCTAssertGreaterThanOrEqual(framesFromAppearance, 1, "motion began before the object appeared")
        XCTAssertLessThanOrEqual(framesFromAppearance, 3, "detected later than the third frame showing the object")
        let box = detected.boundingBox, object = Self.objectRect
        XCTAssertEqual(box.minX, object.minX, accuracy: 0.03)
        XCTAssertEqual(box.minY, object.minY, accuracy: 0.03)
        XCTAssertEqual(box.maxX, object.maxX, accuracy: 0.03)
        XCTAssertEqual(box.maxY, object.maxY, accuracy: 0.03)
        XCTAssertEqual(detected.score, object.width * object.height, accuracy: 0.03, "the share of the picture that changed")
        XCTAssertTrue(motion.isMotionDetected)
        // The same motion reaches the delegate on its queue and the hook.
        try await within(engineDeadline, "the delegate and the hook") {
            while delegate.began.isEmpty || hooked.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) }
        }
        XCTAssertEqual(delegate.began, [detected])
        XCTAssertEqual(hooked.withLock { $0 }, [detected])
        XCTAssertFalse(delegate.calledOffItsQueue, "a delegate call off the delegate's queue")
    }

    /// An object that stays becomes background: its motion ends by itself, the end's box around it.
    func testMotionEndsWhenTheObjectStaysAndBecomesBackground() async throws {
        let motion = CaptureMotionOutput()
        let events = motion.events()
        let session = try await startSession(camera: sceneCamera("stays"), outputs: [motion])
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        let began = try await firstElement(of: events, within: engineDeadline, "motionBegan")
        let ended = try await firstElement(of: events, within: engineDeadline, "motionEnded")
        guard case .motionBegan(let start) = began, case .motionEnded(let end) = ended else {
            return XCTFail("events \(began), \(ended): not a beginning, then an end")
        }
        print("motion: began at \(start.presentationTime) s, ended at \(end.presentationTime) s (the object stayed), "
              + "box \(end.boundingBox), peak score \(end.score)")
        XCTAssertGreaterThan(end.presentationTimeStamp, start.presentationTimeStamp)
        XCTAssertLessThan(end.presentationTime - start.presentationTime, 15, "an object that stays is motion for too long")
        XCTAssertEqual(end.boundingBox.midX, Self.objectRect.midX, accuracy: 0.03)
        XCTAssertEqual(end.boundingBox.midY, Self.objectRect.midY, accuracy: 0.03)
        XCTAssertFalse(motion.isMotionDetected)
    }

    /// A minute of the noisy test camera (noise ±10) whose light brightens by 1.2 luma steps a second
    /// (72 over the minute; the white bar clips at 255 on the way, so parts of the picture stop brightening)
    /// is no motion.
    func testNoiseAndASlowChangeOfLightAreNotMotion() async throws {
        let motion = CaptureMotionOutput()
        let frames = CaptureVideoDataOutput()
        // The red and blue bars (luma 81 and 41): dark enough to brighten by the whole ramp without clipping.
        let log = ObjectFrameLog(frames, watching: CGRect(x: 0.8, y: 0.1, width: 0.15, height: 0.4), objectLuma: Self.objectLuma)
        let events = MotionEventLog(motion)
        let seconds = 60
        let session = try await startSession(camera: sceneCamera("light", appearsAfter: nil, noise: 10, brightnessRamp: 1.2),
                                              outputs: [motion, frames])
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        // Waited for by the frames analyzed (a minute of them), not by a clock.
        try await within(Double(seconds) + engineDeadline, "\(seconds) s of frames analyzed") {
            while motion.analyzedFrameCount < seconds * Self.frameRate { try await Task.sleep(for: .milliseconds(100)) }
        }
        let state = motion.statistics
        let entries = log.all
        let firstLuma: Double = entries.prefix(10).map(\.regionLuma).reduce(0, +)
        let lastLuma: Double = entries.suffix(10).map(\.regionLuma).reduce(0, +)
        let brightening = (lastLuma - firstLuma) / 10
        print("motion: \(motion.analyzedFrameCount) frames of noise ±10 and a light ramp (the bars brightened by "
              + "\(Int(brightening)) steps); events \(events.all.count), largest score while still "
              + "\(state.largestStillScore) (minimum area \(motion.minimumArea)), noise \(state.noise) steps")
        XCTAssertEqual(events.all, [], "noise or light taken for motion")
        // The scene did what it was asked: the light changed, and there was noise to ignore.
        XCTAssertGreaterThan(brightening, 60, "the light did not change by the ramp's 72 steps")
        XCTAssertGreaterThan(state.noise, 1, "the frames carried no noise")
    }

    /// A mask over the object's place hides it; an output without the mask on the same session sees it.
    func testAMaskOverTheObjectSuppressesTheEvent() async throws {
        let masked = CaptureMotionOutput()
        masked.masks = [Self.objectRect.insetBy(dx: -0.03, dy: -0.03)]
        try await expectOnlyTheControlToSeeTheObject(masked, "masked")
    }

    /// A zone elsewhere ignores the object.
    func testAZoneElsewhereIgnoresTheObject() async throws {
        let zoned = CaptureMotionOutput()
        zoned.zones = [CGRect(x: 0.55, y: 0.05, width: 0.4, height: 0.5)]
        try await expectOnlyTheControlToSeeTheObject(zoned, "zoned")
    }

    /// The camera interrupted (black frames in its place) and back is no motion: the output pauses while the
    /// session fills the gap and learns the picture anew after it.
    func testAnInterruptionIsNotMotion() async throws {
        let motion = CaptureMotionOutput()
        let events = MotionEventLog(motion)
        let session = try await startSession(camera: sceneCamera("interrupted", appearsAfter: nil), outputs: [motion])
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        let log = SessionEventLog(session)
        try await within(engineDeadline, "a second of frames") {
            while motion.analyzedFrameCount < Self.frameRate { try await Task.sleep(for: .milliseconds(10)) }
        }
        session.queue.async { session.interruptions.interrupt(.video, reason: .videoDeviceStalled) }
        let interrupted = await log.wait(timeout: engineDeadline) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted, "the session was not interrupted")
        let ended = await log.wait(timeout: engineDeadline) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "the interruption did not end")
        let resumed = motion.analyzedFrameCount
        try await within(engineDeadline, "a second of frames after the interruption") {
            while motion.analyzedFrameCount < resumed + Self.frameRate { try await Task.sleep(for: .milliseconds(10)) }
        }
        print("motion: interrupted and back, \(motion.analyzedFrameCount) frames analyzed, events \(events.all)")
        XCTAssertEqual(events.all, [], "the interruption was taken for motion")
    }

    /// The scene is part of the test camera's options: encoded and decoded with them, and options written
    /// before there were scenes still decode (without one).
    func testTestCameraOptionsWithASceneStayCodable() throws {
        let options = TestCameraOptions(pattern: .smpte, motion: 0, scene: .init(
            object: .init(rect: Self.objectRect, luma: 16, appearsAfter: 2.5), brightnessRamp: -0.5))
        let decoded = try JSONDecoder().decode(TestCameraOptions.self, from: JSONEncoder().encode(options))
        XCTAssertEqual(decoded, options)
        XCTAssertEqual(decoded.scene?.object?.rect, Self.objectRect)
        var plain = try JSONSerialization.jsonObject(with: JSONEncoder().encode(TestCameraOptions())) as? [String: Any]
        plain?["scene"] = nil
        let older = try JSONSerialization.data(withJSONObject: try XCTUnwrap(plain))
        XCTAssertNil(try JSONDecoder().decode(TestCameraOptions.self, from: older).scene)
        XCTAssertNotEqual(options, TestCameraOptions(pattern: .smpte, motion: 0), "the scene is not part of the options' identity")
    }

    private func expectOnlyTheControlToSeeTheObject(_ restricted: CaptureMotionOutput, _ name: String) async throws {
        let control = CaptureMotionOutput()
        let controlEvents = control.events()
        let restrictedEvents = MotionEventLog(restricted)
        let session = try await startSession(camera: sceneCamera(name), outputs: [control, restricted])
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        _ = try await firstElement(of: controlEvents, within: engineDeadline, "the control's motionBegan")
        // A second more of the object in front of the restricted output.
        let seen = restricted.analyzedFrameCount
        try await within(engineDeadline, "a second of frames after the detection") {
            while restricted.analyzedFrameCount < seen + Self.frameRate { try await Task.sleep(for: .milliseconds(10)) }
        }
        print("motion (\(name)): the control saw the object; the \(name) output \(restricted.analyzedFrameCount) frames, "
              + "largest score \(restricted.statistics.largestStillScore)")
        XCTAssertEqual(restrictedEvents.all, [], "the \(name) output saw the object")
        XCTAssertTrue(control.isMotionDetected)
        XCTAssertFalse(restricted.isMotionDetected)
    }
}

/// Every frame of a video data output: its timestamp, and whether it shows the scene's object (the mean luma
/// of the middle half of the object's rectangle is within 20 steps of the object's).
private final class ObjectFrameLog: Sendable {
    struct Entry: Sendable {
        var timeStamp: UInt64
        var regionLuma: Double
        var showsObject: Bool
    }
    private let entries = Locked<[Entry]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ output: CaptureVideoDataOutput, watching rect: CGRect, objectLuma: UInt8) {
        let stream = output.sampleBuffers()
        let started = Task { [entries] in
            for await frame in stream {
                let luma = frame.withPlanes { planes -> Double in
                    guard let plane = planes.first else { return 0 }
                    let step = max(1, plane.rowBytes / frame.width)
                    let inner = rect.insetBy(dx: rect.width / 4, dy: rect.height / 4)
                    var sum = 0, count = 0
                    for y in Int(inner.minY * Double(plane.height))..<Int(inner.maxY * Double(plane.height)) {
                        for x in Int(inner.minX * Double(frame.width))..<Int(inner.maxX * Double(frame.width)) {
                            sum += Int(plane.bytes[y * plane.stride + x * step])
                            count += 1
                        }
                    }
                    return Double(sum) / Double(max(count, 1))
                } ?? 0
                entries.withLock {
                    $0.append(Entry(timeStamp: frame.presentationTimeStamp, regionLuma: luma,
                                    showsObject: abs(luma - Double(objectLuma)) < 20))
                }
            }
        }
        task.withLock { $0 = started }
    }

    deinit { task.withLock { $0?.cancel() } }

    var all: [Entry] { entries.withLock { $0 } }
    var latestTimeStamp: UInt64 { entries.withLock { $0.last?.timeStamp ?? 0 } }
}

/// A delegate that keeps the motions it hears of and notes a call off its queue.
private final class MotionDelegate: CaptureMotionOutputDelegate, Sendable {
    private let queue: DispatchQueue
    private let state = Locked<(began: [CaptureMotionOutput.Motion], ended: [CaptureMotionOutput.Motion], offQueue: Bool)>(([], [], false))

    init(expectedQueue: DispatchQueue) { queue = expectedQueue }

    var began: [CaptureMotionOutput.Motion] { state.withLock { $0.began } }
    var calledOffItsQueue: Bool { state.withLock { $0.offQueue } }

    func captureOutput(_ output: CaptureMotionOutput, didBeginMotion motion: CaptureMotionOutput.Motion) {
        let onQueue = DispatchQueue.getSpecific(key: Self.key) == ObjectIdentifier(queue)
        state.withLock { $0.began.append(motion); $0.offQueue = $0.offQueue || !onQueue }
    }

    func captureOutput(_ output: CaptureMotionOutput, didEndMotion motion: CaptureMotionOutput.Motion) {
        let onQueue = DispatchQueue.getSpecific(key: Self.key) == ObjectIdentifier(queue)
        state.withLock { $0.ended.append(motion); $0.offQueue = $0.offQueue || !onQueue }
    }

    static let key = DispatchSpecificKey<ObjectIdentifier>()
}

/// Every event an output sends, as it comes.
private final class MotionEventLog: Sendable {
    private let events = Locked<[CaptureMotionOutput.Event]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ output: CaptureMotionOutput) {
        let stream = output.events()
        let started = Task { [events] in
            for await event in stream { events.withLock { $0.append(event) } }
        }
        task.withLock { $0 = started }
    }

    deinit { task.withLock { $0?.cancel() } }

    var all: [CaptureMotionOutput.Event] { events.withLock { $0 } }
}
