import Dispatch
import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// Figure 1: how long from "start" until the first 1080p frame is in the consumer's hands, engine against the
/// plain pipeline, and against the plain pipeline handing its frame over as the engine's API does, in the same
/// process, rounds rotating which side goes first so all share the noise.
enum LatencyBenchmark {
    /// Issue 26's goal: the engine's start costs at most a tenth more than PLAYING the plain pipeline.
    static let goal = 1.10
    /// A side that has not delivered its frames after this long has failed.
    static let frameTimeout = 5.0
    /// Frames each round waits for at its consumer before stopping (the latency is to the first).
    static let framesPerRound = 1

    struct EngineTiming {
        /// start() called → start() returned.
        var startReturned: Double
        /// start() called → first SampleBuffer out of output.sampleBuffers().
        var firstFrame: Double
    }

    struct PlainTiming {
        /// setState(.playing) called → first sample in the appsink handler.
        var fromPlaying: Double
        /// Pipeline.launch called → first sample in the appsink handler.
        var fromBuild: Double
    }

    static func run(rounds: Int, progress: (String) -> Void) async throws -> LatencyReport {
        // Without this, whether a round's first frame buffer must be page-faulted in depends on the previous
        // round's heap (see Allocator), which changes medians by a millisecond either way.
        let allocatorPinned = Allocator.keepFreedMemory()
        // Unmeasured warm-up of both sides: plugin loading, type registration and first-use caches.
        progress("latency: warm-up")
        _ = try await engineRound(number: 0)
        _ = try plainRound()

        _ = try await plainHandedToTaskRound()

        var engine: [EngineTiming] = []
        var plain: [PlainTiming] = []
        var handedToTask: [Double] = []
        for round in 1...rounds {
            // Each side goes first, second and third in turn.
            for side in 0..<3 {
                switch (side + round) % 3 {
                case 0: engine.append(try await engineRound(number: round))
                case 1: plain.append(try plainRound())
                default: handedToTask.append(try await plainHandedToTaskRound())
                }
            }
            progress(String(format: "latency: round %d/%d  engine %.2f ms  plain %.2f ms  plain handed to a task %.2f ms",
                            round, rounds, engine.last!.firstFrame, plain.last!.fromPlaying, handedToTask.last!))
        }

        let engineFirstFrame = Summary(engine.map(\.firstFrame))
        let plainFromPlaying = Summary(plain.map(\.fromPlaying))
        let plainFromBuild = Summary(plain.map(\.fromBuild))
        let ratio = engineFirstFrame.median / plainFromPlaying.median
        let plainHandedToTask = Summary(handedToTask)
        return LatencyReport(
            rounds: rounds,
            allocatorPinned: allocatorPinned,
            engineStartToFirstFrame: engineFirstFrame,
            engineStartCallReturned: Summary(engine.map(\.startReturned)),
            plainPlayingToFirstSample: plainFromPlaying,
            plainBuildAndPlayingToFirstSample: plainFromBuild,
            plainHandedToTask: plainHandedToTask,
            ratio: ratio,
            ratioAgainstHandedToTask: engineFirstFrame.median / plainHandedToTask.median,
            ratioIncludingBuild: engineFirstFrame.median / plainFromBuild.median,
            engineExtraOverBuildAndPlaying: engineFirstFrame.median - plainFromBuild.median,
            goal: goal,
            meetsGoal: ratio <= goal)
    }

    /// A new session with the test camera at 1080p and one video data output, started and stopped.
    static func engineRound(number: Int) async throws -> EngineTiming {
        let (session, output) = try Contestants.makeSession(name: "bench-latency-\(number)")
        let frames = output.sampleBuffers()
        // The consumer waits for frames before start() is called, as an app's would.
        let consumer = Task { () -> UInt64? in
            var first: UInt64?
            var count = 0
            for await _ in frames {
                if first == nil { first = Monotonic.now }
                count += 1
                if count == framesPerRound { break }
            }
            return count == framesPerRound ? first : nil
        }
        let watchdog = Task {
            guard (try? await Task.sleep(for: .seconds(frameTimeout))) != nil else { return }
            consumer.cancel()
        }
        defer { watchdog.cancel() }

        let startCalled = Monotonic.now
        do {
            try await session.start()
        } catch {
            consumer.cancel()
            throw error
        }
        let startReturned = Monotonic.now
        let firstFrame = await consumer.value
        await session.stop()
        guard let firstFrame else {
            throw BenchmarkError.noFrame("the engine delivered under \(framesPerRound) frames within \(frameTimeout) s of start()")
        }
        return EngineTiming(startReturned: Monotonic.milliseconds(from: startCalled, to: startReturned),
                            firstFrame: Monotonic.milliseconds(from: startCalled, to: firstFrame))
    }

    /// The plain pipeline, built, played until its first sample, and shut down. Blocks the calling thread.
    static func plainRound() throws -> PlainTiming {
        let buildCalled = Monotonic.now
        let (pipeline, sink) = try Contestants.makePlainPipeline()
        let arrivals = Arrivals(expected: framesPerRound)
        sink.setSampleHandler { _ in arrivals.mark() }
        let playCalled = Monotonic.now
        try pipeline.setState(.playing)
        let firstSample = arrivals.wait(timeout: frameTimeout)
        pipeline.shutDown()
        guard let firstSample else {
            throw BenchmarkError.noFrame("the plain pipeline delivered under \(framesPerRound) frames within \(frameTimeout) s of PLAYING")
        }
        return PlainTiming(fromPlaying: Monotonic.milliseconds(from: playCalled, to: firstSample),
                           fromBuild: Monotonic.milliseconds(from: buildCalled, to: firstSample))
    }
}

extension LatencyBenchmark {
    /// The plain pipeline with its first sample handed over as the engine's API hands it: PLAYING set on a queue
    /// of its own by an async call that returns once the first sample arrived (start()'s shape), and the sample
    /// yielded into an AsyncStream that a task awaits (sampleBuffers()'s). What any Swift program pays to get a
    /// frame from GStreamer into async code, without the engine: the floor of the engine's start as its API has
    /// it. Milliseconds from the call to the consumer's first sample.
    static func plainHandedToTaskRound() async throws -> Double {
        let (pipeline, sink) = try Contestants.makePlainPipeline()
        defer { pipeline.shutDown() }
        let (samples, delivery) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let firstSample = DispatchSemaphore(value: 0)
        let seen = Atomic<Bool>(false)
        sink.setSampleHandler { _ in
            delivery.yield()
            if !seen.exchange(true, ordering: .relaxed) { firstSample.signal() }
        }
        let consumer = Task { () -> UInt64? in
            for await _ in samples { return Monotonic.now }
            return nil
        }
        let watchdog = Task {
            guard (try? await Task.sleep(for: .seconds(frameTimeout))) != nil else { return }
            consumer.cancel()
        }
        defer { watchdog.cancel() }
        let queue = DispatchQueue(label: "bench-plain-start")
        let called = Monotonic.now
        let started: Bool = await withCheckedContinuation { continuation in
            queue.async {
                let playing = (try? pipeline.setState(.playing)) != nil
                continuation.resume(returning: playing && firstSample.wait(timeout: .now() + frameTimeout) == .success)
            }
        }
        if !started { consumer.cancel() }
        guard started, let first = await consumer.value else {
            throw BenchmarkError.noFrame("the plain pipeline handed no sample to its task within \(frameTimeout) s of PLAYING")
        }
        return Monotonic.milliseconds(from: called, to: first)
    }
}

/// glibc returns freed memory to the kernel when enough of it sits at the top of a heap (heap_trim), so
/// whether the next round's 3 MB frame buffers must be page-faulted in again (≈1-2 ms for the first frame)
/// depends on how much the previous round happened to allocate, not on the code measured. Pinning the
/// thresholds (and so disabling their dynamic adjustment) makes every round start warm, on both sides alike.
enum Allocator {
    private typealias MallOpt = @convention(c) (Int32, Int32) -> Int32
    private static let trimThreshold: Int32 = -1  // M_TRIM_THRESHOLD (malloc.h, which Swift does not import)
    private static let mmapThreshold: Int32 = -3  // M_MMAP_THRESHOLD

    /// Whether the thresholds could be set (mallopt exists only in glibc).
    static func keepFreedMemory() -> Bool {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "mallopt") else { return false }
        let mallopt = unsafeBitCast(symbol, to: MallOpt.self)
        return mallopt(mmapThreshold, 64 << 20) == 1 && mallopt(trimThreshold, 512 << 20) == 1
    }
}

/// Samples counted on the streaming thread: the time of the first, and a signal once `expected` arrived.
private final class Arrivals: Sendable {
    private struct State {
        var first: UInt64?
        var count = 0
    }
    private let expected: Int
    private let state = Mutex(State())
    private let complete = DispatchSemaphore(value: 0)

    init(expected: Int) { self.expected = expected }

    func mark() {
        let now = Monotonic.now
        let isLast = state.withLock { state in
            if state.first == nil { state.first = now }
            state.count += 1
            return state.count == expected
        }
        if isLast { complete.signal() }
    }

    /// The first sample's time once `expected` samples arrived, nil if they did not in time.
    func wait(timeout: Double) -> UInt64? {
        guard complete.wait(timeout: .now() + timeout) == .success else { return nil }
        return state.withLock { $0.first }
    }
}
