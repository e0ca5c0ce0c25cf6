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

    /// One frame handed to a mapped-frame handler: its bytes, mapped for reading, and its layout. Valid only
    /// during the call.
    public struct MappedFrame {
        public let bytes: UnsafeRawBufferPointer
        /// Presentation timestamp in running time, if the buffer has one.
        public let presentationTime: ClockTime?
        public let layout: VideoInfo
    }

    private final class FrameCallbackBox {
        let onFrame: @Sendable (MappedFrame) -> Void
        let layoutCache: VideoInfoCache
        init(_ onFrame: @escaping @Sendable (MappedFrame) -> Void, _ layoutCache: VideoInfoCache) {
            self.onFrame = onFrame
            self.layoutCache = layoutCache
        }
    }

    /// Like `setSampleHandler`, for code that reads each frame where it lies and keeps nothing of it (an
    /// analysis): the frame is mapped for the call and let go right after, with no Sample made for it, so a
    /// steady stream of frames costs no allocation. Frames whose caps are not video are skipped; the layout
    /// is parsed once per caps through `layoutCache`.
    public func setMappedFrameHandler(layoutCache: VideoInfoCache, _ onFrame: @escaping @Sendable (MappedFrame) -> Void) {
        var callbacks = GstAppSinkCallbacks()
        callbacks.new_sample = { sink, userData in
            guard let sink, let userData else { return GST_FLOW_ERROR }
            guard let sample = gst_app_sink_pull_sample(sink) else { return GST_FLOW_EOS }
            defer { gst_sample_unref(sample) }
            CGstShim_tsan_received(userData)
            let box = Unmanaged<FrameCallbackBox>.fromOpaque(userData).takeUnretainedValue()
            guard let buffer = gst_sample_get_buffer(sample), let caps = gst_sample_get_caps(sample),
                  let layout = box.layoutCache.entry(forCaps: caps)?.info else { return GST_FLOW_OK }
            CGstShim_tsan_received(buffer)
            var map = GstMapInfo()
            guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return GST_FLOW_OK }
            let pts = buffer.pointee.pts
            box.onFrame(MappedFrame(bytes: UnsafeRawBufferPointer(start: map.data, count: Int(map.size)),
                                    presentationTime: pts == ClockTime.none ? nil : pts, layout: layout))
            gst_buffer_unmap(buffer, &map)
            // What the handler read of it comes before whoever makes it (or its reused memory) writable.
            CGstShim_tsan_published(buffer)
            return GST_FLOW_OK
        }
        let box = Unmanaged.passRetained(FrameCallbackBox(onFrame, layoutCache)).toOpaque()
        // The streaming thread gets the handler through appsink's lock, which TSan cannot see.
        CGstShim_tsan_published(box)
        gst_app_sink_set_callbacks(appSink, &callbacks, box, { userData in
            if let userData { Unmanaged<FrameCallbackBox>.fromOpaque(userData).release() }
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
