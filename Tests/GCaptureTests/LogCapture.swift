import GCaptureSupport
import GStreamerKit
import Logging
import Synchronization

/// What the engine logged during the tests: the test process's one LoggingSystem bootstrap, which keeps
/// swift-log's default (info and up to stdout) and also records debug and up.
final class LogCapture: Sendable {
    struct Line: Sendable {
        var label: String
        var level: Logger.Level
        var message: String
    }

    static let shared: LogCapture = {
        let capture = LogCapture()
        LoggingSystem.bootstrap { label in
            MultiplexLogHandler([StreamLogHandler.standardOutput(label: label), Recorder(label: label, capture: capture)])
        }
        return capture
    }()

    private let lines = Locked<[Line]>([])

    func lines(label: String) -> [Line] { lines.withLock { $0.filter { $0.label == label } } }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Recorder: LogHandler {
        let label: String
        let capture: LogCapture
        var logLevel: Logger.Level = .debug
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
                 file: String, function: String, line: UInt) {
            capture.append(Line(label: label, level: level, message: message.description))
        }
    }
}
