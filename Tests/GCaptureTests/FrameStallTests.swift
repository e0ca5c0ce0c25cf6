import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// Records a session's events with the moment each arrived (monotonic milliseconds).
final class EventLog: Sendable {
    private let entries = Locked<[(time: Double, event: CaptureSession.Event)]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ session: CaptureSession) {
        let stream = session.events()
        let started = Task { [weak self] in
            for await event in stream { self?.entries.withLock { $0.append((monotonicMilliseconds(), event)) } }
        }
        task.withLock { $0 = started }
    }

    deinit { task.withLock { $0?.cancel() } }

    var all: [(time: Double, event: CaptureSession.Event)] { entries.withLock { $0 } }

    /// The first event since `index` that matches, waiting up to `timeout` seconds for it.
    func waitFor(from index: Int = 0, timeout: Double, _ what: String,
                 _ matches: (CaptureSession.Event) -> Bool) async throws -> (time: Double, index: Int) {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let found = all.enumerated().dropFirst(index).first(where: { matches($0.element.event) }) {
                return (found.element.time, found.offset)
            }
            guard Date() < deadline else { throw DeadlineExceeded(description: "\(what) did not happen within \(timeout) s; events: \(all.map(\.event))") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

extension CaptureSession.Event {
    var interruptionReason: CaptureSession.InterruptionReason? {
        if case .wasInterrupted(let reason) = self { reason } else { nil }
    }
    var endedReason: CaptureSession.InterruptionReason? {
        if case .interruptionEnded(let reason) = self { reason } else { nil }
    }
}

final class FrameStallTests: XCTestCase {
    func testTheDefaultIntervalIsTenFramesAndAtLeastOneSecond() {
        XCTAssertEqual(FrameStallWatchdog.defaultTimeout(frameRate: Fraction(30, 1)), .seconds(1))
        XCTAssertEqual(FrameStallWatchdog.defaultTimeout(frameRate: Fraction(5, 1)), .seconds(2))
        XCTAssertEqual(FrameStallWatchdog.defaultTimeout(frameRate: Fraction(15, 2)), .milliseconds(1333))
    }

    /// A camera that stops delivering without an error (its frames stop before the watchdog, as a wedged
    /// driver's do) interrupts the session with .videoDeviceStalled within the interval plus 0.5 s; when
    /// its frames come again the interruption ends and frames reach the output, with no call from the test.
    func testAStalledCameraIsInterruptedAndEndsWhenFramesComeAgain() async throws {
        let id = "test-stall-\(UUID().uuidString)"
        let camera = CaptureDevice.makeTestCamera(uniqueID: id, options: TestCameraOptions(maxFrameRate: 30))
        defer { TestCameraStalls.set(id, stalled: false) }
        let input = try CaptureDeviceInput(device: camera)
        let interval = 0.6
        input.frameStallTimeout = .milliseconds(Int(interval * 1000))
        let output = CaptureVideoDataOutput()
        let session = try makeSession(input: input, outputs: [output])
        let events = EventLog(session)
        let frames = FrameLog(output)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        let flowing = await frames.waitFor(10)
        XCTAssertTrue(flowing, "frames before the stall")

        let stalledAt = monotonicMilliseconds()
        TestCameraStalls.set(id, stalled: true)
        let interrupted = try await events.waitFor(timeout: interval + 3, "the stall interruption") { $0.interruptionReason != nil }
        let latency = interrupted.time - stalledAt
        XCTAssertEqual(events.all[interrupted.index].event.interruptionReason, .videoDeviceStalled)
        XCTAssertLessThanOrEqual(latency, (interval + 0.5) * 1000, "stall detected \(latency) ms after the frames stopped")
        XCTAssertGreaterThanOrEqual(latency, interval * 1000 - 50, "a stall is not reported before the interval has passed")
        print("stall detection: \(String(format: "%.0f", latency)) ms for a \(interval) s interval")
        let framesDuringStall = frames.count

        TestCameraStalls.set(id, stalled: false)
        let resumedAt = monotonicMilliseconds()
        let ended = try await events.waitFor(from: interrupted.index, timeout: 3, "the end of the stall") { $0.endedReason != nil }
        XCTAssertEqual(events.all[ended.index].event.endedReason, .videoDeviceStalled)
        print("stall end reported \(String(format: "%.0f", ended.time - resumedAt)) ms after frames came again")
        let flowingAgain = await frames.waitFor(framesDuringStall + 10)
        XCTAssertTrue(flowingAgain, "frames flow after the stall")
        XCTAssertTrue(session.isRunning)

        // The watchdog keeps watching: a second stall is reported as well.
        TestCameraStalls.set(id, stalled: true)
        let again = try await events.waitFor(from: ended.index, timeout: interval + 3, "the second stall") { $0.interruptionReason != nil }
        XCTAssertEqual(events.all[again.index].event.interruptionReason, .videoDeviceStalled)
        XCTAssertFalse(events.all.contains { if case .runtimeError = $0.event { true } else { false } },
                       "a stall is an interruption, not a runtime error: \(events.all.map(\.event))")
    }

    /// A camera slower to give its first frame than the stall interval is not failed for it: the start has
    /// its own deadline (USB cameras can take a second or two). One that never delivers fails the start in
    /// words, not as the watchdog's.
    func testACameraSlowToStartIsJudgedByTheStartsDeadlineNotTheStallInterval() async throws {
        let id = "test-stall-\(UUID().uuidString)"
        let camera = CaptureDevice.makeTestCamera(uniqueID: id, options: TestCameraOptions(maxFrameRate: 30))
        let input = try CaptureDeviceInput(device: camera)
        input.frameStallTimeout = .milliseconds(300)
        let session = try makeSession(input: input, outputs: [CaptureVideoDataOutput()])
        let events = EventLog(session)
        TestCameraStalls.set(id, stalled: true)
        defer { TestCameraStalls.set(id, stalled: false) }
        Task {
            try await Task.sleep(for: .milliseconds(1000))
            TestCameraStalls.set(id, stalled: false)
        }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertFalse(events.all.contains { $0.event.interruptionReason != nil || $0.event.endedReason != nil },
                       "a slow start is no stall: \(events.all.map(\.event))")
    }

    func testACameraStalledFromTheStartFailsTheStartSayingSo() async throws {
        let id = "test-stall-\(UUID().uuidString)"
        let camera = CaptureDevice.makeTestCamera(uniqueID: id, options: TestCameraOptions(maxFrameRate: 30))
        TestCameraStalls.set(id, stalled: true)
        defer { TestCameraStalls.set(id, stalled: false) }
        let session = try makeSession(camera: camera, outputs: [CaptureVideoDataOutput()])
        do {
            try await within(engineDeadline, "session.start()") { try await session.start() }
            XCTFail("started without a frame")
        } catch {
            XCTAssertTrue("\(error)".contains("no frame"), "\(error)")
            XCTAssertFalse("\(error)".contains("Watchdog"), "\(error)")
        }
    }
}

/// The watchdog against a real driver: vivid told to drop every buffer stops delivering as a wedged camera
/// does (no error; v4l2src waits in poll).
extension V4L2DeviceTests {
    func testAStallingCameraIsInterruptedWithinItsIntervalAndComesBack() async throws {
        let camera = try XCTUnwrap(CaptureDevice.allDevices.first { $0.nodePath == "/dev/video0" })
        let input = try CaptureDeviceInput(device: camera)
        let output = CaptureVideoDataOutput()
        let session = try makeSession(input: input, outputs: [output])
        let events = EventLog(session)
        let frames = FrameLog(output)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        defer {
            try? setVividControl("percentage_of_dropped_buffers", 0)
            XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() })
        }
        let flowing = await frames.waitFor(10, timeout: 10)
        XCTAssertTrue(flowing, "frames before the stall")
        // 640x480 at 25 fps: ten intervals are 0.4 s, so the floor of one second applies.
        let interval = 1.0

        let stalledAt = monotonicMilliseconds()
        try setVividControl("percentage_of_dropped_buffers", 100)
        let commandMilliseconds = monotonicMilliseconds() - stalledAt
        let interrupted = try await events.waitFor(timeout: interval + 5, "the stall interruption") { $0.interruptionReason != nil }
        XCTAssertEqual(events.all[interrupted.index].event.interruptionReason, .videoDeviceStalled)
        // The stall begins with the last frame the camera delivered (v4l2-ctl itself takes a second to run
        // under emulation), as the test saw it arrive; the interruption as the test saw it arrive.
        let interruptedAt = Date().addingTimeInterval((interrupted.time - monotonicMilliseconds()) / 1000)
        let lastFrame = try XCTUnwrap(frames.all.last { $0.arrival <= interruptedAt })
        let latency = interruptedAt.timeIntervalSince(lastFrame.arrival) * 1000
        XCTAssertLessThanOrEqual(latency, (interval + 0.5) * 1000, "stall detected \(latency) ms after the last frame")
        XCTAssertGreaterThanOrEqual(latency, interval * 1000 - 100, "not before the interval has passed")
        print("vivid stall detection: \(String(format: "%.0f", latency)) ms after the last frame for a \(interval) s interval "
              + "(v4l2-ctl took \(String(format: "%.0f", commandMilliseconds)) ms)")
        let framesDuringStall = frames.count

        let resumedAt = monotonicMilliseconds()
        try setVividControl("percentage_of_dropped_buffers", 0)
        let ended = try await events.waitFor(from: interrupted.index, timeout: 5, "the end of the stall") { $0.endedReason != nil }
        XCTAssertEqual(events.all[ended.index].event.endedReason, .videoDeviceStalled)
        print("vivid stall end reported \(String(format: "%.0f", ended.time - resumedAt)) ms after the drops stopped")
        let flowingAgain = await frames.waitFor(framesDuringStall + 10, timeout: 10)
        XCTAssertTrue(flowingAgain, "frames flow after the stall")
        XCTAssertTrue(session.isRunning)
        XCTAssertFalse(events.all.contains { if case .runtimeError = $0.event { true } else { false } }, "\(events.all.map(\.event))")
    }
}
