import CGst
import CGstShim
import Foundation
import GCaptureSupport
import Logging
import Synchronization

extension GStreamer {
    /// Sends GStreamer's own debug log to swift-log (label "gstreamer") instead of stderr, with GStreamer's
    /// threshold set from `level`, so one `--log-level` governs both. That log is a developer's: even its
    /// ERROR lines are often conditions that are handled (a device provider that finds no audio server),
    /// while what fails a capture arrives as bus messages, which the engine logs as warnings and errors. So
    /// its levels are taken one step down: ERROR as notice, WARNING as info, FIXME and INFO as debug, DEBUG
    /// and LOG as trace. With GST_DEBUG set, GStreamer keeps its own stderr log and nothing is bridged.
    /// Call after LoggingSystem.bootstrap.
    public static func bridgeDebugLog(level: Logger.Level) {
        initialize()
        DebugLogBridge.install(level: level)
    }
}

enum DebugLogBridge {
    /// Made at first use, so after the program's LoggingSystem.bootstrap.
    static let logger = Logger(label: "gstreamer")
    private static let installed = Locked(false)

    static func install(level: Logger.Level) {
        // GST_DEBUG asks GStreamer itself for its log, in its own format on stderr (tracers such as
        // GST_TRACERS=leaks report there): leave it alone.
        guard ProcessInfo.processInfo.environment["GST_DEBUG"] == nil else { return }
        let first = installed.withLock { done in
            defer { done = true }
            return !done
        }
        if first { CGstShim_log_bridge_install(sink) }
        gst_debug_set_default_threshold(threshold(for: level))
    }

    /// The most verbose GStreamer level whose lines still reach `level`.
    static func threshold(for level: Logger.Level) -> GstDebugLevel {
        switch level {
        case .trace: GST_LEVEL_DEBUG
        case .debug: GST_LEVEL_INFO
        case .info: GST_LEVEL_WARNING
        case .notice: GST_LEVEL_ERROR
        case .warning, .error, .critical: GST_LEVEL_NONE
        }
    }

    static func level(of gstLevel: Int32) -> Logger.Level {
        switch UInt32(gstLevel) {
        case GST_LEVEL_ERROR.rawValue: .notice
        case GST_LEVEL_WARNING.rawValue: .info
        case GST_LEVEL_FIXME.rawValue, GST_LEVEL_INFO.rawValue: .debug
        default: .trace
        }
    }

    private static let sink: CGstShim_log_sink = { level, category, file, line, object, message in
        guard let message else { return }
        var metadata: Logger.Metadata = ["category": .string(category.map { String(cString: $0) } ?? "")]
        if let object { metadata["object"] = .string(String(cString: object)) }
        DebugLogBridge.logger.log(level: DebugLogBridge.level(of: level), "\(String(cString: message))",
                                  metadata: metadata, source: "GStreamer",
                                  file: file.map { String(cString: $0) } ?? "", function: "", line: UInt(max(0, line)))
    }
}
