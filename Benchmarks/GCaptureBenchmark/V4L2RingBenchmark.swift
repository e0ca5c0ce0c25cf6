import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// The zero-shutter-lag ring on a real V4L2 camera (run where /dev/video0 is one: inside
/// ../shared/testbed/v4l2-vm, the kernel's vivid driver). A V4L2 camera lends its frames from a bounded pool;
/// the ring holds them by reference only when its depth fits in half of what the pool has beyond its minimum,
/// else it copies every frame as it arrives (FrameRing). The test camera's pool grows on demand, so only a real
/// driver takes these paths. Five sides, each a child process, the same camera format, frames counted by one
/// appsink on every side:
///   engine-frames     a session with a CaptureVideoDataOutput
///   engine-ring       the same plus a CapturePhotoOutput at its default ring depth (no photo taken)
///   engine-ring-copy  the same with a ring one frame deeper than the pool can lend: every frame copied
///   plain             v4l2src ! caps ! tee ! queue ! appsink
///   plain-ring-copy   the same plus a second branch whose appsink keeps the last frames as deep copies, as
///                     deep as engine-ring-copy: what one would write by hand for a ring on a bounded pool
/// The copy path's cost is engine-ring-copy − engine-frames against plain-ring-copy − plain, in CPU s/s.
/// engine-frames also counts the frames that reach its output still in the camera's memory: all of them when
/// the frames path takes the driver's buffers as they are, none when it copies (DeviceFrameCopy).
enum V4L2RingBenchmark {
    static let device = "/dev/video0"
    /// CapturePhotoOutput's default.
    static let defaultRingDepth = CapturePhotoOutput().zeroShutterLagRingDepth

    enum Kind: String, Codable, CaseIterable, Sendable {
        case engineFrames = "v4l2-engine-frames"
        case engineRing = "v4l2-engine-ring"
        case engineRingCopy = "v4l2-engine-ring-copy"
        case plain = "v4l2-plain"
        case plainRingCopy = "v4l2-plain-ring-copy"
    }

    /// The shallowest ring the pool cannot lend to (FrameRing.canBorrow), so every frame is copied.
    static func copyingDepth(minimum: Int, maximum: Int) -> Int { (maximum - minimum) / 2 + 1 }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> V4L2RingReport {
        guard FileManager.default.fileExists(atPath: device) else {
            throw BenchmarkError.setup("\(device) is not here: run inside ../shared/testbed/v4l2-vm")
        }
        // The engine picks the camera's format for .vga640x480; the plain sides then ask for exactly that.
        let (_, probe) = try ChildProcess.runChild([Kind.engineFrames.rawValue, "--seconds", "2"], timeout: 60,
                                                   label: "format probe", as: V4L2ChildReport.self)
        let caps = probe.caps
        let (_, plainProbe) = try ChildProcess.runChild([Kind.plain.rawValue, "--seconds", "2", "--caps", caps], timeout: 60,
                                                        label: "pool probe", as: V4L2ChildReport.self)
        guard let minimum = plainProbe.poolMinimum, let maximum = plainProbe.poolMaximum else {
            throw BenchmarkError.setup("\(device)'s frames come from no bounded pool (\(plainProbe.poolDescription)): no copy path to measure")
        }
        let copyDepth = copyingDepth(minimum: minimum, maximum: maximum)
        progress("v4l2: the engine chose \(caps); the camera's pool: \(plainProbe.poolDescription); a ring of \(copyDepth) copies")
        var runs: [V4L2Run] = []
        for round in 1...rounds {
            for kind in Kind.allCases {
                var arguments = [kind.rawValue, "--seconds", String(seconds), "--caps", caps]
                if kind == .engineRingCopy || kind == .plainRingCopy { arguments += ["--ring-depth", String(copyDepth)] }
                let (usage, report) = try ChildProcess.runChild(arguments, timeout: seconds + 120, label: kind.rawValue,
                                                                as: V4L2ChildReport.self)
                let run = V4L2Run(kind: kind, round: round, frames: report.frames, seconds: report.seconds,
                                  cpuSeconds: usage.cpuSeconds, peakRSSMiB: usage.peakRSSMiB,
                                  framesInCameraMemory: report.framesInCameraMemory)
                runs.append(run)
                progress(String(format: "v4l2: round %d/%d  %@ %4d frames  %.3f CPU s  %.1f MiB", round, rounds,
                                kind.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0), run.frames,
                                run.cpuSeconds, run.peakRSSMiB))
            }
        }
        return V4L2RingReport(caps: caps, pool: plainProbe.poolDescription, ringDepth: defaultRingDepth,
                              copyingRingDepth: copyDepth, seconds: seconds, rounds: rounds, runs: runs)
    }
}

struct V4L2Run: Codable {
    var kind: V4L2RingBenchmark.Kind
    var round: Int
    var frames: Int
    var seconds: Double
    var cpuSeconds: Double
    var peakRSSMiB: Double
    /// Engine sides: frames the frame output got still in the camera's memory (not copied on the way).
    var framesInCameraMemory: Int?

    var cpuPerSecond: Double { cpuSeconds / seconds }
}

struct V4L2RingReport: Codable {
    var caps: String
    var pool: String
    var ringDepth: Int
    var copyingRingDepth: Int
    var seconds: Double
    var rounds: Int
    var runs: [V4L2Run]

    func median(_ kind: V4L2RingBenchmark.Kind, _ value: (V4L2Run) -> Double) -> Double {
        Statistics.median(runs.filter { $0.kind == kind }.map(value))
    }

    /// CPU seconds per second a ring adds to its session or pipeline.
    func cost(_ kind: V4L2RingBenchmark.Kind) -> Double {
        let base: V4L2RingBenchmark.Kind = kind == .plainRingCopy ? .plain : .engineFrames
        return median(kind, \.cpuPerSecond) - median(base, \.cpuPerSecond)
    }

    func table() -> [String] {
        var lines = [
            "V4L2 camera (\(V4L2RingBenchmark.device)): the zero-shutter-lag ring on a bounded pool, \(caps)",
            "  camera pool \(pool); rings of \(ringDepth) (the default: borrowed) and \(copyingRingDepth) (copied); "
                + "\(rounds) rounds of \(String(format: "%g", seconds)) s, medians",
            "  side                    frames   CPU s/s   peak MiB   ring's CPU s/s",
        ]
        for kind in V4L2RingBenchmark.Kind.allCases {
            let ringCost = [.engineRing, .engineRingCopy, .plainRingCopy].contains(kind) ? String(format: "%8.3f", cost(kind)) : ""
            lines.append("  " + kind.rawValue.dropFirst("v4l2-".count).padding(toLength: 20, withPad: " ", startingAt: 0)
                         + String(format: " %8.0f %9.3f %10.1f   ", median(kind) { Double($0.frames) },
                                  median(kind, \.cpuPerSecond), median(kind, \.peakRSSMiB)) + ringCost)
        }
        // Whether the engine's frames path copies each frame out of the driver's memory (DeviceFrameCopy).
        let frameRuns = runs.filter { $0.kind == .engineFrames }
        let lent = frameRuns.compactMap(\.framesInCameraMemory).reduce(0, +), total = frameRuns.map(\.frames).reduce(0, +)
        lines.append("  engine frames path: \(lent) of \(total) frames in the camera's memory: "
                     + (total > 0 && lent == total ? "zero-copy" : lent == 0 ? "every frame copied" : "some copied")
                     + String(format: "; engine-frames / plain CPU: %.2f×",
                              median(.engineFrames, \.cpuPerSecond) / median(.plain, \.cpuPerSecond)))
        let plainCost = cost(.plainRingCopy)
        lines.append("  copy path, engine / hand-written: " + (plainCost > 0 ? String(format: "%.2f×", cost(.engineRingCopy) / plainCost) : "n/a")
                     + String(format: "; whole engine-ring-copy / plain-ring-copy CPU: %.2f×",
                              median(.engineRingCopy, \.cpuPerSecond) / median(.plainRingCopy, \.cpuPerSecond)))
        return lines
    }
}

/// What a V4L2 child prints.
struct V4L2ChildReport: Codable {
    var frames: Int
    var seconds: Double
    /// The caps the frames came in (the engine's choice, or what the plain side was told).
    var caps: String
    /// The bounds of the pool that lent the first frame (plain sides).
    var poolDescription: String
    var poolMinimum: Int?
    var poolMaximum: Int?
    /// Engine sides: frames that reached the frame output still in the camera's memory.
    var framesInCameraMemory: Int?
}

/// `gcapture-bench child v4l2-… --seconds S [--caps C]`.
enum V4L2RingChild {
    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let mode = arguments.first.flatMap(V4L2RingBenchmark.Kind.init(rawValue:)),
              let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 0 else {
            printError("child v4l2: needs a v4l2-… mode and --seconds")
            return 2
        }
        let caps = arguments.value(after: "--caps")
        let depth = arguments.value(after: "--ring-depth").flatMap(Int.init) ?? V4L2RingBenchmark.defaultRingDepth
        return await ChildProcess.serve(mode.rawValue) { () async throws -> V4L2ChildReport in
            switch mode {
            case .engineFrames, .engineRing, .engineRingCopy:
                return try await engine(ringDepth: mode == .engineFrames ? nil : depth, seconds: seconds)
            case .plain, .plainRingCopy:
                guard let caps else { throw BenchmarkError.usage("\(mode.rawValue) needs --caps") }
                return try plain(ringDepth: mode == .plainRingCopy ? depth : nil, caps: caps, seconds: seconds)
            }
        }
    }

    private static func engine(ringDepth: Int?, seconds: Double) async throws -> V4L2ChildReport {
        let camera = try CaptureDevice.requireDevice(withUniqueID: V4L2RingBenchmark.device)
        let session = CaptureSession(name: "bench-v4l2")
        let frames = CaptureVideoDataOutput(), photos = CapturePhotoOutput()
        if let ringDepth { photos.zeroShutterLagRingDepth = ringDepth }
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: camera))
        try session.add(frames)
        if ringDepth != nil { try session.add(photos) }
        session.sessionPreset = .vga640x480
        try session.commitAndWait()
        let stream = frames.sampleBuffers()
        let counting = Task { () -> (Int, String, Int) in
            var count = 0, caps = "", inCameraMemory = 0
            for await frame in stream {
                if frame.isInCameraMemory { inCameraMemory += 1 }
                if count == 0 {
                    let rate = frame.videoInfo.frameRate
                    caps = "video/x-raw,format=\(frame.pixelFormat),width=\(frame.width),height=\(frame.height)"
                        + ",framerate=\(rate.numerator)/\(rate.denominator)"
                }
                count += 1
            }
            return (count, caps, inCameraMemory)
        }
        try await session.start()
        try await Task.sleep(for: .seconds(seconds))
        await session.stop()
        let (count, caps, inCameraMemory) = await counting.value
        // The engine does not show its frames' pool; the plain sides report it.
        return V4L2ChildReport(frames: count, seconds: seconds, caps: caps, poolDescription: "",
                               framesInCameraMemory: inCameraMemory)
    }

    private static func plain(ringDepth: Int?, caps: String, seconds: Double) throws -> V4L2ChildReport {
        let ringBranch = ringDepth != nil ? " t. ! queue leaky=downstream max-size-buffers=2 ! appsink name=ring sync=false max-buffers=1" : ""
        let pipeline = try Pipeline.launch("v4l2src device=\(V4L2RingBenchmark.device) ! \(caps) ! tee name=t "
                                           + "! queue leaky=downstream max-size-buffers=2 ! appsink name=sink sync=false max-buffers=1"
                                           + ringBranch)
        pipeline.useClock(.system)
        guard let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
            throw BenchmarkError.setup("the plain V4L2 pipeline has no appsink")
        }
        let counted = Mutex((frames: 0, pool: BufferPoolBounds?.none))
        sink.setSampleHandler { sample in
            counted.withLock { state in
                if state.frames == 0 { state.pool = sample.bufferPool }
                state.frames += 1
            }
        }
        // A hand-written ring on a bounded pool: every frame deep-copied, the last few kept.
        let ring = Mutex<[Sample]>([])
        if let ringDepth, let ringSink = pipeline.element(named: "ring").flatMap(AppSink.init) {
            ringSink.setSampleHandler { sample in
                guard let copy = sample.copy() else { return }
                let evicted = ring.withLock { frames -> Sample? in
                    frames.append(copy)
                    return frames.count > ringDepth ? frames.removeFirst() : nil
                }
                withExtendedLifetime(evicted) {}
            }
        }
        try pipeline.setState(.playing)
        Thread.sleep(forTimeInterval: seconds)
        pipeline.shutDown()
        let state = counted.withLock { $0 }
        let pool = state.pool.map { "min \($0.minimum), max \($0.maximum.map(String.init) ?? "unbounded")" } ?? "none"
        return V4L2ChildReport(frames: state.frames, seconds: seconds, caps: caps, poolDescription: pool,
                               poolMinimum: state.pool?.minimum, poolMaximum: state.pool?.maximum)
    }
}
