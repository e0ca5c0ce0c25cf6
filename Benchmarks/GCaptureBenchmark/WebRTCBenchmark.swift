import Foundation
import GCapture

/// `--only webrtc`: the live view over WebRTC against MJPEG, in one `gcapture serve` (the test camera
/// stamping each frame's capture time, a 1280x720 live view at 30 fps). Glass to glass: headless Chromium
/// shows the page, and the stamps read back from the pictures it shows (a canvas read, per frame shown)
/// against the clock say how old each picture is (Tests/GCaptureTests/Browser/webrtc_page.py); WebRTC and
/// MJPEG alternate, round by round. Then the server's CPU with ten WebRTC viewers against one (the viewers,
/// webrtcbin peers that depacketize without decoding, are another process: Tests/GCaptureTests/WebRTC/gst_peer.py),
/// measured over the window where every viewer receives. The issue's goals: WebRTC p95 ≤ 150 ms, ten
/// viewers ≤ 1.3x one viewer's CPU.
enum WebRTCBenchmark {
    struct Result: Codable, Sendable {
        var rounds: Int
        var samplesPerRound: Int
        var webRTCMedian: [Double]
        var webRTCP95: [Double]
        var mjpegMedian: [Double]
        var mjpegP95: [Double]
        var seconds: Double
        var oneViewerCPUSeconds: [Double]
        var tenViewersCPUSeconds: [Double]
        var cpuRatio: Double
    }

    static let latencyGoal = 150.0, cpuGoal = 1.3, many = 10
    static let samples = 150
    static let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/GCaptureTests")

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> Result {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-webrtc-bench-\(getpid())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, port) = try ServeBenchmark.launchServer(output: folder, extra: ["--live-size", "1280x720", "--live-rate", "30", "--stamp-time"])
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        var result = Result(rounds: rounds, samplesPerRound: samples, webRTCMedian: [], webRTCP95: [], mjpegMedian: [], mjpegP95: [],
                            seconds: seconds, oneViewerCPUSeconds: [], tenViewersCPUSeconds: [], cpuRatio: 0)
        for round in 1...rounds {
            let webRTC = try latency(port: port, mode: "webrtc"), mjpeg = try latency(port: port, mode: "mjpeg")
            result.webRTCMedian.append(webRTC.p50)
            result.webRTCP95.append(webRTC.p95)
            result.mjpegMedian.append(mjpeg.p50)
            result.mjpegP95.append(mjpeg.p95)
            progress(String(format: "webrtc round %d: WebRTC p50 %.0f p95 %.0f ms, MJPEG p50 %.0f p95 %.0f ms", round, webRTC.p50, webRTC.p95, mjpeg.p50, mjpeg.p95))
        }
        for round in 1...rounds {
            let one = try viewersCPU(port: port, count: 1, seconds: seconds, pid: server.processIdentifier)
            let ten = try viewersCPU(port: port, count: many, seconds: seconds, pid: server.processIdentifier)
            result.oneViewerCPUSeconds.append(one)
            result.tenViewersCPUSeconds.append(ten)
            progress(String(format: "webrtc round %d: 1 viewer %.2f s CPU, %d viewers %.2f s CPU (%.2fx)", round, one, many, ten, ten / max(0.001, one)))
        }
        result.cpuRatio = Statistics.median(result.tenViewersCPUSeconds) / max(0.001, Statistics.median(result.oneViewerCPUSeconds))
        return result
    }

    /// One browser session's latencies (ms) over `samples` pictures.
    private static func latency(port: Int, mode: String) throws -> (p50: Double, p95: Double) {
        let run = try ChildProcess.run("/usr/bin/python3", [tests.appendingPathComponent("Browser/webrtc_page.py").path, "live",
                                                             "http://127.0.0.1:\(port)/", mode, "\(samples)"], timeout: 120)
        let report = run.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["check"] as? String == "latency" }
        guard let report, let p50 = report["p50"] as? Double, let p95 = report["p95"] as? Double else {
            throw BenchmarkError.child("the \(mode) latency was not measured: \(run.stdout)")
        }
        return (p50, p95)
    }

    /// The server's CPU seconds while `count` viewers receive for `seconds` (from when every one has its
    /// first frame: connecting is not the steady state), read from samples taken every 100 ms.
    private static func viewersCPU(port: Int, count: Int, seconds: Double, pid: pid_t) throws -> Double {
        let samples = Locked<[(wall: Double, cpu: Double)]>([])
        let sampling = Locked(true)
        let sampler = Thread {
            while sampling.withLock({ $0 }) {
                samples.withLock { $0.append((Date().timeIntervalSince1970, ServeBenchmark.cpuSeconds(of: pid))) }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        sampler.start()
        let run = try ChildProcess.run("/usr/bin/python3", [tests.appendingPathComponent("WebRTC/gst_peer.py").path, "whep-viewers",
                                                             "--url", "http://127.0.0.1:\(port)/whep", "--seconds", "\(seconds)",
                                                             "--count", "\(count)"], timeout: seconds + 90)
        sampling.withLock { $0 = false }
        let report = run.stdout.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let frames = report?["frames"] as? [Int] ?? []
        let everyoneReceived = frames.count == count && frames.allSatisfy { Double($0) > seconds * 20 }
        guard run.exitCode == 0, everyoneReceived, let start = report?["windowStart"] as? Double, let end = report?["windowEnd"] as? Double else {
            throw BenchmarkError.child("the \(count) WebRTC viewers did not all receive: \(run.stdout)")
        }
        let taken = samples.withLock { $0 }
        func cpu(at time: Double) -> Double {
            let nearest = taken.min { (a: (wall: Double, cpu: Double), b: (wall: Double, cpu: Double)) -> Bool in
                abs(a.wall - time) < abs(b.wall - time)
            }
            return nearest?.cpu ?? 0
        }
        return cpu(at: end) - cpu(at: start)
    }

    static func table(_ result: Result) -> String {
        func list(_ values: [Double]) -> String { values.map { String(format: "%.0f", $0) }.joined(separator: " ") }
        let p95 = Statistics.median(result.webRTCP95)
        return """
            gcapture serve, live view 1280x720 at 30 fps, glass to glass in headless Chromium (\(result.samplesPerRound) pictures x \(result.rounds) rounds)
              WebRTC  p50 \(list(result.webRTCMedian)) ms   p95 \(list(result.webRTCP95)) ms   (median p95 \(String(format: "%.0f", p95)) ms, goal ≤ \(Int(latencyGoal)) ms: \(p95 <= latencyGoal ? "MET" : "MISSED"))
              MJPEG   p50 \(list(result.mjpegMedian)) ms   p95 \(list(result.mjpegP95)) ms   (WebRTC / MJPEG p95: \(String(format: "%.2f", p95 / max(1, Statistics.median(result.mjpegP95))))x)
            CPU of the gcapture process, \(Int(result.seconds)) s x \(result.rounds) rounds
              1 WebRTC viewer:   \(result.oneViewerCPUSeconds.map { String(format: "%.2f", $0) }.joined(separator: " ")) s
              \(many) WebRTC viewers: \(result.tenViewersCPUSeconds.map { String(format: "%.2f", $0) }.joined(separator: " ")) s
              ratio \(many) / 1: \(String(format: "%.2f", result.cpuRatio))x   (goal ≤ \(cpuGoal)x: \(result.cpuRatio <= cpuGoal ? "MET" : "MISSED"))
            """
    }
}
