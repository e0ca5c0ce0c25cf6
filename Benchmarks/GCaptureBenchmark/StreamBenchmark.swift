import Foundation
import GCapture
import GStreamerKit

/// `--only stream`: publishing to a real nginx-rtmp on loopback. The CPU of `gcapture stream` against the
/// gst-launch-1.0 publisher it amounts to (same test source, same encoder settings, same muxer and sink),
/// alternated in one run; and, in this process, how long a stream takes to publish again once the server is
/// back after a kill, next to the backoff step in force; and the CPU of `gcapture stream --record` (one
/// session recording and publishing) against `gcapture record` alone, alternated. The issue's targets: CPU
/// ≤ 1.05x the plain publisher; recording and streaming ≤ 1.15x recording alone; server back → publishing
/// ≤ 2 s plus the backoff step.
enum StreamBenchmark {
    struct Result: Codable, Sendable {
        var seconds: Double
        var rounds: Int
        var engineCPUSeconds: [Double]
        var plainCPUSeconds: [Double]
        var ratio: Double
        /// `gcapture record` alone, and `gcapture stream --record` recording the same.
        var recordCPUSeconds: [Double]
        var recordAndStreamCPUSeconds: [Double]
        var recordAndStreamRatio: Double
        /// Seconds from the server listening again to the stream live, per round.
        var backToLiveSeconds: [Double]
        /// The backoff delay of the attempt pending when the server came back, per round.
        var backoffStepSeconds: [Double]
        /// A/V over a longer pull by ffmpeg: the gap between the newest video and audio timestamps when it
        /// was cut, and the audio missing from the audio timeline (both 0 in a stream that does not drift).
        var driftPullSeconds: Double
        var driftEndGapSeconds: Double
        var driftAudioMissingSeconds: Double
    }

    static let width = 1280, height = 720, frameRate = 30
    /// What the engine picks for the test camera at 720p: 1280 × 720 × 2 bit/s.
    static let bitRate = 1280 * 720 * 2

    static func plainDescription(url: String, seconds: Double) -> String {
        let frames = Int(seconds * Double(frameRate)), audioBuffers = Int(seconds * 48000 / 1024)
        return "videotestsrc is-live=true pattern=smpte horizontal-speed=2 num-buffers=\(frames) "
            + "! video/x-raw,format=NV12,width=\(width),height=\(height),framerate=\(frameRate)/1 "
            + "! queue leaky=downstream max-size-buffers=0 max-size-bytes=16777216 max-size-time=500000000 ! videoconvert ! video/x-raw,format=NV12 "
            + "! x264enc speed-preset=veryfast tune=zerolatency bitrate=\(bitRate / 1000) key-int-max=60 bframes=0 option-string=scenecut=0 "
            + "! video/x-h264,profile=main ! h264parse config-interval=-1 ! queue ! flvmux name=mux streamable=true "
            + "! rtmp2sink location=\(url) async-connect=false async=false sync=false "
            + "audiotestsrc is-live=true wave=sine freq=440 volume=0.3 num-buffers=\(audioBuffers) ! audioconvert ! audioresample "
            + "! audio/x-raw,rate=48000,channels=2 ! voaacenc bitrate=128000 ! aacparse ! queue ! mux."
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) async throws -> Result {
        let server = try RTMPServer()
        defer { server.stop() }
        let gcapture = URL(fileURLWithPath: ChildProcess.currentExecutable).deletingLastPathComponent().appendingPathComponent("gcapture").path
        guard FileManager.default.isExecutableFile(atPath: gcapture) else { throw BenchmarkError.setup("gcapture is not built next to gcapture-bench") }
        var engine: [Double] = [], plain: [Double] = []
        for round in 1...rounds {
            // Alternated, so that the machine's load falls on both alike.
            let engineRun = try ChildProcess.run(gcapture, ["stream", server.url("engine\(round)"), "--camera", "test", "--microphone", "test-microphone",
                                                            "--preset", "hd1280x720", "--duration", "\(seconds)", "--json"],
                                                 timeout: seconds + 30)
            guard engineRun.succeeded, engineRun.stdout.contains("\"live\"") else {
                throw BenchmarkError.child("gcapture stream ended with \(engineRun.endDescription) without going live")
            }
            engine.append(engineRun.cpuSeconds)
            let plainRun = try ChildProcess.gstLaunch(plainDescription(url: server.url("plain\(round)"), seconds: seconds), timeout: seconds + 30)
            plain.append(plainRun.cpuSeconds)
            progress(String(format: "stream round %d: gcapture %.2f s CPU, gst-launch %.2f s CPU", round, engineRun.cpuSeconds, plainRun.cpuSeconds))
        }
        var recordAlone: [Double] = [], recordAndStream: [Double] = []
        let movies = server.folder
        for round in 1...rounds {
            let common = ["--camera", "test", "--microphone", "test-microphone", "--preset", "hd1280x720", "--duration", "\(seconds)"]
            let alone = try ChildProcess.run(gcapture, ["record", "--output", movies.appendingPathComponent("alone\(round).mp4").path] + common,
                                             timeout: seconds + 30)
            guard alone.succeeded else { throw BenchmarkError.child("gcapture record ended with \(alone.endDescription)") }
            recordAlone.append(alone.cpuSeconds)
            let both = try ChildProcess.run(gcapture, ["stream", server.url("both\(round)"), "--record",
                                                       movies.appendingPathComponent("both\(round).mp4").path, "--json"] + common,
                                            timeout: seconds + 30)
            guard both.succeeded, both.stdout.contains("\"live\"") else {
                throw BenchmarkError.child("gcapture stream --record ended with \(both.endDescription) without going live")
            }
            recordAndStream.append(both.cpuSeconds)
            progress(String(format: "record+stream round %d: record %.2f s CPU, stream --record %.2f s CPU", round, alone.cpuSeconds, both.cpuSeconds))
        }
        let (back, steps) = try await reconnects(server: server, rounds: rounds, progress: progress)
        let drift = try drift(server: server, gcapture: gcapture, seconds: driftSeconds, progress: progress)
        return Result(seconds: seconds, rounds: rounds, engineCPUSeconds: engine, plainCPUSeconds: plain,
                      ratio: Statistics.median(engine) / Statistics.median(plain),
                      recordCPUSeconds: recordAlone, recordAndStreamCPUSeconds: recordAndStream,
                      recordAndStreamRatio: Statistics.median(recordAndStream) / Statistics.median(recordAlone), backToLiveSeconds: back, backoffStepSeconds: steps,
                      driftPullSeconds: drift.seconds, driftEndGapSeconds: drift.endGap, driftAudioMissingSeconds: drift.audioMissing)
    }

    static let driftSeconds = 60.0

    /// `gcapture stream` publishes while ffmpeg pulls `seconds` of it back from the server; the copy's packet
    /// timestamps say whether audio and video moved apart.
    private static func drift(server: RTMPServer, gcapture: String, seconds: Double,
                              progress: (String) -> Void) throws -> (seconds: Double, endGap: Double, audioMissing: Double) {
        let publisher = Process()
        publisher.executableURL = URL(fileURLWithPath: gcapture)
        publisher.arguments = ["stream", server.url("drift"), "--camera", "test", "--microphone", "test-microphone", "--preset", "hd1280x720",
                               "--duration", "\(seconds + 15)", "--json"]
        publisher.standardOutput = FileHandle.nullDevice
        publisher.standardError = FileHandle.nullDevice
        try publisher.run()
        defer { if publisher.isRunning { publisher.terminate() }; publisher.waitUntilExit() }
        Thread.sleep(forTimeInterval: 3)
        let copy = server.folder.appendingPathComponent("drift.flv")
        progress("pulling \(Int(seconds)) s of the stream back with ffmpeg")
        let pull = try ChildProcess.run("ffmpeg", ["-v", "error", "-i", server.url("drift"), "-t", "\(seconds)", "-c", "copy", "-y", copy.path],
                                        searchPath: true, timeout: seconds + 30)
        guard pull.succeeded else { throw BenchmarkError.child("ffmpeg could not pull the stream back (\(pull.endDescription))") }
        func times(_ stream: String) throws -> [Double] {
            let probe = try ChildProcess.run("ffprobe", ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time",
                                                         "-of", "csv=p=0", copy.path], searchPath: true, timeout: 60)
            return probe.stdout.split(separator: "\n").compactMap { Double($0.split(separator: ",").first ?? "") }.sorted()
        }
        let video = try times("v"), audio = try times("a")
        guard let v0 = video.first, let v1 = video.last, let a0 = audio.first, let a1 = audio.last else {
            throw BenchmarkError.child("the pulled stream has no audio or no video")
        }
        let result = (v1 - v0, v1 - a1, (a1 - a0) - Double(audio.count - 1) * 1024 / 48000)
        progress(String(format: "drift over %.1f s: end gap %.3f s, audio missing %.3f s", result.0, result.1, result.2))
        return result
    }

    /// Kills the server under a live stream, starts it again 3 s later, and times the stream's way back.
    private static func reconnects(server: RTMPServer, rounds: Int, progress: (String) -> Void) async throws -> ([Double], [Double]) {
        let session = CaptureSession(name: "bench-stream")
        let stream = CaptureStreamOutput()
        stream.reconnectPolicy = .default
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: Contestants.makeTestCamera()))
        try session.add(CaptureDeviceInput(device: .testMicrophone))
        try session.add(stream)
        session.sessionPreset = .hd1280x720
        try session.commitAndWait()
        try await session.start()
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: server.url("reconnect"))
        var back: [Double] = [], steps: [Double] = []
        for round in 1...rounds {
            try await wait(for: 15, "the stream going live") { stream.state == .live }
            try await Task.sleep(for: .seconds(2))
            server.stop()
            try await wait(for: 15, "the stream noticing the server is gone") { stream.state.name == "reconnecting" }
            try await Task.sleep(for: .seconds(3))
            try server.start()
            let listening = Date()
            // The attempt pending now, whose delay is the backoff step in force.
            var step = 0.0
            if case .reconnecting(let attempt, _, _) = stream.state {
                step = stream.reconnectPolicy.delay(beforeAttempt: attempt, random: 1)
            }
            try await wait(for: 30, "the stream going live again") { stream.state == .live }
            let seconds = Date().timeIntervalSince(listening)
            back.append(seconds)
            steps.append(step)
            progress(String(format: "reconnect round %d: live %.2f s after the server was back (backoff step up to %.2f s)", round, seconds, step))
        }
        stream.stopStreaming()
        return (back, steps)
    }

    private static func wait(for seconds: Double, _ what: String, until condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { throw BenchmarkError.setup("\(what) did not happen within \(Int(seconds)) s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func table(_ result: Result) -> String {
        func list(_ values: [Double]) -> String { values.map { String(format: "%.2f", $0) }.joined(separator: ", ") }
        let ok = zip(result.backToLiveSeconds, result.backoffStepSeconds).allSatisfy { $0 <= 2 + $1 }
        return """
            streaming 720p30 H.264 + AAC to nginx-rtmp on loopback, \(Int(result.seconds)) s per run, \(result.rounds) rounds
              CPU seconds   gcapture stream: \(list(result.engineCPUSeconds))
                            gst-launch-1.0:  \(list(result.plainCPUSeconds))
              ratio (medians): \(String(format: "%.3f", result.ratio))x  (target ≤ 1.05x)
              CPU seconds   gcapture record:           \(list(result.recordCPUSeconds))
                            gcapture stream --record:  \(list(result.recordAndStreamCPUSeconds))
              ratio (medians): \(String(format: "%.3f", result.recordAndStreamRatio))x  (target ≤ 1.15x: one encode for both)
              server back → live: \(list(result.backToLiveSeconds)) s; backoff step in force: \(list(result.backoffStepSeconds)) s \
            (target ≤ 2 s + step: \(ok ? "met" : "NOT met"))
              A/V over \(String(format: "%.1f", result.driftPullSeconds)) s pulled back: newest video − newest audio \
            \(String(format: "%.0f", result.driftEndGapSeconds * 1000)) ms, audio missing \
            \(String(format: "%.0f", result.driftAudioMissingSeconds * 1000)) ms (target < 50 ms)
            """
    }
}

/// nginx with Debian's RTMP module on a free loopback port, in a temporary folder.
final class RTMPServer: @unchecked Sendable {
    let port: Int
    let folder: URL
    private var process: Process?
    static let module = "/usr/lib/nginx/modules/ngx_rtmp_module.so"

    init() throws {
        guard FileManager.default.fileExists(atPath: Self.module) else {
            throw BenchmarkError.setup("nginx with the RTMP module is not installed (apt install nginx libnginx-mod-rtmp)")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-bench-rtmp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // A port nothing listens on now: bound, read, let go.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        close(fd)
        port = Int(UInt16(bigEndian: address.sin_port))
        let config = """
            daemon off;
            master_process off;
            pid \(folder.path)/nginx.pid;
            error_log \(folder.path)/error.log warn;
            load_module \(Self.module);
            events { worker_connections 64; }
            rtmp { server { listen 127.0.0.1:\(port); application live { live on; } } }

            """
        try config.write(to: folder.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
        try start()
    }

    func url(_ key: String) -> String { "rtmp://127.0.0.1:\(port)/live/\(key)" }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-e", folder.appendingPathComponent("error.log").path, "-p", folder.path, "-c", folder.appendingPathComponent("nginx.conf").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(5)
        while !accepts() {
            guard Date() < deadline, process.isRunning else { throw BenchmarkError.setup("nginx did not listen on \(port)") }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    private func accepts() -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// SIGKILL to our nginx only: a server that dies without a goodbye.
    func stop() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }
}
