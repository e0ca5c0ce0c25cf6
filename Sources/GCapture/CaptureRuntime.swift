import GStreamerKit

/// Process-wide facts and the end-of-process tidy-up.
public enum CaptureRuntime {
    public static let version = "0.1.0"

    /// The GStreamer version in use.
    public static var gstreamerVersion: String { GStreamer.version }

    /// Stops device monitoring and releases GStreamer, so `GST_TRACERS=leaks` can report what is still
    /// alive. Call last, after every session has stopped and been released; nothing may be used after it.
    public static func shutDownForLeakReport() {
        DeviceRegistry.shared.shutDown()
        GStreamer.deinitializeForLeakReport()
    }
}
