import GStreamerKit

/// Process-wide facts and the end-of-process tidy-up.
public enum CaptureRuntime {
    public static let version = "0.1.0"

    /// The GStreamer version in use.
    public static var gstreamerVersion: String { GStreamer.version }

    /// Initializes GStreamer now rather than at the engine's first call that needs it; any number of times,
    /// from any thread.
    public static func initialize() { GStreamer.initialize() }

    /// Builds a gst-launch fragment as the engine would (unlinked pads ghosted) and drops it: throws the
    /// GStreamerError that says why it does not parse or names an element this machine lacks.
    public static func checkFragment(_ fragment: String) throws {
        GStreamer.initialize()
        _ = try Bin.parse(fragment, ghostUnlinkedPads: true)
    }

    /// Stops device monitoring and releases GStreamer, so `GST_TRACERS=leaks` can report what is still
    /// alive. Call last, after every session has stopped and been released; nothing may be used after it.
    public static func shutDownForLeakReport() {
        DeviceRegistry.shared.shutDown()
        GStreamer.deinitializeForLeakReport()
    }
}
