import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

/// What a session said, with when (ms of the monotonic clock), for tests to wait on.
final class SessionEventLog: Sendable {
    struct Entry: Sendable { var event: CaptureSession.Event; var at: Double }
    private let entries = Locked<[Entry]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ session: CaptureSession) {
        let stream = session.events()
        let started = Task { [weak self] in
            for await event in stream { self?.entries.withLock { $0.append(Entry(event: event, at: monotonicMilliseconds())) } }
        }
        task.withLock { $0 = started }
    }

    deinit { task.withLock { $0?.cancel() } }

    var all: [Entry] { entries.withLock { $0 } }

    var interruptions: [(reason: CaptureSession.InterruptionReason, at: Double)] {
        all.compactMap { if case .wasInterrupted(let reason) = $0.event { (reason, $0.at) } else { nil } }
    }
    var endings: [(reason: CaptureSession.InterruptionReason, at: Double)] {
        all.compactMap { if case .interruptionEnded(let reason) = $0.event { (reason, $0.at) } else { nil } }
    }
    var runtimeErrors: [CaptureSession.RuntimeError] {
        all.compactMap { if case .runtimeError(let error) = $0.event { error } else { nil } }
    }

    /// Waits until `condition` holds of the log, or `timeout` passes; says whether it held.
    func wait(timeout: TimeInterval, until condition: (SessionEventLog) -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition(self), Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return condition(self)
    }
}

/// Interruptions of a real camera (vivid inside ../shared/testbed/v4l2-vm): unplugged, held by another
/// process, unloaded and loaded again. They skip on machines without /dev/video0 (and fail inside the VM
/// without it), like V4L2DeviceTests.
final class InterruptionDeviceTests: XCTestCase {
    override func setUpWithError() throws { try requireVividCamera() }

    /// Small frames: the VM emulates its CPU and is shared, and x264 at 640x480 there starves everything else.
    static let preset = CaptureSession.Preset.low

    /// vivid comes back from `disconnect` only when every handle on it is closed. A process that streamed
    /// from it before still holds one (GStreamer 1.22's v4l2src keeps a dup of the fd in its buffer pool after
    /// it stops; see V4L2DeviceTests), so these tests run each in a process of its own (.ci/run does). A
    /// real USB camera comes back as a new device node, which old handles do not hold.
    func requireFreshProcess() throws {
        let open = V4L2DeviceTests.openCameraNodes()
        if !open.isEmpty {
            // A skip even under CI: .ci/run runs each of these tests in a VM process of its own.
            throw XCTSkip("this process still holds \(open) from an earlier test; run this test in a process of its own")
        }
    }

    func vivid() throws -> CaptureDevice {
        try XCTUnwrap(CaptureDevice.allDevices.first { $0.nodePath == "/dev/video0" }, "\(CaptureDevice.allDevices)")
    }

    /// Presses vivid's `disconnect` button from this process (VIDIOC_S_CTRL on a handle of our own, closed at
    /// once so the driver can come back), for a latency measured from the moment it happens. Returns it
    /// (monotonic ms).
    func disconnectVivid() throws -> Double {
        let (time, fd) = try disconnectVividKeepingAHandle()
        close(fd)
        return time
    }

    /// The same, keeping the handle it pressed the button with: while any handle is open vivid stays
    /// disconnected (ENODEV for everyone), so the session's retries fail until the caller closes it.
    private func disconnectVividKeepingAHandle() throws -> (time: Double, fd: Int32) {
        let listing = try runTool("/usr/bin/v4l2-ctl", ["-d", "/dev/video0", "--list-ctrls"])
        let line = try XCTUnwrap(listing.stdout.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("disconnect ") })
        let hex = try XCTUnwrap(line.split(separator: " ").first { $0.hasPrefix("0x") })
        var control: (id: UInt32, value: Int32) = (try XCTUnwrap(UInt32(hex.dropFirst(2), radix: 16)), 1)
        let fd = open("/dev/video0", O_RDWR | O_NONBLOCK)
        guard fd >= 0 else { throw CheckFailed(description: "open /dev/video0: errno \(errno)") }
        let VIDIOC_S_CTRL: UInt = 0xC008_561C
        let now = monotonicMilliseconds()
        let result = withUnsafeMutablePointer(to: &control) { ioctl(fd, VIDIOC_S_CTRL, UnsafeMutableRawPointer($0)) }
        XCTAssertEqual(result, 0, "VIDIOC_S_CTRL disconnect: errno \(errno)")
        return (now, fd)
    }

    private func shell(_ command: String) throws {
        let result = try runTool("/bin/sh", ["-c", command], timeout: 60)
        XCTAssertEqual(result.status, 0, "\(command): \(result.stderr)")
    }

    /// vivid's `disconnect` control is a USB unplug as the driver sees it: the session says so, fills the gap
    /// with black frames in the same recording, gets the camera back with no call, and records it again.
    func testADisconnectedCameraInterruptsAndComesBackInTheSameRecording() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let frames = CaptureVideoDataOutput()
        let brightness = FrameLog(frames)
        try requireFreshProcess()
        let session = try makeSession(camera: try vivid(), preset: Self.preset, outputs: [movie, frames])
        let log = SessionEventLog(session)
        // The notification as an app observing it hears it, on the posting thread: no hop through a task.
        let notified = Locked<Double?>(nil)
        let observer = NotificationCenter.default.addObserver(forName: CaptureSession.wasInterruptedNotification, object: session,
                                                              queue: nil) { _ in notified.withLock { $0 = $0 ?? monotonicMilliseconds() } }
        defer { NotificationCenter.default.removeObserver(observer) }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = folder.appendingPathComponent("disconnect.mp4")
        let waiter = await startRecording(movie, to: url)
        let recordingStarted = monotonicMilliseconds()
        try await Task.sleep(for: .milliseconds(1500))

        let before = try disconnectVivid()
        let interrupted = await log.wait(timeout: 5) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted, "no interruption within 5 s: \(log.all.map { "\($0.event)" })")
        XCTAssertEqual(log.interruptions.map(\.reason), [.videoDeviceUnplugged])
        // events() yields before the notification is posted: wait for that too.
        _ = await log.wait(timeout: 2) { _ in notified.withLock { $0 } != nil }
        let heard = notified.withLock { $0 }
        print("BENCH disconnect → wasInterruptedNotification: \(heard.map { String(format: "%.0f ms", $0 - before) } ?? "not heard"), "
              + "→ events(): \(log.interruptions.first.map { String(format: "%.0f ms", $0.at - before) } ?? "none") (goal ≤ 100 ms)")
        XCTAssertTrue(session.isRunning)

        let ended = await log.wait(timeout: 15) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "the camera did not come back within 15 s: \(log.all.map { "\($0.event)" })")
        XCTAssertEqual(log.endings.map(\.reason), [.videoDeviceUnplugged])
        XCTAssertFalse(session.isInterrupted)
        XCTAssertTrue(log.runtimeErrors.isEmpty, "\(log.runtimeErrors)")
        if let end = log.endings.first?.at, let start = log.interruptions.first?.at,
           let first = brightness.all.first(where: { $0.at > end && FrameLog.isPicture($0) }) {
            print("BENCH interrupted for \(String(format: "%.0f", end - start)) ms; first camera frame "
                  + "\(String(format: "%.0f", first.at - end)) ms after interruptionEnded")
        }
        try await Task.sleep(for: .milliseconds(1500))
        let recordingStopped = monotonicMilliseconds()
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        // The outputs never stopped: black frames in the gap, the camera's picture on both sides.
        let seen = brightness.all
        let gapStart = try XCTUnwrap(log.interruptions.first?.at), gapEnd = try XCTUnwrap(log.endings.first?.at)
        XCTAssertTrue(seen.contains { $0.at < gapStart && FrameLog.isPicture($0) })
        XCTAssertTrue(seen.contains { $0.at > gapStart + 100 && $0.at < gapEnd && !FrameLog.isPicture($0) }, "no black frames in the gap")
        XCTAssertGreaterThan(seen.filter { $0.at > gapEnd && FrameLog.isPicture($0) }.count, 10, "too few camera frames after it came back")

        let probed = try probe(url)
        XCTAssertEqual(probed.codecs, ["h264"])
        XCTAssertTrue(try ffmpegDecodes(url))
        // The file spans the whole recording, gap included (the VM is slow to start and stop: 1 s of slack).
        let recorded = (recordingStopped - recordingStarted) / 1000
        XCTAssertEqual(probed.duration, recorded, accuracy: 1.0, "one file through the gap")
        let lumas = try meanLumas(url)
        XCTAssertGreaterThan(lumas.last ?? 0, 30, "the end of the file is not the camera's picture: \(lumas)")
        XCTAssertTrue(lumas.contains { $0 < 5 }, "no black frames in the file's gap: \(lumas)")
    }

    /// Issue 24: a camera unplugged while its stall interruption was on (a loaded machine's first seconds leave
    /// the camera silent for longer than the stall interval) was refused as "interrupted already": the dead
    /// camera stayed in place, no filler, no retry, nothing said, and the recording stopped growing. vivid
    /// dropping every buffer is the stall here, made on purpose; its disconnect comes during it.
    func testACameraUnpluggedWhileStalledIsInterruptedAndComesBackInTheSameRecording() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let frames = CaptureVideoDataOutput()
        let brightness = FrameLog(frames)
        try requireFreshProcess()
        addTeardownBlock { try? self.setVividControl("percentage_of_dropped_buffers", 0) }
        let session = try makeSession(camera: try vivid(), preset: Self.preset, outputs: [movie, frames])
        let log = SessionEventLog(session)
        try await session.start()
        let url = folder.appendingPathComponent("stalled-then-unplugged.mp4")
        let waiter = await startRecording(movie, to: url)
        let recordingStarted = monotonicMilliseconds()
        try await Task.sleep(for: .milliseconds(1500))

        try setVividControl("percentage_of_dropped_buffers", 100)
        let stalled = await log.wait(timeout: 10) { $0.interruptions.contains { $0.reason == .videoDeviceStalled } }
        XCTAssertTrue(stalled, "vivid dropping every buffer did not read as a stall: \(log.all.map { "\($0.event)" })")
        _ = try disconnectVivid()
        let unplugged = await log.wait(timeout: 5) { $0.interruptions.contains { $0.reason == .videoDeviceUnplugged } }
        XCTAssertTrue(unplugged, "unplugged during the stall, yet no interruption within 5 s: \(log.all.map { "\($0.event)" })")
        // vivid is back once the session has let go of it (the filler in its place); it delivers once it keeps
        // its buffers again.
        let deadline = Date().addingTimeInterval(15)
        while (try? setVividControl("percentage_of_dropped_buffers", 0)) == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        let ended = await log.wait(timeout: 20) { $0.endings.contains { $0.reason == .videoDeviceUnplugged } }
        XCTAssertTrue(ended, "the camera did not come back: \(log.all.map { "\($0.event)" })")
        XCTAssertFalse(session.isInterrupted)
        try await Task.sleep(for: .milliseconds(1500))
        let recordingStopped = monotonicMilliseconds()
        movie.stopRecording()
        let finished = await waiter.waitForFinish()
        XCTAssertNil(finished?.error, "\(String(describing: finished?.error))")
        await session.stop()

        XCTAssertEqual(log.interruptions.map(\.reason), [.videoDeviceStalled, .videoDeviceUnplugged])
        XCTAssertEqual(log.endings.map(\.reason), [.videoDeviceStalled, .videoDeviceUnplugged])
        XCTAssertTrue(log.runtimeErrors.isEmpty, "\(log.runtimeErrors)")
        let end = try XCTUnwrap(log.endings.last?.at)
        XCTAssertGreaterThan(brightness.all.filter { $0.at > end && FrameLog.isPicture($0) }.count, 10, "too few camera frames after it came back")
        // The file kept growing through the gap and after it (the VM is slow to start and stop: 1 s of slack).
        XCTAssertEqual(try probe(url).duration, (recordingStopped - recordingStarted) / 1000, accuracy: 1.0, "one file through the gap")
    }

    /// Issue 24 as it was seen: disconnects at many moments after the camera (re)started, on a loaded machine
    /// (busy loops beside the session), each in the same recording: every one is reported, ends when vivid is
    /// back, and the file keeps growing after it. The camera restarts at each recovery, so each moment is
    /// counted from the previous interruption's end. A stall interval of 60 ms (two frame intervals) makes the stalls a loaded
    /// machine gives a 1 s interval in its first seconds happen here all along, so that disconnects meet them.
    func testDisconnectsAtManyMomentsAfterTheCameraStartsAreEachReportedUnderLoad() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        try requireFreshProcess()
        for _ in 0..<2 {
            let load = Process()
            load.executableURL = URL(fileURLWithPath: "/bin/sh")
            load.arguments = ["-c", "while :; do :; done"]
            try load.run()
            addTeardownBlock { kill(load.processIdentifier, SIGKILL) }
        }
        let input = try CaptureDeviceInput(device: try vivid())
        input.frameStallTimeout = .milliseconds(60)
        let session = try makeSession(input: input, preset: Self.preset, outputs: [movie])
        let log = SessionEventLog(session)
        try await session.start()
        let url = folder.appendingPathComponent("many-disconnects.mp4")
        let waiter = await startRecording(movie, to: url)
        let recordingStarted = monotonicMilliseconds()
        var missed: [String] = []
        for moment in [0.5, 1, 2, 3, 4, 6] {
            let unpluggedBefore = log.interruptions.filter { $0.reason == .videoDeviceUnplugged }.count
            let endedBefore = log.endings.filter { $0.reason == .videoDeviceUnplugged }.count
            try await Task.sleep(for: .milliseconds(Int(moment * 1000)))
            _ = try disconnectVivid()
            let reported = await log.wait(timeout: 5) { $0.interruptions.filter { $0.reason == .videoDeviceUnplugged }.count > unpluggedBefore }
            let ended = await log.wait(timeout: 15) { $0.endings.filter { $0.reason == .videoDeviceUnplugged }.count > endedBefore }
            print("BENCH disconnect \(moment) s after the camera started: \(reported ? "interrupted" : "NOT interrupted"), "
                  + "\(ended ? "ended" : "NOT ended"); stalls so far: \(log.interruptions.filter { $0.reason == .videoDeviceStalled }.count)")
            if !reported || !ended { missed.append("\(moment) s: \(reported ? "" : "not interrupted ")\(ended ? "" : "not ended")") }
            // A stall interruption (the load) may still be on: the next moment counts from the camera delivering.
            _ = await log.wait(timeout: 10) { _ in !session.isInterrupted }
        }
        try await Task.sleep(for: .milliseconds(1500))
        let recordingStopped = monotonicMilliseconds()
        movie.stopRecording()
        let finished = await waiter.waitForFinish()
        await session.stop()
        XCTAssertEqual(missed, [], "\(log.all.map { "\($0.event)" })")
        XCTAssertNil(finished?.error, "\(String(describing: finished?.error))")
        XCTAssertTrue(log.runtimeErrors.isEmpty, "\(log.runtimeErrors)")
        XCTAssertEqual(try probe(url).duration, (recordingStopped - recordingStarted) / 1000, accuracy: 1.5, "one file, growing to the end")
    }

    /// A camera another process streams from when the session starts: the session starts anyway, interrupted
    /// (AVFoundation's videoDeviceInUseByAnotherClient), and gets the camera when the other one lets go.
    func testACameraHeldByAnotherProcessStartsInterruptedAndRecoversWhenReleased() async throws {
        let camera = try vivid()
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/v4l2-ctl")
        holder.arguments = ["-d", "/dev/video0", "--set-fmt-video=width=640,height=480", "--stream-mmap", "--stream-count=100000"]
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        addTeardownBlock { if holder.isRunning { kill(holder.processIdentifier, SIGKILL) } }
        try await Task.sleep(for: .milliseconds(1000))
        XCTAssertTrue(holder.isRunning, "v4l2-ctl did not keep streaming")

        let frames = CaptureVideoDataOutput()
        let brightness = FrameLog(frames)
        let session = try makeSession(camera: camera, preset: Self.preset, outputs: [frames])
        let log = SessionEventLog(session)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        XCTAssertTrue(session.isRunning)
        XCTAssertTrue(session.isInterrupted)
        XCTAssertEqual(session.interruptionReasons, [.videoDeviceInUseByAnotherClient])
        let interrupted = await log.wait(timeout: 2) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted)
        XCTAssertEqual(log.interruptions.map(\.reason), [.videoDeviceInUseByAnotherClient])
        try await Task.sleep(for: .milliseconds(2500))
        XCTAssertTrue(session.isInterrupted, "the camera is still held")
        XCTAssertTrue(brightness.all.count > 10 && !brightness.all.contains(where: FrameLog.isPicture),
                      "black frames stand in while the camera is held: \(brightness.all.count) frames")

        let released = monotonicMilliseconds()
        kill(holder.processIdentifier, SIGKILL)
        let exitDeadline = Date().addingTimeInterval(10)
        while holder.isRunning, Date() < exitDeadline { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertFalse(holder.isRunning, "v4l2-ctl did not exit")
        let ended = await log.wait(timeout: 10) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "no interruptionEnded within 10 s of the camera being released")
        XCTAssertEqual(log.endings.map(\.reason), [.videoDeviceInUseByAnotherClient])
        XCTAssertFalse(session.isInterrupted)
        try await Task.sleep(for: .milliseconds(1000))
        let pictures = brightness.all.filter(FrameLog.isPicture)
        XCTAssertGreaterThan(pictures.count, 10, "frames from the camera after it was released")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        // Side by side, on the same device: how long plain GStreamer takes to start it and get a frame.
        let launched = monotonicMilliseconds()
        let plain = try runTool("/usr/bin/gst-launch-1.0", ["-q", "v4l2src", "device=/dev/video0", "num-buffers=1", "!",
                                                             "video/x-raw,width=320,height=180", "!", "fakesink"], timeout: 60)
        let plainMs = monotonicMilliseconds() - launched
        XCTAssertEqual(plain.status, 0, plain.stderr)
        if let first = pictures.first {
            print("BENCH camera released → first camera frame: \(String(format: "%.0f", first.at - released)) ms; "
                  + "plain gst-launch-1.0 v4l2src num-buffers=1 (process start included): \(String(format: "%.0f", plainMs)) ms")
        }
    }

    /// Unloading and loading vivid is a real unplug and replug (uevents, the device monitor). The driver cannot
    /// be unloaded while the camera is open, so the camera is disconnected first: the session lets go of it
    /// (its source stopped, the fd closed), which is what lets rmmod through. It then comes back by its
    /// stable id. Only inside the VM.
    func testACameraUnloadedAndLoadedAgainIsFoundByItsStableID() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard environment["V4L2VM"] == "1" else {
            // A skip even under CI: .ci/run runs this test inside the v4l2 VM, alone, with GCAPTURE_HOTPLUG_TEST=1.
            throw XCTSkip("reloads the vivid kernel module: only inside ../shared/testbed/v4l2-vm")
        }
        // As V4L2DeviceTests' hotplug test: a process that streamed before may still hold the device through
        // v4l2src's orphaned buffer pool, and then the module cannot be unloaded. .ci/run runs it alone.
        if !V4L2DeviceTests.openCameraNodes().isEmpty, environment["GCAPTURE_HOTPLUG_TEST"] != "1" {
            // Only the whole class's run in the VM gets here; .ci/run runs this test before, alone.
            throw XCTSkip("this process has streamed from the camera already; run this test on its own")
        }
        let camera = try vivid()
        let frames = CaptureVideoDataOutput()
        let brightness = FrameLog(frames)
        let session = try makeSession(camera: camera, preset: Self.preset, outputs: [frames])
        let log = SessionEventLog(session)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await Task.sleep(for: .milliseconds(1000))
        // The module unloads only once every handle is closed, and the session, having let go, takes the
        // camera back at its next retry. So the test keeps vivid disconnected with a handle of its own until
        // the session's retries have slowed to their steady pace, then closes it and unloads at once; should
        // a retry win that race, the camera is disconnected again and the test tries once more.
        var unloaded = false
        for _ in 0..<3 where !unloaded {
            let (_, fd) = try disconnectVividKeepingAHandle()
            let interrupted = await log.wait(timeout: 10) { _ in session.isInterrupted }
            XCTAssertTrue(interrupted, "the disconnected camera did not interrupt the session")
            try await Task.sleep(for: .milliseconds(2500))
            close(fd)
            unloaded = try runTool("/sbin/rmmod", ["vivid"], timeout: 30).status == 0
            if !unloaded { _ = await log.wait(timeout: 10) { _ in !session.isInterrupted } }
        }
        XCTAssertTrue(unloaded, "vivid stayed in use: the session did not let go of the camera")
        try await Task.sleep(for: .milliseconds(1500))
        XCTAssertTrue(session.isRunning)
        XCTAssertTrue(session.isInterrupted, "no camera, yet not interrupted")
        let gone = monotonicMilliseconds()
        let endingsBefore = log.endings.count
        try shell("modprobe vivid")
        let loaded = monotonicMilliseconds()
        let ended = await log.wait(timeout: 15) { $0.endings.count > endingsBefore }
        XCTAssertTrue(ended, "the camera did not come back within 15 s of modprobe: \(log.all.map { "\($0.event)" })")
        try await Task.sleep(for: .milliseconds(1000))
        let pictures = brightness.all.filter { $0.at > gone && FrameLog.isPicture($0) }
        XCTAssertGreaterThan(pictures.count, 10, "frames from the reloaded camera")
        if let first = pictures.first {
            print("BENCH modprobe returned → first camera frame: \(String(format: "%.0f", first.at - loaded)) ms (udev's add, then the immediate retry)")
        }
        XCTAssertEqual(CaptureDevice.device(withUniqueID: camera.uniqueID)?.uniqueID, camera.uniqueID)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// The issue's reproduction: `gcapture frames --json` with the camera disconnected at 3 s reports the
    /// interruption and its end, keeps running, and delivers frames after it (it printed nothing and
    /// "finished" with 27 frames before).
    func testTheFramesCommandReportsTheInterruptionAndKeepsCapturing() throws {
        let command = try launch("gcapture", ["frames", "--camera", "/dev/video0", "--preset", Self.preset.rawValue,
                                              "--duration", "10", "--json"])
        XCTAssertTrue(command.waitForEvent("started", timeout: 60), command.errorOutput)
        Thread.sleep(forTimeInterval: 3)
        try shell("v4l2-ctl -d /dev/video0 --set-ctrl disconnect=1")
        XCTAssertTrue(command.waitForEvent("interrupted", timeout: 10), command.output + command.errorOutput)
        XCTAssertTrue(command.waitForEvent("interruptionEnded", timeout: 20), command.output + command.errorOutput)
        XCTAssertTrue(command.waitForExit(timeout: 60))
        XCTAssertEqual(command.status, 0, command.errorOutput)
        let interrupted = try XCTUnwrap(command.events("interrupted").first)
        XCTAssertEqual(interrupted["reason"] as? String, "videoDeviceUnplugged")
        XCTAssertEqual(interrupted["reasonCode"] as? Int, 100)
        XCTAssertEqual(command.events("interruptionEnded").first?["reason"] as? String, "videoDeviceUnplugged")
        let finished = try XCTUnwrap(command.events("finished").first)
        // Frames throughout: the camera's before and after, black ones in the gap (vivid's low preset is
        // 320x180 at up to 30 fps; the VM emulates its CPU, so most frames, not all).
        XCTAssertGreaterThan(finished["frames"] as? Int ?? 0, 100, "\(finished)")
        let order = command.events.compactMap { $0["event"] as? String }
        XCTAssertEqual(order, ["started", "interrupted", "interruptionEnded", "finished"])
    }
}
