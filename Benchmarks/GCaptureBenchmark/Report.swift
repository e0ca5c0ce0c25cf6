import Foundation

/// Every figure of one run: printed as a table, or with --json as one JSON object.
struct BenchmarkReport: Codable {
    var benchmark = "gcapture-bench"
    var gstreamerVersion: String
    var processors: Int
    var plainPipeline: String
    var latency: LatencyReport?
    var frameDelivery: FrameDeliveryReport?
    var photo: PhotoReport?
    var recording: RecordingReport?
    var soak: SoakReport?
    var v4l2Ring: V4L2RingReport?
    var interruptions: InterruptionReport?
    var switching: SwitchReport?
}

/// Figure 1, in milliseconds.
struct LatencyReport: Codable {
    var rounds: Int
    /// Whether glibc was told to keep freed memory (see Allocator), so rounds do not differ by page faults.
    var allocatorPinned: Bool
    var unit = "ms"
    /// start() called → first SampleBuffer at the consumer of output.sampleBuffers().
    var engineStartToFirstFrame: Summary
    /// start() called → start() returned.
    var engineStartCallReturned: Summary
    /// setState(.playing) called → first sample in the appsink handler.
    var plainPlayingToFirstSample: Summary
    /// Pipeline.launch called → first sample in the appsink handler.
    var plainBuildAndPlayingToFirstSample: Summary
    /// The plain pipeline started and its first sample handed over as the engine's API does (an async call that
    /// returns at the first sample, an AsyncStream awaited by a task): call → first sample at the task.
    var plainHandedToTask: Summary
    /// Median engine / median plain (from PLAYING): the figure the goal is about.
    var ratio: Double
    /// Median engine / median plain handed to a task: what the engine adds beyond its API's own hand-over.
    var ratioAgainstHandedToTask: Double
    /// Median engine / median plain including the pipeline's construction (what start() also does).
    var ratioIncludingBuild: Double
    /// Median engine − median plain including construction: what the engine adds, in ms.
    var engineExtraOverBuildAndPlaying: Double
    var goal: Double
    var meetsGoal: Bool
}

/// Figure 2: medians over the rounds, per side.
struct FrameDeliveryReport: Codable {
    var seconds: Double
    var rounds: Int
    var expectedFrames: Int
    var engine: FrameSummary
    var plain: FrameSummary
    /// The plain pipeline with its frames handed to a task as the engine's API hands them.
    var plainHandedToTask: FrameSummary
    var gstLaunchFakesink: FrameSummary
    var idleProcess: FrameSummary
    /// Median CPU seconds per video second, engine / plain.
    var cpuRatio: Double
    /// Engine / plain handed to a task: the engine's own cost, the API's hand-over taken out.
    var cpuRatioAgainstHandedToTask: Double
    /// Plain handed to a task / plain: what the hand-over into async code costs any Swift program.
    var handOverRatio: Double
    /// The same ratio round by round.
    var cpuRatioSpread: RoundRatioSpread?
    /// Median peak RSS, engine / plain.
    var rssRatio: Double
    var cpuGoal: Double
    var meetsCPUGoal: Bool
    var rssGoal: Double
    var meetsRSSGoal: Bool
    var warnings: [String]
    var runs: [FrameRun]
}

struct FrameSummary: Codable {
    var frames: Double
    var wallSeconds: Double
    var cpuSeconds: Double
    /// nil for a side that delivers no frames (the idle process).
    var cpuSecondsPerVideoSecond: Double?
    var cpuPercent: Double
    var peakRSSMiB: Double

    init(_ runs: [some FrameCountingRun]) {
        frames = Statistics.median(runs.map { Double($0.frames) })
        wallSeconds = Statistics.median(runs.map(\.wallSeconds))
        cpuSeconds = Statistics.median(runs.map(\.cpuSeconds))
        let perVideoSecond = runs.compactMap(\.cpuSecondsPerVideoSecond)
        cpuSecondsPerVideoSecond = perVideoSecond.isEmpty ? nil : Statistics.median(perVideoSecond)
        cpuPercent = Statistics.median(runs.map { 100 * $0.cpuSeconds / $0.wallSeconds })
        peakRSSMiB = Statistics.median(runs.map(\.peakRSSMiB))
    }
}

// MARK: - Output

extension BenchmarkReport {
    func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    func table() -> String {
        var lines = [
            "gcapture-bench: the capture engine against the equivalent plain GStreamer pipeline",
            "GStreamer \(gstreamerVersion), \(processors) CPUs, test camera 1920x1080 NV12 30 fps",
            "plain pipeline: \(plainPipeline)",
        ]
        if let latency { lines += [""] + latency.table() }
        if let frameDelivery { lines += [""] + frameDelivery.table() }
        if let photo { lines += [""] + photo.table() }
        if let recording { lines += [""] + recording.table() }
        if let soak { lines += [""] + soak.table() }
        if let v4l2Ring { lines += [""] + v4l2Ring.table() }
        if let interruptions { lines += [""] + interruptions.table() }
        if let switching { lines += [""] + switching.table() }
        return lines.joined(separator: "\n")
    }
}

extension LatencyReport {
    func table() -> [String] {
        func row(_ label: String, _ summary: Summary) -> String {
            label.padding(44) + [summary.median, summary.p90, summary.min, summary.max]
                .map { String(format: "%9.2f", $0) }.joined()
        }
        return [
            "1. Start → first 1080p frame, ms (\(rounds) rounds, each side first in turn, after a warm-up of each; "
                + "glibc keeps freed frame memory: \(allocatorPinned ? "yes" : "NO"))",
            "".padding(44) + ["median", "p90", "min", "max"].map { $0.leftPadding(9) }.joined(),
            row("  engine  start() → first frame at consumer", engineStartToFirstFrame),
            row("  engine  start() → start() returned", engineStartCallReturned),
            row("  plain   PLAYING → first sample", plainPlayingToFirstSample),
            row("  plain   launch + PLAYING → first sample", plainBuildAndPlayingToFirstSample),
            row("  plain   handed to a task as the API does", plainHandedToTask),
            "  engine / plain (PLAYING)".padding(44) + String(format: "%8.2f×", ratio)
                + String(format: "   goal ≤ %.2f×  ", goal) + (meetsGoal ? "met" : "MISSED"),
            "  engine / plain (launch + PLAYING)".padding(44) + String(format: "%8.2f×", ratioIncludingBuild)
                + String(format: "   engine adds %+.2f ms", engineExtraOverBuildAndPlaying),
            "  engine / plain handed to a task".padding(44) + String(format: "%8.2f×", ratioAgainstHandedToTask)
                + "   the API's hand-over (async start, a task's for-await) taken out",
        ]
    }
}

extension FrameDeliveryReport {
    func table() -> [String] {
        func row(_ label: String, _ summary: FrameSummary) -> String {
            label.padding(40)
                + String(format: "%7.0f %9.3f", summary.frames, summary.cpuSeconds)
                + (summary.cpuSecondsPerVideoSecond.map { String(format: "%15.4f", $0) } ?? "—".leftPadding(15))
                + String(format: "%8.1f %12.1f", summary.cpuPercent, summary.peakRSSMiB)
        }
        var lines = [
            "2. Delivering 1080p30 frames for \(String(format: "%g", seconds)) s, one child process per run "
                + "(medians of \(rounds) rounds; expected ≈ \(expectedFrames) frames)",
            "".padding(40) + ["frames", "CPU s", "CPU s/video s", "CPU %", "peak RSS MiB"]
                .enumerated().map { $1.leftPadding([7, 10, 15, 8, 13][$0]) }.joined(),
            row("  engine  CaptureVideoDataOutput stream", engine),
            row("  plain   appsink sample handler", plain),
            row("  plain   appsink → AsyncStream → task", plainHandedToTask),
            row("  floor   gst-launch-1.0 … ! fakesink", gstLaunchFakesink),
            row("  idle    this program, gst_init only", idleProcess),
            "  engine / plain".padding(40) + String(format: "CPU %.2f×", cpuRatio)
                + String(format: "  goal ≤ %.2f×  ", cpuGoal) + (meetsCPUGoal ? "met" : "MISSED")
                + (cpuRatioSpread.map { " (\($0.text))" } ?? "")
                + String(format: "   peak RSS %.2f×  goal ≤ %.2f×  ", rssRatio, rssGoal) + (meetsRSSGoal ? "met" : "MISSED"),
            "  engine / plain handed to a task".padding(40) + String(format: "CPU %.2f×", cpuRatioAgainstHandedToTask)
                + String(format: "  the API's hand-over taken out (it costs plain %.2f×)", handOverRatio),
        ]
        lines += warnings.map { "  warning: \($0)" }
        return lines
    }
}

/// Figure 3: still photos, per size (see PhotoBenchmark). Times in ms.
struct PhotoReport: Codable {
    var prioritization: String
    /// Sequential shots per size (parts 1 and 2), each after a random pause in `gapMilliseconds`.
    var shots: Int
    var gapMilliseconds: [Int]
    var frameIntervalMilliseconds: Double
    var burstSeconds: Double
    var burstRounds: Int
    var latencyGoal: Double
    var sizes: [PhotoSizeReport]
    var warnings: [String]
}

struct PhotoSizeReport: Codable {
    var label: String
    var width: Int
    var height: Int
    var jpegQuality: Int
    var shutterLag: ShutterLagFigures
    var requestToFile: RequestToFileFigures
    var viewfinder: ViewfinderFigures
    var burst: BurstFigures
}

/// Part 1: the photo's frame timestamp − the request instant, in session (pipeline) running time.
struct ShutterLagFigures: Codable {
    var engine: Summary
    /// Engine shots whose frame lies more than one frame interval from the request.
    var engineBeyondOneFrame: Int
    var camerabin: Summary?
    /// Why camerabin has no figures, when it has none.
    var camerabinNote: String?
    /// Median ≤ 0 and no shot beyond one frame interval.
    var meetsGoal: Bool
}

/// Part 2: request → JPEG in a file, against the same work in plain GStreamer, both timed by the caller.
struct RequestToFileFigures: Codable {
    /// capturePhoto called → returned, fileURL set, timed by the caller.
    var engine: Summary
    /// The same without a fileURL (JPEG in memory), interleaved: the file's share by difference.
    var engineInMemory: Summary
    /// CapturePhoto.latencyMilliseconds of the photos to a file: the engine's own account, from inside the call.
    var engineReported: Summary
    /// start-capture → image-done.
    var camerabin: Summary?
    var camerabinFrameToFile: Summary?
    /// appsrc ! jpegenc ! appsink in this process, frame pushed by reference → JPEG pulled and written to a
    /// file, interleaved with the engine's shots.
    var floor: Summary
    /// The same without the file: push → pull.
    var floorInMemory: Summary
    var engineMeanJPEGBytes: Double
    var floorMeanJPEGBytes: Double
    /// Median engine / median floor.
    var ratio: Double
    var meetsGoal: Bool
}

/// Viewfinder frames that went missing while the sequential shots were taken.
struct ViewfinderFigures: Codable {
    var engineFrames: Int
    var engineMissing: Int
    var engineMissingPerShot: Double
    var camerabinFrames: Int?
    var camerabinMissing: Int?
    var camerabinMissingPerShot: Double?
}

/// Part 3: the burst, worst round for counts, medians over rounds for CPU.
struct BurstFigures: Codable {
    var seconds: Double
    var rounds: Int
    /// Of the floor, and of every photo (else a warning).
    var jpegQuality: Int
    var requested: Int
    var delivered: Int
    var failed: Int
    var firstError: String?
    var expectedFrames: Int
    var framesLost: Int
    var burstCPUSeconds: Double
    var baselineCPUSeconds: Double
    var onDemandFloorCPUSeconds: Double
    /// (burst CPU − baseline CPU) / photos delivered.
    var cpuMillisecondsPerPhoto: Double
    /// gst-launch-1.0: (CPU with jpegenc − CPU without) / frames, median of the pairs.
    var floorCPUMillisecondsPerFrame: Double
    var floorPipeline: String
    var ratio: Double
    var meetsCPUGoal: Bool
    /// The same session with a plain appsrc ! jpegenc ! appsink encoding one frame per request instead of
    /// the engine: (its CPU − baseline CPU) / encodes. What encoding on demand costs without the engine.
    var onDemandFloorCPUMillisecondsPerFrame: Double
    var ratioToOnDemandFloor: Double
    /// Minor page faults per request beyond the baseline's (4 KiB pages first touched: fresh allocations).
    var pageFaultsPerPhoto: Double
    var onDemandFloorPageFaultsPerFrame: Double
    /// Every photo delivered and no frame lost.
    var meetsDeliveryGoal: Bool
    /// The burst's photos, pooled over rounds.
    var shutterLag: Summary?
    var latency: Summary?
    /// Push → file written, of the on-demand floor's encodes.
    var onDemandFloorLatency: Summary?
    var burstPeakRSSMiB: Double
    var baselinePeakRSSMiB: Double
    var runs: [BurstRun]
    var floorRuns: [FloorRun]
}

extension PhotoReport {
    func table() -> [String] {
        let label = 52, column = 22
        func row(_ text: String, _ cells: [String]) -> String { "  " + text.padding(label) + cells.map { $0.leftPadding(column) }.joined() }
        func summaries(_ text: String, _ pick: (PhotoSizeReport) -> Summary?) -> String {
            row(text, sizes.map { size in
                pick(size).map { String(format: "%10.2f %10.2f", $0.median, $0.p90) } ?? "—".leftPadding(21)
            })
        }
        func values(_ text: String, _ pick: (PhotoSizeReport) -> String) -> String { row(text, sizes.map(pick)) }
        func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }
        let interval = String(format: "%.1f", frameIntervalMilliseconds)
        let quality = Set(sizes.map(\.jpegQuality)).sorted().map(String.init).joined(separator: "/")

        var lines = [
            "3. Still photos at .\(prioritization) (JPEG quality \(quality)), test camera NV12 30 fps. Per size, one at a time, each "
                + "after a \(gapMilliseconds[0])–\(gapMilliseconds[1]) ms pause:",
            "   \(shots) × (engine photo to a file, in memory; floor to a file, in memory), rotating, all timed by the caller; then camerabin, \(shots) shots",
            row("", sizes.map { "\($0.label) (\($0.width)x\($0.height))" }),
            row("", sizes.map { _ in "median        p90" }),
            "  shutter lag, ms (frame timestamp − request; ≤ 0: exposed before the press)",
            summaries("  engine     zero shutter lag (default)", { $0.shutterLag.engine }),
            summaries("  camerabin  start-capture (the next frame)", { $0.shutterLag.camerabin }),
            values("  engine     min / max", {
                String(format: "%9.2f / %.2f", $0.shutterLag.engine.min, $0.shutterLag.engine.max)
            }),
            values("  engine     shots beyond one frame (\(interval) ms)", { "\($0.shutterLag.engineBeyondOneFrame)/\($0.shutterLag.engine.samples.count)" }),
            values("  goal: median ≤ 0, none beyond \(interval) ms", { verdict($0.shutterLag.meetsGoal) }),
            "  request → JPEG file, ms",
            summaries("  engine     capturePhoto called → returned, fileURL in /tmp", { $0.requestToFile.engine }),
            summaries("  engine     the same, in memory (no fileURL)", { $0.requestToFile.engineInMemory }),
            summaries("  engine     its own account (latencyMilliseconds)", { $0.requestToFile.engineReported }),
            summaries("  camerabin  start-capture → image-done", { $0.requestToFile.camerabin }),
            summaries("  floor      push by reference ! jpegenc ! pull, file written", { $0.requestToFile.floor }),
            summaries("  floor      the same, in memory", { $0.requestToFile.floorInMemory }),
            values(String(format: "  engine / floor, medians (goal ≤ %.2f×)", latencyGoal), {
                String(format: "%.2f× ", $0.requestToFile.ratio) + verdict($0.requestToFile.meetsGoal)
            }),
            "  viewfinder frames lost per shot (engine: a CaptureVideoDataOutput; camerabin: its viewfinder-sink)",
            values("  engine", { String(format: "%.2f (%d of %d)", $0.viewfinder.engineMissingPerShot,
                                        $0.viewfinder.engineMissing, $0.viewfinder.engineFrames + $0.viewfinder.engineMissing) }),
            values("  camerabin", { size in
                guard let perShot = size.viewfinder.camerabinMissingPerShot, let missing = size.viewfinder.camerabinMissing,
                      let frames = size.viewfinder.camerabinFrames else { return "—" }
                return String(format: "%.2f (%d of %d)", perShot, missing, frames + missing)
            }),
            "  burst: a photo requested every \(interval) ms for \(String(format: "%g", burstSeconds)) s, files in /tmp, "
                + "a CaptureVideoDataOutput on the session (\(burstRounds) round\(burstRounds == 1 ? "" : "s"), worst shown)",
            values("  photos delivered / requested", { "\($0.burst.delivered)/\($0.burst.requested)" }),
            values("  frames lost by the frame output", { "\($0.burst.framesLost) of \($0.burst.expectedFrames)" }),
            values("  CPU s: burst / no requests / on-demand floor", {
                String(format: "%.2f / %.2f / %.2f", $0.burst.burstCPUSeconds, $0.burst.baselineCPUSeconds,
                       $0.burst.onDemandFloorCPUSeconds)
            }),
            values("  engine     CPU ms per photo", { String(format: "%.2f", $0.burst.cpuMillisecondsPerPhoto) }),
            values("  floor      jpegenc CPU ms per frame (gst-launch)", { String(format: "%.2f", $0.burst.floorCPUMillisecondsPerFrame) }),
            values("  engine / floor (goal " + PhotoBenchmark.sizes.map { String(format: "≤ %.2f×", $0.burstCPUGoal) }.joined(separator: ", ") + ")", {
                String(format: "%.2f× ", $0.burst.ratio) + verdict($0.burst.meetsCPUGoal)
            }),
            values("  floor      appsrc ! jpegenc ! appsink on demand, CPU ms", {
                String(format: "%.2f", $0.burst.onDemandFloorCPUMillisecondsPerFrame)
            }),
            values("  engine / on-demand floor", { String(format: "%.2f×", $0.burst.ratioToOnDemandFloor) }),
            values("  page faults per photo: engine / on-demand floor", {
                String(format: "%.0f / %.0f", $0.burst.pageFaultsPerPhoto, $0.burst.onDemandFloorPageFaultsPerFrame)
            }),
            values("  goal: every photo, no frame lost", { verdict($0.burst.meetsDeliveryGoal) }),
            summaries("  burst photos: shutter lag, ms (one phase per run)", { $0.burst.shutterLag }),
            summaries("  burst photos: capturePhoto called → returned, ms", { $0.burst.latency }),
            summaries("  on-demand floor: push → file written, ms", { $0.burst.onDemandFloorLatency }),
            values("  peak RSS MiB: burst / no requests", {
                String(format: "%.0f / %.0f", $0.burst.burstPeakRSSMiB, $0.burst.baselinePeakRSSMiB)
            }),
        ]
        lines += sizes.compactMap { size in size.shutterLag.camerabinNote.map { "  note: camerabin at \(size.label): \($0)" } }
        lines += warnings.map { "  warning: \($0)" }
        return lines
    }
}

extension String {
    /// Left-aligned in `width` characters (never truncated).
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    /// Right-aligned in `width` characters (never truncated).
    func leftPadding(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
