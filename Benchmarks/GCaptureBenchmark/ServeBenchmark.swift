import Foundation

/// `--only serve`: the web page's live view under load. One `gcapture serve` (test camera, 720p live view at
/// 15 fps); its CPU over the same number of seconds with one MJPEG viewer and with ten, alternated in one
/// run. The issue's target: ten viewers cost ≤ 1.2x the CPU of one (the frame is encoded once and the same
/// bytes go to every viewer). Viewers are plain sockets in this process, whose CPU does not count.
enum ServeBenchmark {
    struct Result: Codable, Sendable {
        var seconds: Double
        var rounds: Int
        var oneViewerCPUSeconds: [Double]
        var tenViewersCPUSeconds: [Double]
        /// Bytes each viewer received, per phase (the median viewer): all ten must get the picture.
        var oneViewerBytes: [Int]
        var tenViewersMedianBytes: [Int]
        var ratio: Double
    }

    static let many = 10

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> Result {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-serve-bench-\(getpid())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, port) = try launchServer(output: folder, extra: ["--live-size", "1280x720", "--live-rate", "15"])
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        // Warm up: the session's first seconds (pipeline start, first encodes) are not the steady state.
        _ = watch(port: port, viewers: 1, pid: server.processIdentifier, seconds: 2)
        var one: [Double] = [], ten: [Double] = [], oneBytes: [Int] = [], tenBytes: [Int] = []
        for round in 1...rounds {
            let single = watch(port: port, viewers: 1, pid: server.processIdentifier, seconds: seconds)
            let several = watch(port: port, viewers: many, pid: server.processIdentifier, seconds: seconds)
            guard single.bytes.allSatisfy({ $0 > 100_000 }), several.bytes.allSatisfy({ $0 > 100_000 }) else {
                throw BenchmarkError.child("a viewer received almost nothing: \(single.bytes) / \(several.bytes)")
            }
            one.append(single.cpu)
            ten.append(several.cpu)
            oneBytes.append(single.bytes[0])
            tenBytes.append(several.bytes.sorted()[several.bytes.count / 2])
            progress(String(format: "serve round %d: 1 viewer %.2f s CPU, %d viewers %.2f s CPU (%.2fx)", round, single.cpu, many, several.cpu,
                            several.cpu / max(0.001, single.cpu)))
        }
        return Result(seconds: seconds, rounds: rounds, oneViewerCPUSeconds: one, tenViewersCPUSeconds: ten, oneViewerBytes: oneBytes,
                      tenViewersMedianBytes: tenBytes, ratio: Statistics.median(ten) / Statistics.median(one))
    }

    static func table(_ result: Result) -> String {
        """
        gcapture serve, live view 1280x720 at 15 fps, \(Int(result.seconds)) s x \(result.rounds) rounds (CPU of the gcapture process)
          1 viewer:    \(result.oneViewerCPUSeconds.map { String(format: "%.2f", $0) }.joined(separator: " ")) s   (median \(String(format: "%.2f", Statistics.median(result.oneViewerCPUSeconds))))
          \(many) viewers:  \(result.tenViewersCPUSeconds.map { String(format: "%.2f", $0) }.joined(separator: " ")) s   (median \(String(format: "%.2f", Statistics.median(result.tenViewersCPUSeconds))))
          bytes per viewer: 1 viewer \(result.oneViewerBytes), \(many) viewers (median) \(result.tenViewersMedianBytes)
          ratio \(many) / 1: \(String(format: "%.2f", result.ratio))x   (goal ≤ 1.20x)
        """
    }

    /// `gcapture serve` (built beside the benchmark) with the test camera, writing to `folder`, on a free port:
    /// the process, once it listens, and its port. The caller terminates it.
    static func launchServer(output folder: URL, extra: [String]) throws -> (server: Process, port: Int) {
        let gcapture = URL(fileURLWithPath: ChildProcess.currentExecutable).deletingLastPathComponent().appendingPathComponent("gcapture").path
        guard FileManager.default.isExecutableFile(atPath: gcapture) else { throw BenchmarkError.setup("gcapture is not built next to gcapture-bench") }
        let server = Process()
        server.executableURL = URL(fileURLWithPath: gcapture)
        server.arguments = ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none", "--output", folder.path, "--json"] + extra
        let output = Pipe()
        server.standardOutput = output
        server.standardError = FileHandle.nullDevice
        server.standardInput = FileHandle.nullDevice
        do { try server.run() } catch { throw BenchmarkError.setup("cannot start gcapture serve: \(error)") }
        do {
            return (server, try listeningPort(output.fileHandleForReading, within: 30))
        } catch {
            server.terminate()
            server.waitUntilExit()
            throw error
        }
    }

    static func listeningPort(_ handle: FileHandle, within seconds: Double) throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        var text = ""
        while Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
            for line in text.split(separator: "\n") {
                if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                   object["event"] as? String == "listening", let port = object["port"] as? Int {
                    return port
                }
            }
        }
        throw BenchmarkError.setup("gcapture serve did not start listening: \(text)")
    }

    /// The server's CPU seconds while `viewers` sockets read the live view for `seconds`, and the bytes each got.
    private static func watch(port: Int, viewers: Int, pid: pid_t, seconds: Double) -> (cpu: Double, bytes: [Int]) {
        let sockets = (0..<viewers).compactMap { _ in connect(port: port) }
        defer { sockets.forEach { close($0) } }
        for socket in sockets {
            let request = "GET /live.mjpg HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"
            _ = request.withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }
        // Let every stream start before the measured window.
        var bytes = Array(repeating: 0, count: sockets.count)
        drain(sockets, into: &bytes, for: 0.5)
        bytes = Array(repeating: 0, count: sockets.count)
        let before = cpuSeconds(of: pid)
        drain(sockets, into: &bytes, for: seconds)
        return (cpuSeconds(of: pid) - before, bytes)
    }

    private static func drain(_ sockets: [Int32], into bytes: inout [Int], for seconds: Double) {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var pollers = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&pollers, nfds_t(pollers.count), 100) >= 0 else { return }
            for (index, poller) in pollers.enumerated() where poller.revents != 0 {
                let count = recv(poller.fd, &chunk, chunk.count, 0)
                if count > 0 { bytes[index] += count }
            }
        }
    }

    static func connect(port: Int) -> Int32? {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(socket); return nil }
        return socket
    }

    /// One GET on a connection of its own, timed from the caller's side: from connecting to the server
    /// closing it after the whole answer. Returns the status and the body's size.
    static func timedGet(port: Int, _ target: String) throws(BenchmarkError) -> (status: Int, bytes: Int, milliseconds: Double) {
        let start = LibraryBenchmark.monotonicSeconds()
        guard let socket = connect(port: port) else { throw .child("cannot connect to gcapture serve on port \(port)") }
        defer { close(socket) }
        let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var answer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = recv(socket, &chunk, chunk.count, 0)
            if count <= 0 { break }
            answer += chunk[0..<count]
        }
        let elapsed = (LibraryBenchmark.monotonicSeconds() - start) * 1000
        let head = String(decoding: answer.prefix(64), as: UTF8.self)
        let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let split = answer.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound ?? answer.count
        return (status, answer.count - split, elapsed)
    }

    /// utime + stime of a process, from /proc/PID/stat.
    static func cpuSeconds(of pid: pid_t) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return 0 }
        // After the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
