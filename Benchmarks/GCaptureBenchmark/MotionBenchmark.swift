import Foundation
import GCapture

/// What a CaptureMotionOutput costs: the same 1080p30 test-camera session (Contestants.makeSession: a frame
/// output nobody reads) with and without one, each a child process of its own, alternating which goes first.
/// The difference of their CPU seconds over the run's length is the motion output's share of one core. The
/// goal: at most 3% of one core.
enum MotionBenchmark {
    static let childMode = "motion-engine"
    static let goalPercentOfCore = 3.0

    struct Run: Codable, Sendable {
        var withMotion: Bool
        var round: Int
        var cpuSeconds: Double
        var wallSeconds: Double
        var report: ChildReport
    }

    struct ChildReport: Codable, Sendable {
        var seconds: Double
        var analyzedFrames: Int
        var events: Int
    }

    struct Result: Codable, Sendable {
        var seconds: Double
        var rounds: Int
        var runs: [Run]
        var withMotionCPUSeconds: Double
        var withoutCPUSeconds: Double
        /// (with - without) / seconds, in percent of one core.
        var percentOfOneCore: Double
        var analyzedFramesPerSecond: Double
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> Result {
        var runs: [Run] = []
        for round in 1...rounds {
            for withMotion in round % 2 == 1 ? [true, false] : [false, true] {
                let arguments = [childMode, "--seconds", String(seconds)] + (withMotion ? [] : ["--base"])
                let label = withMotion ? "engine with a motion output" : "engine without"
                let (usage, report) = try ChildProcess.runChild(arguments, timeout: seconds + 60, label: label, as: ChildReport.self)
                runs.append(Run(withMotion: withMotion, round: round, cpuSeconds: usage.cpuSeconds,
                                wallSeconds: usage.wallSeconds, report: report))
                progress(String(format: "motion: round %d/%d  %@  %.3f CPU s, %d frames analyzed, %d events",
                                round, rounds, (withMotion ? "with motion" : "without   "), usage.cpuSeconds,
                                report.analyzedFrames, report.events))
            }
        }
        let with = Statistics.median(runs.filter(\.withMotion).map(\.cpuSeconds))
        let without = Statistics.median(runs.filter { !$0.withMotion }.map(\.cpuSeconds))
        let analyzed = runs.filter(\.withMotion).map { Double($0.report.analyzedFrames) / $0.report.seconds }
        return Result(seconds: seconds, rounds: rounds, runs: runs, withMotionCPUSeconds: with, withoutCPUSeconds: without,
                      percentOfOneCore: (with - without) / seconds * 100, analyzedFramesPerSecond: Statistics.median(analyzed))
    }

    static func table(_ result: Result) -> String {
        var lines = [String(format: "Motion detection (1080p30 test camera, %.0f s per child, median of %d; alternating)",
                            result.seconds, result.rounds)]
        for run in result.runs {
            lines.append(String(format: "  round %d  %@  %.3f CPU s", run.round,
                                run.withMotion ? "with a CaptureMotionOutput" : "without                   ", run.cpuSeconds))
        }
        lines.append(String(format: "  with      %.3f CPU s", result.withMotionCPUSeconds))
        lines.append(String(format: "  without   %.3f CPU s", result.withoutCPUSeconds))
        lines.append(String(format: "  motion output  %.2f %% of one core (goal ≤ %.0f %%), %.1f frames analyzed a second",
                            result.percentOfOneCore, goalPercentOfCore, result.analyzedFramesPerSecond))
        return lines.joined(separator: "\n")
    }

    /// The child: the benchmark's 1080p session, with a motion output unless --base, for --seconds.
    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 0 else {
            printError("child \(childMode): needs --seconds")
            return 2
        }
        let withMotion = !arguments.contains("--base")
        return await ChildProcess.serve(childMode) {
            let (session, _) = try Contestants.makeSession(name: childMode)
            let motion = CaptureMotionOutput()
            let events = EventCounter()
            motion.onMotionBegan = { _ in events.count() }
            motion.onMotionEnded = { _ in events.count() }
            if withMotion {
                session.beginConfiguration()
                try session.add(motion)
                try session.commitAndWait()
            }
            try await session.start()
            let started = Date()
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            let elapsed = Date().timeIntervalSince(started)
            await session.stop()
            return ChildReport(seconds: elapsed, analyzedFrames: motion.analyzedFrameCount, events: events.total)
        }
    }
}

private final class EventCounter: Sendable {
    private let events = Locked(0)
    func count() { events.withLock { $0 += 1 } }
    var total: Int { events.withLock { $0 } }
}
