import Foundation
import GCapture
import GCaptureSupport

/// systemd's service notification protocol (sd_notify(3)), written out here rather than linking
/// libsystemd for one datagram: newline-separated `KEY=value` fields sent to the AF_UNIX datagram socket
/// named by NOTIFY_SOCKET, an absolute path or, with a leading `@`, an abstract address (Linux).
final class SystemdNotifier: Sendable {
    let address: String
    private let socket: Int32
    private let reportedFailure = Locked(false)

    /// The notifier for the socket the environment names; nil when the process is not run by a service
    /// manager that listens (no NOTIFY_SOCKET), or when the variable names no usable address (said on stderr:
    /// a unit that expects readiness would otherwise fail its start without a word from us).
    static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> SystemdNotifier? {
        guard let address = environment["NOTIFY_SOCKET"], !address.isEmpty else { return nil }
        do {
            return try SystemdNotifier(address: address)
        } catch {
            FileHandle.standardError.write(Data("gcapture: NOTIFY_SOCKET: \(error); systemd will not hear that the service is ready\n".utf8))
            return nil
        }
    }

    init(address: String) throws(CommandFailure) {
        guard address.hasPrefix("/") || address.hasPrefix("@") else {
            throw CommandFailure("\(address) is neither an absolute path nor an abstract address (@name)")
        }
        guard address.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw CommandFailure("\(address) is longer than a socket address can be")
        }
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw CommandFailure("cannot open a datagram socket (\(String(cString: strerror(errno))))") }
        self.address = address
        self.socket = socket
    }

    deinit { close(socket) }

    /// Sends the fields as one datagram; false when it could not be delivered (the first failure is said on
    /// stderr; a service manager that went away must not stop the capture).
    @discardableResult
    func send(_ fields: [String]) -> Bool {
        var target = sockaddr_un()
        target.sun_family = sa_family_t(AF_UNIX)
        let name = Array(address.utf8)
        let abstract = name.first == UInt8(ascii: "@")
        withUnsafeMutableBytes(of: &target.sun_path) { path in
            path.copyBytes(from: name)
            // An abstract name starts with a NUL byte instead of the @ and is not NUL-terminated.
            if abstract { path[0] = 0 }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        // A path's length counts its terminating NUL (sockaddr_un() is zeroed); an abstract name's does not.
        let length = socklen_t(pathOffset + name.count + (abstract ? 0 : 1))
        let message = Array(fields.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: &target) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                message.withUnsafeBytes { bytes in
                    sendto(socket, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), address, length)
                }
            }
        }
        if sent == message.count { return true }
        let reason = String(cString: strerror(errno))
        if reportedFailure.withLock({ reported in defer { reported = true }; return !reported }) {
            FileHandle.standardError.write(Data("gcapture: cannot notify systemd at \(address): \(reason)\n".utf8))
        }
        return false
    }

    /// The watchdog's interval asked of this process (WATCHDOG_USEC), nil when none is, or when it is meant
    /// for another process (WATCHDOG_PID).
    static func watchdogInterval(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"].flatMap(Int32.init), pid != getpid() { return nil }
        return .microseconds(microseconds)
    }
}

/// `gcapture run` as a systemd service (Type=notify): READY=1 once the session captures, STATUS= with what
/// it is doing, WATCHDOG=1 at half the watchdog's interval but only while frames flow, STOPPING=1 when it
/// begins to stop.
///
/// Frames, not the process being up, feed the watchdog: a wedged camera driver, a stalled source or a
/// deadlocked pipeline leave `isRunning` true and the process healthy-looking, and restarting the service
/// (which reopens the device) is the one remedy a kiosk has. A camera that is unplugged does not starve it:
/// black frames stand in while the session retries by itself, so systemd does not restart what is recovering.
final class ServiceNotifications: Sendable {
    private let notifier: SystemdNotifier
    private let watchdogInterval: Duration?
    private let tasks = Locked<[Task<Void, Never>]>([])

    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let notifier = SystemdNotifier.fromEnvironment(environment) else { return nil }
        self.notifier = notifier
        watchdogInterval = SystemdNotifier.watchdogInterval(environment)
    }

    /// The session runs: ready, and the watchdog and the status follow it from now on.
    func ready(session: CaptureSession, camera: String) {
        let capturing = "capturing from \(camera)"
        notifier.send(["READY=1", "STATUS=\(capturing)"])
        let events = session.events()
        var started = [Task { [notifier] in
            for await event in events {
                switch event {
                case .wasInterrupted(let reason): notifier.send(["STATUS=interrupted: \(reason)"])
                case .interruptionEnded: notifier.send(["STATUS=\(capturing)"])
                default: break
                }
            }
        }]
        if let interval = watchdogInterval {
            started.append(Task { [notifier] in await Self.feedWatchdog(notifier, every: interval / 2, while: session) })
        }
        tasks.withLock { $0 += started }
    }

    /// Pings at `period` for as long as the session's frame count moves between two pings.
    private static func feedWatchdog(_ notifier: SystemdNotifier, every period: Duration, while session: CaptureSession) async {
        var last = session.videoFramesDelivered
        var starving = false
        while !Task.isCancelled {
            try? await Task.sleep(for: period)
            guard !Task.isCancelled else { return }
            let now = session.videoFramesDelivered
            if now != last {
                notifier.send(starving ? ["WATCHDOG=1", "STATUS=frames flow again"] : ["WATCHDOG=1"])
                starving = false
            } else if !starving {
                starving = true
                notifier.send(["STATUS=no frame from the camera: the watchdog is no longer fed"])
            }
            last = now
        }
    }

    /// The run begins to finish (a signal, `quit`, a fatal error): no more pings, systemd hears it stops.
    func stopping() {
        tasks.withLock { tasks in tasks.forEach { $0.cancel() }; tasks = [] }
        notifier.send(["STOPPING=1", "STATUS=stopping: finishing the recording and the photos"])
    }
}
