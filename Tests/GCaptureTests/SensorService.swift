import Foundation
import GCaptureSupport
import GStreamerKit
import XCTest

/// A private D-Bus bus (dbus-daemon with a config of its own) and, on it, a stand-in for iio-sensor-proxy
/// that speaks its interface (`net.hadess.SensorProxy`: ClaimAccelerometer/ReleaseAccelerometer,
/// HasAccelerometer, AccelerometerOrientation and PropertiesChanged), written in Python with Debian's
/// python3-gi. The test turns the "machine" with `turn(to:)`.
final class SensorBus: @unchecked Sendable {
    let folder: URL
    let address: String
    private let daemon: Process

    /// Starts the bus and waits (up to `timeout`) for its socket; a missing dbus-daemon is
    /// TestEnvironment.missing (a skip, or a failure under CI=true).
    init(timeout: TimeInterval = 10) throws {
        let executable = "/usr/bin/dbus-daemon"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestEnvironment.missing("dbus-daemon is not installed (apt install dbus-daemon, or bash scripts/install-deps.sh)")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-bus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // An abstract socket: it needs no file, which inside the v4l2 VM could only be on /tmp's 9p share, where
        // a socket cannot be made.
        address = "unix:abstract=/gcapture/test-bus-\(UUID().uuidString)"
        // A bus of the test's own: anyone may own any name and send anything (the system bus's policy files
        // would allow only the real service's user to own net.hadess.SensorProxy).
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>custom</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        let configURL = folder.appendingPathComponent("bus.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)
        daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: executable)
        // It prints its address once it listens.
        daemon.arguments = ["--config-file=" + configURL.path, "--nofork", "--nopidfile", "--print-address=1"]
        let printed = Pipe(), listening = Locked(false)
        daemon.standardOutput = printed
        daemon.standardError = FileHandle.nullDevice
        printed.fileHandleForReading.readabilityHandler = { handle in
            if handle.availableData.contains(UInt8(ascii: "\n")) { listening.withLock { $0 = true } }
        }
        try daemon.run()
        let deadline = Date().addingTimeInterval(timeout)
        while !listening.withLock({ $0 }), daemon.isRunning, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        printed.fileHandleForReading.readabilityHandler = nil
        guard daemon.isRunning, listening.withLock({ $0 }) else {
            stop()
            throw TestEnvironment.missing("dbus-daemon did not start a private bus within \(timeout) s")
        }
    }

    deinit { stop() }

    func stop() {
        // dbus-daemon of a custom bus ignores SIGTERM; a test bus has nothing to save.
        if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) }
        // Process.waitUntilExit waits for a run loop source here; polling isRunning does not.
        let deadline = Date().addingTimeInterval(5)
        while daemon.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        try? FileManager.default.removeItem(at: folder)
    }
}

/// The stand-in sensor service, a child process on a SensorBus.
final class SensorService: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let lines = Locked<[String]>([])

    /// Starts the service with an accelerometer (or without one) in `orientation`, and waits until it owns
    /// its name on the bus (Python starts in under a second here, ~25 s in the v4l2 VM).
    init(bus: SensorBus, orientation: String = "normal", hasAccelerometer: Bool = true, timeout: TimeInterval = 90) throws {
        let python = "/usr/bin/python3"
        // Looked for rather than imported: importing gi takes ~24 s in the v4l2 VM on a cold cache.
        guard FileManager.default.isExecutableFile(atPath: python),
              FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/gi/__init__.py") else {
            throw TestEnvironment.missing("Debian's python3 with python3-gi is needed for the stand-in sensor service (apt install python3-gi, or bash scripts/install-deps.sh)")
        }
        let script = bus.folder.appendingPathComponent("sensor-proxy-\(UUID().uuidString.prefix(8)).py")
        try Self.script.write(to: script, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path, bus.address, orientation, hasAccelerometer ? "1" : "0"]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        output.fileHandleForReading.readabilityHandler = { [lines] handle in
            let data = handle.availableData
            guard !data.isEmpty, let text = String(data: data, encoding: .utf8) else { return }
            lines.withLock { $0 += text.split(separator: "\n").map(String.init) }
        }
        try process.run()
        try waitFor("the stand-in service to own its name", timeout: timeout) { $0.contains("ready") }
    }

    deinit { stop() }

    /// What the service printed: "ready", and each method called on it ("ClaimAccelerometer", ...).
    var calls: [String] { lines.withLock { $0 } }

    /// Turns the machine: the service sets AccelerometerOrientation and emits PropertiesChanged.
    func turn(to orientation: String) { send("orientation \(orientation)") }

    /// The accelerometer comes or goes (HasAccelerometer, with PropertiesChanged).
    func setHasAccelerometer(_ has: Bool) { send("has \(has ? 1 : 0)") }

    func waitFor(_ what: String, timeout: TimeInterval = 10, _ condition: ([String]) -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition(calls) {
            guard Date() < deadline, process.isRunning else {
                throw SensorServiceError(description: "timed out waiting for \(what); the service printed \(calls)")
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    func stop() {
        guard process.isRunning else { return }
        send("quit")
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        if process.isRunning { process.terminate() }
        let killDeadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < killDeadline { Thread.sleep(forTimeInterval: 0.01) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        output.fileHandleForReading.readabilityHandler = nil
    }

    private func send(_ command: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((command + "\n").utf8))
    }

    struct SensorServiceError: Error, CustomStringConvertible { let description: String }

    private static let script = #"""
        import os
        import sys
        import gi
        gi.require_version("Gio", "2.0")
        from gi.repository import Gio, GLib

        NAME = "net.hadess.SensorProxy"
        PATH = "/net/hadess/SensorProxy"
        XML = """<node><interface name="net.hadess.SensorProxy">
          <method name="ClaimAccelerometer"/><method name="ReleaseAccelerometer"/>
          <property name="HasAccelerometer" type="b" access="read"/>
          <property name="AccelerometerOrientation" type="s" access="read"/>
        </interface></node>"""

        address, orientation, has = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
        state = {"orientation": orientation, "has": has}
        loop = GLib.MainLoop()
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        bus = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        interface = Gio.DBusNodeInfo.new_for_xml(XML).interfaces[0]

        def say(text):
            print(text, flush=True)

        def method_call(connection, sender, path, interface_name, method, parameters, invocation):
            say(method)
            invocation.return_value(None)

        def get_property(connection, sender, path, interface_name, name):
            if name == "HasAccelerometer":
                return GLib.Variant("b", state["has"])
            return GLib.Variant("s", state["orientation"] if state["has"] else "undefined")

        bus.register_object(PATH, interface, method_call, get_property, None)

        def changed(properties):
            bus.emit_signal(None, PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                            GLib.Variant("(sa{sv}as)", (NAME, properties, [])))

        pending = [b""]

        def command(channel, condition):
            # os.read, not readline: a buffered reader would keep lines the watch is never woken for again.
            data = os.read(0, 4096)
            if not data:
                loop.quit()
                return False
            pending[0] += data
            *lines, pending[0] = pending[0].split(b"\n")
            for line in lines:
                if not run(line.decode().split()):
                    loop.quit()
                    return False
            return True

        def run(words):
            if not words:
                return True
            if words[0] == "orientation":
                state["orientation"] = words[1]
                changed({"AccelerometerOrientation": GLib.Variant("s", words[1])})
            elif words[0] == "has":
                state["has"] = words[1] == "1"
                changed({"HasAccelerometer": GLib.Variant("b", state["has"])})
            elif words[0] == "quit":
                return False
            return True

        GLib.io_add_watch(GLib.IOChannel.unix_new(0), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, command)
        Gio.bus_own_name_on_connection(bus, NAME, Gio.BusNameOwnerFlags.NONE,
                                       lambda connection, name: say("ready"), lambda connection, name: say("lost"))
        loop.run()
        """#
}
