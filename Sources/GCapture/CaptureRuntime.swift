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
    /// A session let go of may still be held a moment by the last block its queue ran (the one that resumed
    /// `stop()`), and its graphs go only with it: this waits up to 2 s for every session to be gone, or the
    /// report would list a graph that was on its way out (seen in 3 runs of 20 of `gcapture frames`).
    public static func shutDownForLeakReport() async {
        let deadline = ContinuousClock.now + .seconds(2)
        while CaptureSession.alive.load(ordering: .acquiring) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        DeviceRegistry.shared.shutDown()
        GStreamer.deinitializeForLeakReport()
    }
}
