import Foundation
import GCapture
import GStreamerKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Interruptions on a real V4L2 camera (inside ../shared/testbed/v4l2-vm: vivid's fault-injection controls).
/// One session with a frame output runs through every round; each round, timed from this side:
///   disconnect   vivid's `disconnect` control (a USB unplug as the driver sees it) → wasInterrupted
///                (goal ≤ 100 ms), then → interruptionEnded with no call from here: the session let go of
///                the device (vivid reconnects when its last handle closes) and reopened it
///   stall        `percentage_of_dropped_buffers=100` (the camera stays open and silent) → wasInterrupted
///                (goal: the watchdog's interval + 0.5 s); set back to 0 → interruptionEnded
///   plain start  `v4l2src ! caps ! appsink` from PLAYING to its first frame, in this process, between the
///                engine's rounds: what the recovery's reopening is held against (goal ≤ 1.2× plus the
///                retry delay the session waited before its first attempt)
enum InterruptionBenchmark {
    static let device = "/dev/video0"

    static func run(rounds: Int, progress: (String) -> Void) async throws -> InterruptionReport {
        guard FileManager.default.fileExists(atPath: device) else {
            throw BenchmarkError.setup("\(device) is not here: run inside ../shared/testbed/v4l2-vm")
        }
        let controls = try VividControls(device: device)
        // Before the session opens the camera (a streaming camera is busy), in a child process of its own (a
        // process that streamed from vivid keeps a handle, and vivid comes back from a disconnect only when
        // none is left).
        let (_, plain) = try ChildProcess.runChild([PlainStartChild.childMode, "--rounds", String(rounds)], timeout: 120,
                                                   label: "plain v4l2src starts", as: PlainStartReport.self)
        let camera = try CaptureDevice.requireDevice(withUniqueID: device)
        let session = CaptureSession(name: "bench-interruptions")
        let frames = CaptureVideoDataOutput()
        let input = try CaptureDeviceInput(device: camera)
        // The default for vivid's 25 fps (ten frame intervals, at least a second), said explicitly for the report.
        input.frameStallTimeout = .seconds(1)
        session.beginConfiguration()
        try session.add(input)
        try session.add(frames)
        session.sessionPreset = .vga640x480
        try session.commitAndWait()
        let events = SessionEventLog(session)
        try await session.start()
        progress("interruptions: \(device) at \(plain.caps)")

        var report = InterruptionReport(caps: plain.caps, plainStartSeconds: plain.seconds,
                                        firstRetryDelaySeconds: CaptureSession.recoveryRetryDelays.first?.inSeconds ?? 0,
                                        stallIntervalSeconds: input.frameStallTimeout?.inSeconds)
        for round in 1...rounds {
            var mark = events.count
            var started = ContinuousClock.now
            try controls.set("disconnect", 1)
            let interrupted = try await events.wait(after: mark, within: .seconds(5), "wasInterrupted after disconnect") {
                if case .wasInterrupted(.videoDeviceUnplugged) = $0 { true } else { false }
            }
            mark = events.count
            let ended = try await events.wait(after: mark, within: .seconds(20), "interruptionEnded after disconnect") {
                if case .interruptionEnded = $0 { true } else { false }
            }
            report.disconnectToInterruptedSeconds.append((interrupted - started).inSeconds)
            report.disconnectRecoverySeconds.append((ended - interrupted).inSeconds)

            try await Task.sleep(for: .seconds(1))
            mark = events.count
            started = ContinuousClock.now
            try controls.set("percentage_of_dropped_buffers", 100)
            let stalled = try await events.wait(after: mark, within: .seconds(15), "wasInterrupted after the camera went silent") {
                if case .wasInterrupted(.videoDeviceStalled) = $0 { true } else { false }
            }
            mark = events.count
            let resumed = ContinuousClock.now
            try controls.set("percentage_of_dropped_buffers", 0)
            let stallEnded = try await events.wait(after: mark, within: .seconds(20), "interruptionEnded after the stall") {
                if case .interruptionEnded = $0 { true } else { false }
            }
            report.stallToInterruptedSeconds.append((stalled - started).inSeconds)
            report.stallRecoverySeconds.append((stallEnded - resumed).inSeconds)
            progress(String(format: "interruptions: round %d/%d  disconnect → interrupted %.0f ms, → ended %.0f ms; "
                            + "stall → interrupted %.0f ms, resumed → ended %.0f ms; plain start %.0f ms", round, rounds,
                            report.disconnectToInterruptedSeconds.last! * 1000, report.disconnectRecoverySeconds.last! * 1000,
                            report.stallToInterruptedSeconds.last! * 1000, report.stallRecoverySeconds.last! * 1000,
                            report.plainStartSeconds.last! * 1000))
            try await Task.sleep(for: .seconds(1))
        }
        await session.stop()
        return report
    }

    /// PLAYING → first frame of a plain pipeline on the camera, as a hand-written program would open it.
    static func plainStart(caps: String, device: String = InterruptionBenchmark.device) throws -> Double {
        try Contestants.plainStart("v4l2src device=\(device) ! \(caps)")
    }
}

/// What the plain side measured: its starts, and the caps it asked for (the engine's choice for vga640x480).
struct PlainStartReport: Codable {
    var caps: String
    var seconds: [Double]
}

/// `gcapture-bench child interruption-plain-starts --rounds N`: the camera's format as the engine would pick it
/// for .vga640x480, then N plain starts on it.
enum PlainStartChild {
    static let childMode = "interruption-plain-starts"

    static func childMain(_ arguments: [String]) async -> Int32 {
        let rounds = arguments.value(after: "--rounds").flatMap(Int.init) ?? 3
        return await ChildProcess.serve(childMode) { () throws -> PlainStartReport in
            let camera = try CaptureDevice.requireDevice(withUniqueID: InterruptionBenchmark.device)
            // NV12, as the engine picks for .vga640x480 on vivid.
            let sized = camera.formats.filter { $0.width == 640 && $0.height == 480 }
            guard let format = sized.first(where: { $0.pixelFormat == "NV12" }) ?? sized.first else {
                throw BenchmarkError.setup("\(camera) offers no 640x480")
            }
            let caps = "video/x-raw,format=\(format.pixelFormat),width=640,height=480,framerate=\(Int(format.maxFrameRate))/1"
            return PlainStartReport(caps: caps, seconds: try (0..<rounds).map { _ in try InterruptionBenchmark.plainStart(caps: caps) })
        }
    }
}

/// The session's events as they arrive, each with the time it arrived.
final class SessionEventLog: Sendable {
    private let entries = Locked<[(CaptureSession.Event, ContinuousClock.Instant)]>([])
    private let task: Task<Void, Never>

    init(_ session: CaptureSession) {
        let stream = session.events()
        let entries = self.entries
        task = Task { for await event in stream { entries.withLock { $0.append((event, .now)) } } }
    }

    deinit { task.cancel() }

    var count: Int { entries.withLock { $0.count } }

    /// When the first event after the first `index` that matches arrived.
    func wait(after index: Int, within limit: Duration, _ what: String,
              _ matches: (CaptureSession.Event) -> Bool) async throws -> ContinuousClock.Instant {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let found = entries.withLock { $0.dropFirst(index).first { matches($0.0) }?.1 }
            if let found { return found }
            try await Task.sleep(for: .milliseconds(2))
        }
        let seen = entries.withLock { $0.dropFirst(index).map { "\($0.0)" } }
        throw BenchmarkError.setup("no \(what) within \(limit) (events: \(seen))")
    }
}

/// vivid's controls, set with VIDIOC_S_CTRL on a handle opened for just that call: a handle left open would
/// keep vivid from reconnecting after `disconnect` (it waits for every handle to close).
struct VividControls {
    let device: String
    private let ids: [String: UInt32]

    init(device: String, requiring required: [String] = ["disconnect", "percentage_of_dropped_buffers"]) throws {
        self.device = device
        let listing = Process()
        listing.executableURL = URL(fileURLWithPath: "/usr/bin/v4l2-ctl")
        listing.arguments = ["-d", device, "--list-ctrls"]
        let output = Pipe()
        listing.standardOutput = output
        try listing.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        listing.waitUntilExit()
        // "                     disconnect 0x00f0f041 (button) : flags=write-only, execute-on-write"
        var ids: [String: UInt32] = [:]
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard words.count >= 2, words[1].hasPrefix("0x"), let id = UInt32(words[1].dropFirst(2), radix: 16) else { continue }
            ids[String(words[0])] = id
        }
        self.ids = ids
        for name in required where ids[name] == nil {
            throw BenchmarkError.setup("\(device) has no control \(name): is it vivid (with its error-injection controls)?")
        }
    }

    func set(_ name: String, _ value: Int32) throws {
        guard let id = ids[name] else { throw BenchmarkError.setup("no control \(name)") }
        let fd = open(device, O_RDWR)
        guard fd >= 0 else { throw BenchmarkError.setup("cannot open \(device): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        // struct v4l2_control { __u32 id; __s32 value; }; VIDIOC_S_CTRL = _IOWR('V', 28, struct v4l2_control)
        var control: (UInt32, Int32) = (id, value)
        let result = withUnsafeMutablePointer(to: &control) { ioctl(fd, UInt(0xC008_561C), UnsafeMutableRawPointer($0)) }
        guard result == 0 else { throw BenchmarkError.setup("setting \(name) on \(device) failed: \(String(cString: strerror(errno)))") }
    }
}

struct InterruptionReport: Codable {
    var caps: String
    var plainStartSeconds: [Double]
    /// How long the session waits before its first attempt to reopen an interrupted camera.
    var firstRetryDelaySeconds: Double
    /// The frame-stall watchdog's interval for this camera.
    var stallIntervalSeconds: Double?
    var disconnectToInterruptedSeconds: [Double] = []
    var disconnectRecoverySeconds: [Double] = []
    var stallToInterruptedSeconds: [Double] = []
    var stallRecoverySeconds: [Double] = []

    func table() -> [String] {
        let firstRetryDelay = firstRetryDelaySeconds, stallInterval = stallIntervalSeconds
        func ms(_ values: [Double]) -> String {
            String(format: "median %4.0f ms, worst %4.0f ms", Statistics.median(values) * 1000, (values.max() ?? 0) * 1000)
        }
        let plain = Statistics.median(plainStartSeconds)
        let recoveryGoal = 1.2 * plain + firstRetryDelay
        let worstRecovery = disconnectRecoverySeconds.max() ?? .infinity
        var lines = [
            "Interruptions on \(InterruptionBenchmark.device) (\(caps)), \(plainStartSeconds.count) rounds, timed from outside the session",
            "  disconnect → wasInterrupted       \(ms(disconnectToInterruptedSeconds))   goal ≤ 100 ms  "
                + ((disconnectToInterruptedSeconds.max() ?? .infinity) <= 0.1 ? "met" : "MISSED"),
            "  interrupted → ended (reopened)    \(ms(disconnectRecoverySeconds))   goal ≤ 1.2 × plain start + first retry delay "
                + String(format: "(%.0f ms) ", recoveryGoal * 1000) + (worstRecovery <= recoveryGoal ? "met" : "MISSED"),
            "  plain v4l2src PLAYING → 1st frame \(ms(plainStartSeconds))",
            "  silent camera → wasInterrupted    \(ms(stallToInterruptedSeconds))",
            "  frames again → ended              \(ms(stallRecoverySeconds))",
        ]
        if let stallInterval {
            let goal = stallInterval + 0.5
            lines[4] += String(format: "   goal ≤ watchdog %.1f s + 0.5 s ", stallInterval)
                + ((stallToInterruptedSeconds.max() ?? .infinity) <= goal ? "met" : "MISSED")
        }
        return lines
    }
}
