import CGst
import CGstShim
import GCaptureSupport
import Synchronization

/// Process-wide GStreamer set-up. Every wrapper in this module calls `GStreamer.initialize()` before its first
/// use, so callers only call it themselves to catch the (rare) failure early.
public enum GStreamer {
    private static let initialized = Locked<Bool>(false)

    /// Initializes GStreamer once per process. Safe to call from any thread, any number of times.
    public static func initialize() {
        initialized.withLock { done in
            guard !done else { return }
            CGstShim_v4l2_drain_on_stop()
            gst_init(nil, nil)
            done = true
        }
    }

    /// The runtime GStreamer version, e.g. "1.22.0".
    public static var version: String {
        initialize()
        var major: guint = 0, minor: guint = 0, micro: guint = 0, nano: guint = 0
        gst_version(&major, &minor, &micro, &nano)
        return "\(major).\(minor).\(micro)"
    }

    /// Whether v4l2 cameras drain their buffers when stopped instead of orphaning them: asked for when
    /// GStreamer is initialized (Sources/CGstShim/v4l2_drain.c), because 1.22's orphaning leaks the device's
    /// file descriptor and a camera that waits for its last one to close never comes back after an unplug.
    public static var v4l2DrainsOnStop: Bool {
        initialize()
        return CGstShim_v4l2_drains_on_stop() != 0
    }

    /// Releases GStreamer's global state. Only for programs that are about to exit and want the leak tracer
    /// (`GST_TRACERS=leaks`) to report: nothing GStreamer-related may be used afterwards.
    public static func deinitializeForLeakReport() {
        let wasInitialized = initialized.withLock { $0 }
        if wasInitialized { gst_deinit() }
    }

    /// Whether an element factory is installed (a plugin may be missing on a given machine).
    public static func hasElement(_ factoryName: String) -> Bool {
        elementClassification(factoryName) != nil
    }

    /// An installed factory's classification ("Sink/Video", "Filter/Converter/Video"), or nil when no element
    /// of that name is installed.
    public static func elementClassification(_ factoryName: String) -> String? {
        initialize()
        guard let factory = gst_element_factory_find(factoryName) else { return nil }
        defer { gst_object_unref(UnsafeMutableRawPointer(factory)) }
        return gst_element_factory_get_metadata(factory, "klass").map { String(cString: $0) } ?? ""
    }
}

/// Nanoseconds, as GStreamer counts time.
public typealias ClockTime = UInt

public extension ClockTime {
    static let second: ClockTime = 1_000_000_000
    static let millisecond: ClockTime = 1_000_000
    /// GST_CLOCK_TIME_NONE.
    static let none: ClockTime = .max
}
