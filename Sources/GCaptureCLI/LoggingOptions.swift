import ArgumentParser
import GCapture
import GCaptureSupport
import Logging
import Synchronization

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--log-level`, shared by every subcommand: the engine's and GStreamer's log lines go to stderr from this
/// level on. Parsing it sets logging up, before the command runs and before any logger is made.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log to stderr from this level on, GStreamer's own log included.")
    var logLevel: Logger.Level = .warning

    func validate() throws { Self.bootstrap(logLevel) }

    private static let bootstrapped = Locked(false)

    /// LoggingSystem allows one bootstrap per process.
    static func bootstrap(_ level: Logger.Level) {
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        CaptureRuntime.bridgeGStreamerLog(level: level)
    }
}
