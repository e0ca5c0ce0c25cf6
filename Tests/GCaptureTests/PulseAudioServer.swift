import Foundation
import XCTest

/// A real PulseAudio server of the test's own, in a private folder: a null sink with a sine tone playing
/// into it, and a microphone (`gcapture_mic`, a remap of the sink's monitor) as the default source. A small
/// loopback keeps the source busy, so a fresh recorder gets its first buffer in milliseconds, not ~2 s.
final class PulseAudioServer: @unchecked Sendable {
    let folder: URL
    let address: String
    private var pid: pid_t = 0

    /// The microphone's device id for CaptureDevice.
    static let microphoneID = "pulse:gcapture_mic"

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio") else {
            throw TestEnvironment.missing("pulseaudio is not installed (scripts/install-deps.sh installs it)")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-pulse-\(UUID().uuidString.prefix(8))")
        for sub in ["run", "state", "config"] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        let socket = folder.appendingPathComponent("native").path
        address = "unix:" + socket
        let script = """
            load-module module-native-protocol-unix auth-anonymous=1 socket=\(socket)
            load-module module-null-sink sink_name=gcapture_null
            load-module module-null-sink sink_name=gcapture_drain
            load-module module-sine sink=gcapture_null frequency=440
            load-module module-remap-source master=gcapture_null.monitor source_name=gcapture_mic source_properties=device.description=GCaptureTestMicrophone
            load-module module-loopback source=gcapture_mic sink=gcapture_drain latency_msec=20
            set-default-source gcapture_mic

            """
        let scriptURL = folder.appendingPathComponent("default.pa")
        try script.write(to: scriptURL, atomically: true, encoding: .utf8)
        try launch()
        // Clients of this process (pulsesrc) find the server through the environment.
        setenv("PULSE_SERVER", address, 1)
    }

    /// Starts the daemon on the folder's script and socket; returns once it answers.
    private func launch() throws {
        let scriptURL = folder.appendingPathComponent("default.pa")
        let socket = folder.appendingPathComponent("native").path
        try? FileManager.default.removeItem(atPath: socket)
        try? FileManager.default.removeItem(at: folder.appendingPathComponent("run/pid"))
        // -n: no default script (it expects sound cards); runs as root as a normal per-user daemon. It
        // daemonizes, so no child of ours stays behind for Foundation's Process to track.
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = folder.path
        environment["XDG_RUNTIME_DIR"] = folder.appendingPathComponent("run").path
        environment["PULSE_RUNTIME_PATH"] = folder.appendingPathComponent("run").path
        environment["PULSE_STATE_PATH"] = folder.appendingPathComponent("state").path
        environment["PULSE_CONFIG_PATH"] = folder.appendingPathComponent("config").path
        // The launcher returns once the daemon runs; the daemon's output goes to its log, not to a pipe it
        // would hold open.
        _ = try ProgramRun.run("/usr/bin/pulseaudio",
                               ["-n", "-F", scriptURL.path, "--daemonize=yes", "--use-pid-file=yes", "--exit-idle-time=-1",
                                "--log-target=file:" + folder.appendingPathComponent("log").path],
                               environment: environment, timeout: 20, capturesOutput: false)
        let pidFile = folder.appendingPathComponent("run/pid")
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket) || pid == 0 {
            pid = (try? String(contentsOf: pidFile, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
            guard Date() < deadline else {
                stop()
                throw TestEnvironment.missing("the PulseAudio server did not start (see \(folder.path)/log)")
            }
            usleep(20_000)
        }
    }

    /// Starts the server again after kill(), at the same address, as a restarted audio server would be.
    func restart() throws {
        kill()
        try launch()
    }

    /// Ends the server at once, as a crash of the audio server would.
    func kill() {
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        pid = 0
    }

    func stop() {
        kill()
        unsetenv("PULSE_SERVER")
        try? FileManager.default.removeItem(at: folder)
    }

    deinit { stop() }
}
