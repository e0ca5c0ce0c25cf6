import Foundation
import XCTest

/// A free TCP/UDP port on loopback, found by binding port 0 and letting it go.
func freeLoopbackPort(udp: Bool = false) throws -> Int {
    let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw CheckFailed(description: "no socket") }
    defer { close(fd) }
    return try bindToLoopback(fd)
}

/// Binds the socket to a port of the system's choice on 127.0.0.1 and returns the port.
func bindToLoopback(_ fd: Int32) throws -> Int {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw CheckFailed(description: "cannot bind a loopback port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on the loopback port.
func loopbackAccepts(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// A TCP port on loopback that accepts connections (the kernel completes them) and never reads or writes:
/// a server that hangs.
final class SilentTCPListener: @unchecked Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CheckFailed(description: "no socket") }
        do {
            port = try bindToLoopback(descriptor)
            guard listen(descriptor, 16) == 0 else { throw CheckFailed(description: "cannot listen on a loopback port") }
        } catch {
            Glibc.close(descriptor)
            throw error
        }
    }

    func close() { Glibc.close(descriptor) }
}

/// A server program the test starts and stops: its own process, output into a log file.
final class ServerProcess: @unchecked Sendable {
    let process = Process()
    let log: URL

    init(_ path: String, _ arguments: [String], log: URL, stdout: URL? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestEnvironment.missing("\(path) is not installed (scripts/install-deps.sh installs it)")
        }
        self.log = log
        FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardError = try FileHandle(forWritingTo: log)
        if let stdout {
            FileManager.default.createFile(atPath: stdout.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: stdout)
        } else {
            process.standardOutput = process.standardError
        }
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// SIGKILL to this process only (a server that dies without a goodbye), and waits for it.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    deinit { kill() }
}

/// nginx with Debian's RTMP module (libnginx-mod-rtmp) on a free loopback port, in a private folder.
final class NginxRTMPServer: @unchecked Sendable {
    let port: Int
    let folder: URL
    private(set) var server: ServerProcess?
    static let module = "/usr/lib/nginx/modules/ngx_rtmp_module.so"

    init(folder: URL) throws {
        guard FileManager.default.fileExists(atPath: Self.module), FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else {
            throw TestEnvironment.missing("nginx with the RTMP module is not installed (apt install nginx libnginx-mod-rtmp)")
        }
        self.folder = folder
        port = try freeLoopbackPort()
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

    func start() throws {
        server = try ServerProcess("/usr/sbin/nginx", ["-e", folder.appendingPathComponent("error.log").path, "-p", folder.path,
                                                       "-c", folder.appendingPathComponent("nginx.conf").path],
                                   log: folder.appendingPathComponent("nginx.out"))
        let deadline = Date().addingTimeInterval(5)
        while !loopbackAccepts(port) {
            guard Date() < deadline, server?.isRunning == true else {
                throw CheckFailed(description: "nginx did not listen on \(port): \(server?.logText ?? "")")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    func stop() { server?.kill() }

    func url(_ key: String) -> String { "rtmp://127.0.0.1:\(port)/live/\(key)" }
}

/// srt-live-transmit (Debian's srt-tools) listening on a loopback port and writing what it receives to a file:
/// a byte-exact stand-in for an SRT server.
final class SRTListener: @unchecked Sendable {
    let port: Int
    let output: URL
    private let server: ServerProcess
    static let path = "/usr/bin/srt-live-transmit"

    init(port: Int, output: URL) throws {
        self.port = port
        self.output = output
        server = try ServerProcess(Self.path, ["-q", "srt://:\(port)?mode=listener", "file://con"],
                                   log: output.appendingPathExtension("log"), stdout: output)
    }

    func kill() { server.kill() }
    var receivedBytes: Int { ((try? FileManager.default.attributesOfItem(atPath: output.path))?[.size] as? NSNumber)?.intValue ?? 0 }
}

/// A gst-rtsp-server that accepts RECORD (Debian's gir1.2-gst-rtsp-server-1.0 and python3-gi), writing what it
/// receives as it was sent (H.264, and AAC or Opus; nothing decoded or encoded again) into one MPEG-TS file.
///
/// Why a second stream once kept this server from preparing its media: gst-rtsp-server gives the ANNOUNCEd SDP's
/// n-th m= line to the launch line's element named depay<n>, and refuses an ANNOUNCE whose count differs ("Media
/// has more or less streams than SDP (1 /= 2)": a video-only launch line takes no audio). The order is the
/// client's: rtspclientsink (1.22) announced m=audio first, then m=video, although the video's pad was requested
/// first, and AAC goes as MP4A-LATM (rtpmp4apay), not mpeg4-generic. So `rtph264depay name=depay0 ...
/// rtpmp4gdepay/rtpmp4adepay name=depay1` is handed the other stream's caps (not-negotiated), and `parsebin
/// name=depayN ! queue ! mpegtsmux` fails its delayed link (not-linked: the depayloaded H.264 is avc, which
/// mpegtsmux refuses). Here each mount takes a fixed number of streams (/cam one: video; /av two: video and
/// audio), each depay<n> is a parsebin (any RTP payload in, the elementary stream out), and what it finds is
/// routed by its caps through the matching parser (h264parse also turns avc into MPEG-TS's byte-stream) into the
/// muxer, in whatever order the streams were announced.
///
/// Known: GStreamer 1.22's rtpmp4adepay leaves the LATM length prefix on the first AAC frame it outputs (the
/// payloader's packets all carry it the same way), so ffmpeg cannot decode that one 21 ms frame of the file.
final class RTSPRecordServer: @unchecked Sendable {
    let port: Int
    let output: URL
    private let server: ServerProcess
    static let script = """
        import sys, gi
        gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0')
        from gi.repository import Gst, GstRtspServer, GLib
        Gst.init(None)
        port, out = sys.argv[1], sys.argv[2]
        PARSERS = {'video/x-h264': 'h264parse', 'audio/mpeg': 'aacparse', 'audio/x-opus': 'opusparse'}

        def route(parsebin, pad, queue):
            caps = pad.get_current_caps() or pad.query_caps(None)
            print('%s: %s' % (parsebin.get_name(), caps.to_string()), flush=True)
            name = caps.get_structure(0).get_name()
            if name not in PARSERS:
                print('%s: no parser for %s' % (parsebin.get_name(), name), flush=True)
                return
            parser = Gst.ElementFactory.make(PARSERS[name])
            parsebin.get_parent().add(parser)
            parser.sync_state_with_parent()
            if pad.link(parser.get_static_pad('sink')) != Gst.PadLinkReturn.OK or not parser.link(queue):
                print('%s: cannot link %s' % (parsebin.get_name(), name), flush=True)

        def mount(path, streams):
            factory = GstRtspServer.RTSPMediaFactory()
            factory.set_transport_mode(GstRtspServer.RTSPTransportMode.RECORD)
            branches = '  '.join('parsebin name=depay%d  queue name=in%d ! mux.' % (n, n) for n in range(streams))
            factory.set_launch('( %s  mpegtsmux name=mux ! filesink location=%s )' % (branches, out))
            def configure(factory, media):
                pipeline = media.get_element()
                for n in range(streams):
                    pipeline.get_by_name('depay%d' % n).connect('pad-added', route, pipeline.get_by_name('in%d' % n))
            factory.connect('media-configure', configure)
            server.get_mount_points().add_factory(path, factory)

        server = GstRtspServer.RTSPServer()
        server.set_address('127.0.0.1')
        server.set_service(port)
        mount('/cam', 1)
        mount('/av', 2)
        server.attach(None)
        print('listening', flush=True)
        GLib.MainLoop().run()

        """

    init(folder: URL) throws {
        let check = try ProgramRun.run("/usr/bin/python3", ["-c", "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer"])
        guard check.status == 0 else {
            throw TestEnvironment.missing("gst-rtsp-server for Python is not installed (apt install python3-gi gir1.2-gst-rtsp-server-1.0)")
        }
        port = try freeLoopbackPort()
        output = folder.appendingPathComponent("rtsp-received.ts")
        let script = folder.appendingPathComponent("rtsp-record-server.py")
        try Self.script.write(to: script, atomically: true, encoding: .utf8)
        server = try ServerProcess("/usr/bin/python3", [script.path, "\(port)", output.path], log: folder.appendingPathComponent("rtsp.log"))
        let deadline = Date().addingTimeInterval(10)
        while !loopbackAccepts(port) {
            guard Date() < deadline, server.isRunning else { throw CheckFailed(description: "the RTSP server did not listen: \(server.logText)") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The mount for video only ("cam") or video and audio ("av").
    func url(_ path: String) -> String { "rtsp://127.0.0.1:\(port)/\(path)" }
    var logText: String { server.logText }
    func kill() { server.kill() }
}
