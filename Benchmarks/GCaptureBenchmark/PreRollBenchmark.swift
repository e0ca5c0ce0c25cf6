import Foundation
import GCapture
import GStreamerKit

/// Pre-roll and events against the same session without them, child process by child process, alternating:
/// - the CPU of a 1080p30 recording's seconds (the child's own getrusage over the recording alone) with a
///   5 s pre-roll ring behind it and without one (the issue's goal: at most 2% more), whole (start to
///   finished: with the ring it also writes, and defragments, the 5 s it began with) and over its steady
///   middle (2 s after the start to 2 s before the stop: what each frame pays for the ring's path);
/// - what the ring holds at its fullest (H.264 and AAC) against the bit rates × (pre-roll + one key-frame
///   interval) (goal: within 10% of it);
/// - the CPU a second of waiting costs with the ring (the encoder runs all the time) and without;
/// - trigger → the clip's start told (CaptureEventRecorder's `.began`), from the caller's side (goal ≤ 100 ms).
enum PreRollBenchmark {
    static let childMode = "preroll-engine"
    static let preRoll = 5.0
    static let triggers = 5
    /// The AAC the ring keeps the session's audio as (MovieEncoding.aacEncode).
    static let audioBitRate = 128_000

    struct Result: Codable, Sendable {
        var seconds: Double
        var rounds: Int
        var videoBitRate: Int
        var recordingCPUWithoutRing: Double
        var recordingCPUWithRing: Double
        var recordingRatio: Double
        var steadyCPUPerSecondWithoutRing: Double
        var steadyCPUPerSecondWithRing: Double
        var steadyRatio: Double
        var idleCPUPerSecondWithoutRing: Double
        var idleCPUPerSecondWithRing: Double
        var ringVideoBytes: Int
        var ringAudioBytes: Int
        var ringSeconds: Double
        /// The video's and the AAC audio's bit rates × (pre-roll + the key-frame interval of one second).
        var bytesBound: Int
        var triggerToStartMilliseconds: [Double]
    }

    struct ChildReport: Codable, Sendable {
        var recordingCPU: Double
        var steadyCPUPerSecond: Double
        var idleCPUPerSecond: Double
        var ring: CaptureMovieFileOutput.PreRollHolding
        var triggerToStart: [Double]
        var error: String?
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> Result {
        var with: [ChildReport] = [], without: [ChildReport] = []
        for round in 1...rounds {
            for ring in [false, true] {
                progress("pre-roll round \(round)/\(rounds): 1080p30, \(ring ? "a \(Int(preRoll)) s ring" : "no ring"), \(seconds) s recording")
                let (_, report) = try ChildProcess.runChild([childMode, "--seconds", String(seconds)] + (ring ? ["--pre-roll", String(preRoll)] : []),
                                                            timeout: seconds + preRoll + 90, label: "engine \(ring ? "with" : "without") pre-roll",
                                                            as: ChildReport.self)
                if let error = report.error { throw BenchmarkError.child(error) }
                if ring { with.append(report) } else { without.append(report) }
            }
        }
        let fullest = with.max { $0.ring.bytes < $1.ring.bytes }?.ring ?? .init()
        let bitRate = RecordingContestants.videoBitRate
        let withCPU = Statistics.median(with.map(\.recordingCPU)), withoutCPU = Statistics.median(without.map(\.recordingCPU))
        let withSteady = Statistics.median(with.map(\.steadyCPUPerSecond)), withoutSteady = Statistics.median(without.map(\.steadyCPUPerSecond))
        return Result(seconds: seconds, rounds: rounds, videoBitRate: bitRate,
                      recordingCPUWithoutRing: withoutCPU, recordingCPUWithRing: withCPU, recordingRatio: withCPU / withoutCPU,
                      steadyCPUPerSecondWithoutRing: withoutSteady, steadyCPUPerSecondWithRing: withSteady, steadyRatio: withSteady / withoutSteady,
                      idleCPUPerSecondWithoutRing: Statistics.median(without.map(\.idleCPUPerSecond)),
                      idleCPUPerSecondWithRing: Statistics.median(with.map(\.idleCPUPerSecond)),
                      ringVideoBytes: fullest.videoBytes, ringAudioBytes: fullest.audioBytes, ringSeconds: fullest.seconds,
                      bytesBound: Int(Double(bitRate + audioBitRate) / 8 * (preRoll + 1)),
                      triggerToStartMilliseconds: (with + without).flatMap(\.triggerToStart).sorted())
    }

    static func table(_ result: Result) -> String {
        let latencies = result.triggerToStartMilliseconds
        let p50 = latencies.isEmpty ? .nan : Statistics.median(latencies), worst = latencies.last ?? .nan
        return String(format: """
            Pre-roll and events (1080p30 test camera and test microphone, %.0f s recordings, median of %d)
              recording CPU, no ring      %.2f s
              recording CPU, 5 s ring     %.2f s   (%.3fx; goal ≤ 1.02x; the file holds 5 s more)
              steady, CPU a second        %.3f s without, %.3f s with the ring (%.3fx)
              waiting, CPU a second       %.3f s without, %.3f s with the ring (it encodes all the time)
              ring at its fullest         %d bytes: %d of H.264, %d of AAC, %.2f s
                                          (bound %d: (%d + %d) bit/s × 6 s; goal ≤ 1.10x: %.3fx)
              trigger → clip started      p50 %.0f ms, worst %.0f ms of %d (goal ≤ 100 ms)
            """, result.seconds, result.rounds, result.recordingCPUWithoutRing, result.recordingCPUWithRing, result.recordingRatio,
            result.steadyCPUPerSecondWithoutRing, result.steadyCPUPerSecondWithRing, result.steadyRatio,
            result.idleCPUPerSecondWithoutRing, result.idleCPUPerSecondWithRing, result.ringVideoBytes + result.ringAudioBytes,
            result.ringVideoBytes, result.ringAudioBytes, result.ringSeconds, result.bytesBound, result.videoBitRate, audioBitRate,
            Double(result.ringVideoBytes + result.ringAudioBytes) / Double(max(1, result.bytesBound)), p50, worst, latencies.count)
    }

    /// The child: the test camera at 1080p30 and the test microphone, a movie output (with --pre-roll P, its
    /// ring); waits P + 2 s (measuring what waiting costs and the ring's fullest), records --seconds
    /// (measuring the recording's CPU), then times `triggers` event clips from trigger to their start.
    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 0 else {
            printError("child \(childMode): needs --seconds")
            return 2
        }
        let preRoll = arguments.value(after: "--pre-roll").flatMap(Double.init) ?? 0
        return await ChildProcess.serve(childMode) {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-preroll-bench-\(getpid())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let session = CaptureSession(name: childMode)
            let movie = CaptureMovieFileOutput()
            movie.videoBitRate = RecordingContestants.videoBitRate
            movie.preRollDuration = preRoll
            session.beginConfiguration()
            try session.add(CaptureDeviceInput(device: Contestants.makeTestCamera()))
            try session.add(CaptureDeviceInput(device: .testMicrophone))
            try session.add(movie)
            session.sessionPreset = .hd1920x1080
            try session.commitAndWait()
            try await session.start()

            let wait = preRoll + 2
            let idleStart = processCPUSeconds()
            var ring = CaptureMovieFileOutput.PreRollHolding()
            let waitEnd = Date().addingTimeInterval(wait)
            while Date() < waitEnd {
                try await Task.sleep(for: .milliseconds(100))
                let now = movie.preRollHolding
                if now.bytes > ring.bytes { ring = now }
            }
            let idleCPU = (processCPUSeconds() - idleStart) / wait

            let events = MovieEvents()
            var iterator = events.stream.makeAsyncIterator()
            let recordingStart = processCPUSeconds()
            movie.startRecording(to: folder.appendingPathComponent("recording.mp4"), recordingDelegate: events)
            guard case .started? = await iterator.next() else {
                return ChildReport(recordingCPU: 0, steadyCPUPerSecond: 0, idleCPUPerSecond: idleCPU, ring: ring, triggerToStart: [],
                                   error: "the recording did not start")
            }
            let margin = min(2, seconds / 4)
            try await Task.sleep(for: .milliseconds(Int(margin * 1000)))
            let steadyStart = (cpu: processCPUSeconds(), time: ContinuousClock.now)
            try await Task.sleep(for: .milliseconds(Int((seconds - 2 * margin) * 1000)))
            let steadyElapsed = ContinuousClock.now - steadyStart.time
            let steadyCPU = (processCPUSeconds() - steadyStart.cpu)
                / steadyElapsed.inSeconds
            try await Task.sleep(for: .milliseconds(Int(margin * 1000)))
            movie.stopRecording()
            _ = await iterator.next()
            let recordingCPU = processCPUSeconds() - recordingStart

            var latencies: [Double] = []
            let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: 0.5) {
                folder.appendingPathComponent("event-\(UUID().uuidString).mp4")
            }
            for _ in 0..<triggers {
                let clips = recorder.events()
                let pressed = ContinuousClock.now
                try recorder.trigger(.init(source: "benchmark"))
                var ended = false
                for await event in clips {
                    switch event {
                    case .began:
                        let elapsed = ContinuousClock.now - pressed
                        latencies.append(elapsed.inMilliseconds)
                    case .ended: ended = true
                    case .extended: break
                    }
                    if ended { break }
                }
            }
            await session.stop()
            return ChildReport(recordingCPU: recordingCPU, steadyCPUPerSecond: steadyCPU, idleCPUPerSecond: idleCPU, ring: ring,
                               triggerToStart: latencies, error: nil)
        }
    }

    private static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
