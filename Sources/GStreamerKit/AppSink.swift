import CGst
import CGstShim

/// An appsink element: where frames leave GStreamer for Swift.
public final class AppSink: @unchecked Sendable {
    // @unchecked Sendable: a let of an Element; appsink's pull API is thread-safe.
    public let element: Element
    private var appSink: UnsafeMutablePointer<GstAppSink> { reinterpret(element.pointer) }

    public init(name: String? = nil) throws {
        element = try Element.make("appsink", name: name)
    }

    /// Wraps an appsink found inside a parsed bin.
    public init?(_ element: Element) {
        guard element.factoryName == "appsink" else { return nil }
        self.element = element
    }

    private final class CallbackBox {
        let onSample: @Sendable (Sample) -> Void
        let onEndOfStream: (@Sendable () -> Void)?
        init(_ onSample: @escaping @Sendable (Sample) -> Void, _ onEndOfStream: (@Sendable () -> Void)?) {
            self.onSample = onSample
            self.onEndOfStream = onEndOfStream
        }
    }

    /// Calls `onSample` on the streaming thread for every new sample (it must not block for long: the
    /// branch's queue absorbs short stalls). Replaces signal emission, which costs more.
    public func setSampleHandler(_ onSample: @escaping @Sendable (Sample) -> Void,
                                 onEndOfStream: (@Sendable () -> Void)? = nil) {
        var callbacks = GstAppSinkCallbacks()
        callbacks.new_sample = { sink, userData in
            guard let sink, let userData else { return GST_FLOW_ERROR }
            guard let sample = gst_app_sink_pull_sample(sink) else { return GST_FLOW_EOS }
            CGstShim_tsan_received(userData)
            if let buffer = gst_sample_get_buffer(sample) { CGstShim_tsan_received(buffer) }
            Unmanaged<CallbackBox>.fromOpaque(userData).takeUnretainedValue().onSample(Sample(adopting: sample))
            return GST_FLOW_OK
        }
        callbacks.eos = { _, userData in
            guard let userData else { return }
            CGstShim_tsan_received(userData)
            Unmanaged<CallbackBox>.fromOpaque(userData).takeUnretainedValue().onEndOfStream?()
        }
        let box = Unmanaged.passRetained(CallbackBox(onSample, onEndOfStream)).toOpaque()
        // The streaming thread gets the handler through appsink's lock, which TSan cannot see.
        CGstShim_tsan_published(box)
        gst_app_sink_set_callbacks(appSink, &callbacks, box, { userData in
            if let userData { Unmanaged<CallbackBox>.fromOpaque(userData).release() }
        })
    }

    /// Pulls a sample, waiting up to `timeout` (for sinks without a handler).
    public func pullSample(timeout: ClockTime) -> Sample? {
        gst_app_sink_try_pull_sample(appSink, timeout).map { sample in
            if let buffer = gst_sample_get_buffer(sample) { CGstShim_tsan_received(buffer) }
            return Sample(adopting: sample)
        }
    }
}
