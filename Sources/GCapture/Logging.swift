import GStreamerKit
import Logging

/// The engine's loggers, one per subsystem, through swift-log: a program chooses where they go and at which
/// level with LoggingSystem.bootstrap (the gcapture CLI: `--log-level`).
enum Log {
    static let session = Logger(label: "gcapture.session")
    static let devices = Logger(label: "gcapture.devices")
    static let photo = Logger(label: "gcapture.photo")
    static let movie = Logger(label: "gcapture.movie")
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
