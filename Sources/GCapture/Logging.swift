import GStreamerKit
import Logging

/// The engine's loggers, one per subsystem, through swift-log: a program chooses where they go and at which
/// level with LoggingSystem.bootstrap (the gcapture CLI: `--log-level`). Made at each use, not kept: the
/// engine logs seldom, and a logger made before the program's bootstrap would ignore it for good.
enum Log {
    static var session: Logger { Logger(label: "gcapture.session") }
    static var devices: Logger { Logger(label: "gcapture.devices") }
    static var photo: Logger { Logger(label: "gcapture.photo") }
    static var movie: Logger { Logger(label: "gcapture.movie") }
}

extension CaptureRuntime {
    /// Sends GStreamer's own debug log (label "gstreamer") through swift-log from now on, at `level` and
    /// above, instead of GStreamer's stderr writer. Call once, after LoggingSystem.bootstrap.
    public static func bridgeGStreamerLog(level: Logger.Level) {
        GStreamer.bridgeDebugLog(level: level)
    }
}

extension GStreamerError {
    /// Metadata that places a bus message in the graph, for a log line.
    var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["domain": .string(domain), "code": .stringConvertible(code)]
        if let sourcePath { metadata["element"] = .string(sourcePath) }
        if let debug { metadata["debug"] = .string(debug) }
        return metadata
    }
}
