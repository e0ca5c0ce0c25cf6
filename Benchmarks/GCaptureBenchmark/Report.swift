import Foundation

/// Every figure of one run: printed as a table, or with --json as one JSON object.
struct BenchmarkReport: Codable {
    var benchmark = "gcapture-bench"
    var gstreamerVersion: String
    var processors: Int
    var plainPipeline: String
    var latency: LatencyReport?
    var frameDelivery: FrameDeliveryReport?
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
    /// Median engine / median plain (from PLAYING): the figure the goal is about.
    var ratio: Double
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
    var gstLaunchFakesink: FrameSummary
    var idleProcess: FrameSummary
    /// Median CPU seconds per video second, engine / plain.
    var cpuRatio: Double
    /// Median peak RSS, engine / plain.
    var rssRatio: Double
    var cpuGoal: Double
    var meetsCPUGoal: Bool
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

    init(_ runs: [FrameRun]) {
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
            "1. Start → first 1080p frame, ms (\(rounds) rounds alternating engine/plain after a warm-up of each; "
                + "glibc keeps freed frame memory: \(allocatorPinned ? "yes" : "NO"))",
            "".padding(44) + ["median", "p90", "min", "max"].map { $0.leftPadding(9) }.joined(),
            row("  engine  start() → first frame at consumer", engineStartToFirstFrame),
            row("  engine  start() → start() returned", engineStartCallReturned),
            row("  plain   PLAYING → first sample", plainPlayingToFirstSample),
            row("  plain   launch + PLAYING → first sample", plainBuildAndPlayingToFirstSample),
            "  engine / plain (PLAYING)".padding(44) + String(format: "%8.2f×", ratio)
                + String(format: "   goal ≤ %.2f×  ", goal) + (meetsGoal ? "met" : "MISSED"),
            "  engine / plain (launch + PLAYING)".padding(44) + String(format: "%8.2f×", ratioIncludingBuild)
                + String(format: "   engine adds %+.2f ms", engineExtraOverBuildAndPlaying),
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
            row("  floor   gst-launch-1.0 … ! fakesink", gstLaunchFakesink),
            row("  idle    this program, gst_init only", idleProcess),
            "  engine / plain".padding(40) + String(format: "CPU %.2f×", cpuRatio)
                + String(format: "  goal ≤ %.2f×  ", cpuGoal) + (meetsCPUGoal ? "met" : "MISSED")
                + String(format: "   peak RSS %.2f×", rssRatio),
        ]
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
