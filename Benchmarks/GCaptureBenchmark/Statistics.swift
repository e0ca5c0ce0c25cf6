#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Median, 90th percentile and extremes of a series of measurements.
struct Summary: Codable, Sendable {
    var median: Double
    var p90: Double
    var min: Double
    var max: Double
    /// Every measurement, in the order taken.
    var samples: [Double]

    init(_ samples: [Double]) {
        precondition(!samples.isEmpty, "a summary needs at least one sample")
        self.samples = samples
        median = Statistics.percentile(samples, 0.5)
        p90 = Statistics.percentile(samples, 0.9)
        min = samples.min()!
        max = samples.max()!
    }
}

enum Statistics {
    /// The `fraction` quantile (0...1), interpolating linearly between the two nearest ranks (numpy's default;
    /// for 0.5 this is the usual median).
    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        precondition(!values.isEmpty)
        let sorted = values.sorted()
        let rank = fraction * Double(sorted.count - 1)
        let lower = Int(rank.rounded(.down))
        let upper = Swift.min(lower + 1, sorted.count - 1)
        let weight = rank - Double(lower)
        return sorted[lower] + (sorted[upper] - sorted[lower]) * weight
    }

    static func median(_ values: [Double]) -> Double { percentile(values, 0.5) }
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC), comparable across threads: every timestamp of the benchmark.
enum Monotonic {
    static var now: UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    static func milliseconds(from start: UInt64, to end: UInt64) -> Double {
        Double(Int64(bitPattern: end &- start)) / 1e6
    }

    static func seconds(from start: UInt64, to end: UInt64) -> Double {
        Double(Int64(bitPattern: end &- start)) / 1e9
    }
}

/// One contestant's figure over another's, round by round (both run once a round): the lowest and highest of
/// those ratios. On this machine a round's ratio strays ±5-10 % from the ratio of the medians, so a goal whose
/// line falls inside the spread is met or missed by the draw of the rounds, not by the code.
struct RoundRatioSpread: Codable, Sendable {
    var lowest: Double
    var highest: Double
    var rounds: Int

    /// Of CPU seconds per video second; nil when no round has that figure from both sides.
    init?(cpuOf numerator: [some FrameCountingRun], over denominator: [some FrameCountingRun]) {
        let below = Dictionary(denominator.compactMap { run in run.cpuSecondsPerVideoSecond.map { (run.round, $0) } },
                               uniquingKeysWith: { first, _ in first })
        let ratios = numerator.compactMap { run in
            run.cpuSecondsPerVideoSecond.flatMap { value in below[run.round].flatMap { $0 > 0 ? value / $0 : nil } }
        }
        guard let lowest = ratios.min(), let highest = ratios.max() else { return nil }
        (self.lowest, self.highest, rounds) = (lowest, highest, ratios.count)
    }

    /// "rounds 0.97-1.16×"
    var text: String { String(format: "rounds %.2f-%.2f×", lowest, highest) }
}
