import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// Figure 2: CPU time and peak memory of delivering 1080p30 frames to a consumer for a while. Every side runs in
/// a child process of its own, so the kernel accounts each one separately: CPU from wait4, peak RSS from the
/// child's VmHWM (see ChildProcess).
enum FrameDeliveryBenchmark {
    /// Issue 26's goals: the engine's frame delivery costs what the plain appsink's does, within 5% of CPU and
    /// 10% of peak memory.
    static let cpuGoal = 1.05
    static let rssGoal = 1.10

    /// What runs in a child process.
    enum Kind: String, Codable, CaseIterable, Sendable {
        /// A CaptureSession with a CaptureVideoDataOutput, frames read from sampleBuffers().
        case engine
        /// The plain pipeline, frames read in the appsink's sample handler.
        case plain
        /// The plain pipeline, its samples handed to a task as the engine's API hands them (yielded into an
        /// AsyncStream keeping the newest, read by a task's for-await): what any Swift program pays to get frames
        /// from GStreamer into async code, without the engine.
        case plainHandedToTask = "plain-task"
        /// gst-launch-1.0 into a fakesink: the floor, without appsink or Swift.
        case gstLaunch = "gst-launch"
        /// This program, GStreamer initialized, nothing run: the fixed cost of the process.
        case idle

        /// The hidden mode argument that makes this program run the side (`gcapture-bench child <mode>`).
        var childMode: String? {
            switch self {
            case .engine: "engine-frames"
            case .plain: "plain-frames"
            case .plainHandedToTask: "plain-task-frames"
            case .idle: "idle"
            case .gstLaunch: nil
            }
        }
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> FrameDeliveryReport {
        let expected = Int((seconds * Double(Contestants.frameRate)).rounded())
        var runs: [FrameRun] = []
        for round in 1...rounds {
            // Engine, plain and plain handed to a task each go first, second and third in turn; the references
            // come last.
            let compared: [Kind] = [.engine, .plain, .plainHandedToTask]
            let order = (0..<compared.count).map { compared[($0 + round - 1) % compared.count] } + [.gstLaunch, .idle]
            for kind in order {
                let run = try runChild(kind, seconds: seconds, expectedFrames: expected, round: round)
                runs.append(run)
                progress("frames: round \(round)/\(rounds)  " + kind.rawValue.padding(10)
                         + String(format: " %4d frames  %.3f CPU s  %.1f MiB", run.frames, run.cpuSeconds, run.peakRSSMiB))
            }
        }

        // A 10 s run delivers ~300 frames; far fewer means a side stalled and its figures are not comparable.
        let tolerance = max(3, expected / 20)
        let warnings = runs.filter { $0.kind != .idle && abs($0.frames - expected) > tolerance }.map {
            "\($0.kind.rawValue) round \($0.round) delivered \($0.frames) frames, expected about \(expected)"
        }

        func summary(_ kind: Kind) -> FrameSummary { FrameSummary(runs.filter { $0.kind == kind }) }
        let engine = summary(.engine), plain = summary(.plain), handedToTask = summary(.plainHandedToTask)
        let cpuRatio = engine.cpuSecondsPerVideoSecond! / plain.cpuSecondsPerVideoSecond!
        return FrameDeliveryReport(
            seconds: seconds, rounds: rounds, expectedFrames: expected,
            engine: engine, plain: plain, plainHandedToTask: handedToTask, gstLaunchFakesink: summary(.gstLaunch),
            idleProcess: summary(.idle), cpuRatio: cpuRatio,
            cpuRatioAgainstHandedToTask: engine.cpuSecondsPerVideoSecond! / handedToTask.cpuSecondsPerVideoSecond!,
            handOverRatio: handedToTask.cpuSecondsPerVideoSecond! / plain.cpuSecondsPerVideoSecond!,
            cpuRatioSpread: RoundRatioSpread(cpuOf: runs.filter { $0.kind == .engine }, over: runs.filter { $0.kind == .plain }),
            rssRatio: engine.peakRSSMiB / plain.peakRSSMiB, cpuGoal: cpuGoal, meetsCPUGoal: cpuRatio <= cpuGoal,
            rssGoal: rssGoal, meetsRSSGoal: engine.peakRSSMiB / plain.peakRSSMiB <= rssGoal, warnings: warnings, runs: runs)
    }

    private static func runChild(_ kind: Kind, seconds: Double, expectedFrames: Int, round: Int) throws -> FrameRun {
        let timeout = seconds + 30
        let usage: ChildUsage
        let frames: Int
        var selfReportedPeak: Int?
        if let mode = kind.childMode {
            let report: ChildReport
            (usage, report) = try ChildProcess.runChild([mode, "--seconds", String(seconds)], timeout: timeout,
                                                        label: "\(kind.rawValue) child")
            if kind != .idle, report.width != Contestants.width || report.height != Contestants.height
                || report.pixelFormat != "NV12" {
                throw BenchmarkError.child("\(kind.rawValue) child got \(report.width)x\(report.height) \(report.pixelFormat) frames")
            }
            frames = report.frames
            selfReportedPeak = report.peakRSSKiB
        } else {
            usage = try ChildProcess.gstLaunch(Contestants.referenceDescription(frames: expectedFrames), timeout: timeout)
            frames = expectedFrames  // num-buffers, all of them: it exits 0 only after end-of-stream
        }
        return FrameRun(kind: kind, round: round, frames: frames, wallSeconds: usage.wallSeconds,
                        userSeconds: usage.userSeconds, systemSeconds: usage.systemSeconds,
                        peakRSSMiB: Double(max(usage.peakRSSKiB, selfReportedPeak ?? 0)) / 1024,
                        sampledPeakRSSMiB: usage.peakRSSMiB, childReportedPeakRSSMiB: selfReportedPeak.map { Double($0) / 1024 },
                        wait4MaxRSSMiB: Double(usage.waitMaxRSSKiB) / 1024)
    }
}

/// A child process's run that delivered (or recorded) frames at the test camera's rate, as the parent measured it.
protocol FrameCountingRun {
    var round: Int { get }
    var frames: Int { get }
    var wallSeconds: Double { get }
    var cpuSeconds: Double { get }
    var peakRSSMiB: Double { get }
}

extension FrameCountingRun {
    /// CPU seconds per second of video delivered (frames / 30): 0.25 means a quarter of a core.
    var cpuSecondsPerVideoSecond: Double? {
        frames > 0 ? cpuSeconds / (Double(frames) / Double(Contestants.frameRate)) : nil
    }
}

/// One child's run, as the parent measured it.
struct FrameRun: Codable, Sendable, FrameCountingRun {
    var kind: FrameDeliveryBenchmark.Kind
    var round: Int
    var frames: Int
    var wallSeconds: Double
    var userSeconds: Double
    var systemSeconds: Double
    /// Peak RSS: the larger of the parent's samples and the child's own report (VmHWM both).
    var peakRSSMiB: Double
    /// VmHWM as the parent last sampled it (every 20 ms; a child that exits within that misses its end).
    var sampledPeakRSSMiB: Double
    /// The child's own VmHWM just before it printed its report (our children only): a check on the sampling.
    var childReportedPeakRSSMiB: Double?
    /// wait4's ru_maxrss, which includes the parent's RSS at spawn time (see ChildUsage.waitMaxRSSKiB).
    var wait4MaxRSSMiB: Double

    var cpuSeconds: Double { userSeconds + systemSeconds }
}

// MARK: - Child side

/// What a child prints on stdout: one line of JSON.
struct ChildReport: Codable {
    var mode: String
    var frames: Int
    var seconds: Double
    var width: Int
    var height: Int
    var pixelFormat: String
    /// Sum of the first byte of every frame, so touching the frames cannot be optimized away.
    var checksum: Int
    /// The child's VmHWM when done (KiB).
    var peakRSSKiB: Int?
}

/// `gcapture-bench child <mode> --seconds S`: runs one side and prints its ChildReport.
enum FrameChild {
    static func main(_ arguments: [String]) async -> Int32 {
        guard let mode = arguments.first else {
            printError("child: missing mode (engine-frames, plain-frames, idle)")
            return 2
        }
        let seconds = arguments.value(after: "--seconds").flatMap(Double.init).flatMap { $0 > 0 ? $0 : nil } ?? 10
        return await ChildProcess.serve(mode) { () async throws -> ChildReport in
            var report: ChildReport
            switch mode {
            case "engine-frames": report = try await engine(seconds: seconds)
            case "plain-frames": report = try plain(seconds: seconds)
            case "plain-task-frames": report = try await plainHandedToTask(seconds: seconds)
            case "idle": report = idle()
            default: throw BenchmarkError.usage("unknown mode '\(mode)'")
            }
            report.peakRSSKiB = ChildProcess.highWaterMarkKiB("/proc/self/status")
            return report
        }
    }

    /// A session with the test camera at 1080p30 and a CaptureVideoDataOutput whose frames are read.
    static func engine(seconds: Double) async throws -> ChildReport {
        let (session, output) = try Contestants.makeSession(name: "bench-frames")
        let frames = output.sampleBuffers()
        let consumer = Task { () -> ChildReport in
            var report = ChildReport(mode: "engine-frames", frames: 0, seconds: seconds, width: 0, height: 0,
                                     pixelFormat: "", checksum: 0)
            for await frame in frames {
                if report.frames == 0 {
                    (report.width, report.height, report.pixelFormat) = (frame.width, frame.height, frame.pixelFormat)
                }
                report.frames += 1
                let firstByte: UInt8? = frame.withPlanes { planes in planes.first?.bytes.first }.flatMap { $0 }
                report.checksum &+= Int(firstByte ?? 0)
            }
            return report
        }
        try await session.start()
        try await Task.sleep(for: .seconds(seconds))
        await session.stop()
        consumer.cancel()
        return await consumer.value
    }

    /// The plain pipeline, frames read in the appsink's sample handler. Blocks the calling thread.
    static func plain(seconds: Double) throws -> ChildReport {
        let (pipeline, sink) = try Contestants.makePlainPipeline()
        let tally = Tally()
        sink.setSampleHandler { sample in tally.add(sample) }
        try pipeline.setState(.playing)
        Thread.sleep(forTimeInterval: seconds)
        pipeline.shutDown()
        return tally.report(mode: "plain-frames", seconds: seconds)
    }

    /// The plain pipeline, each sample yielded into an AsyncStream that keeps the newest (sampleBuffers()'s policy
    /// with alwaysDiscardsLateVideoFrames, the default) and read by a task's for-await, as the engine's consumer
    /// reads: the hand-over's cost without the engine.
    static func plainHandedToTask(seconds: Double) async throws -> ChildReport {
        let (pipeline, sink) = try Contestants.makePlainPipeline()
        let (samples, delivery) = AsyncStream<Sample>.makeStream(bufferingPolicy: .bufferingNewest(1))
        sink.setSampleHandler { sample in delivery.yield(sample) }
        let tally = Tally()
        let consumer = Task { for await sample in samples { tally.add(sample) } }
        try pipeline.setState(.playing)
        try await Task.sleep(for: .seconds(seconds))
        pipeline.shutDown()
        delivery.finish()
        await consumer.value
        return tally.report(mode: "plain-task-frames", seconds: seconds)
    }

    /// GStreamer initialized, nothing else: the process's fixed cost.
    static func idle() -> ChildReport {
        GStreamer.initialize()
        return ChildReport(mode: "idle", frames: 0, seconds: 0, width: 0, height: 0, pixelFormat: "", checksum: 0)
    }
}

/// Frames counted on the plain pipeline's streaming thread.
private final class Tally: Sendable {
    private let count = Atomic<Int>(0)
    private let sum = Atomic<Int>(0)
    private let info = Mutex<VideoInfo?>(nil)

    func add(_ sample: Sample) {
        let firstByte: UInt8? = sample.withVideoPlanes { planes in planes.first?.bytes.first }.flatMap { $0 }
        sum.add(Int(firstByte ?? 0), ordering: .relaxed)
        if count.add(1, ordering: .relaxed).newValue == 1 {
            let videoInfo = sample.videoInfo
            info.withLock { $0 = videoInfo }
        }
    }

    var frames: Int { count.load(ordering: .relaxed) }
    var checksum: Int { sum.load(ordering: .relaxed) }
    var firstInfo: VideoInfo? { info.withLock { $0 } }

    /// What a child that counted its frames here reports.
    func report(mode: String, seconds: Double) -> ChildReport {
        let info = firstInfo
        return ChildReport(mode: mode, frames: frames, seconds: seconds, width: info?.width ?? 0,
                           height: info?.height ?? 0, pixelFormat: info?.format ?? "", checksum: checksum)
    }
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}
