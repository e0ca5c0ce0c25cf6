import CGst
import CGstShim

/// An appsrc element: where Swift hands buffers to GStreamer.
public final class AppSource: @unchecked Sendable {
    // @unchecked Sendable: a let of an Element; appsrc's push API is thread-safe.
    public let element: Element
    private var appSource: UnsafeMutablePointer<GstAppSrc> { reinterpret(element.pointer) }

    /// Wraps an appsrc found inside a parsed bin.
    public init?(_ element: Element) {
        guard element.factoryName == "appsrc" else { return nil }
        self.element = element
    }

    public func setCaps(_ caps: Caps) { gst_app_src_set_caps(appSource, caps.pointer) }

    /// Copies `bytes` into a new buffer stamped with `presentationTime` (and `duration`) and pushes it.
    @discardableResult
    public func push(copying bytes: UnsafeRawBufferPointer, presentationTime: ClockTime? = nil, duration: ClockTime? = nil) -> Bool {
        guard let buffer = gst_buffer_new_allocate(nil, gsize(bytes.count), nil) else { return false }
        if let base = bytes.baseAddress { gst_buffer_fill(buffer, 0, base, gsize(bytes.count)) }
        stamp(buffer, presentationTime, duration: duration)
        // gst_app_src_push_buffer takes the buffer's reference.
        return gst_app_src_push_buffer(appSource, buffer) == GST_FLOW_OK
    }

    /// Pushes the sample's frame without copying its memory: a new buffer header sharing it, restamped.
    @discardableResult
    public func push(sharing sample: Sample, presentationTime: ClockTime? = nil) -> Bool {
        guard let buffer = gst_sample_get_buffer(sample.pointer), let header = gst_buffer_copy(buffer) else { return false }
        stamp(header, presentationTime)
        return gst_app_src_push_buffer(appSource, header) == GST_FLOW_OK
    }

    /// Pushes the sample's buffer, sharing its memory, into a live appsrc that stamps what arrives with its own
    /// pipeline's running time (do-timestamp=true): the buffer's own times, of another pipeline's clock, are
    /// cleared. The sample's caps become the appsrc's when they change.
    @discardableResult
    public func pushForRestamping(_ sample: Sample) -> Bool {
        guard let buffer = gst_sample_get_buffer(sample.pointer), let header = gst_buffer_copy(buffer) else { return false }
        if let caps = gst_sample_get_caps(sample.pointer) {
            let current = gst_app_src_get_caps(appSource)
            if current != caps, current.map({ gst_caps_is_equal($0, caps) == 0 }) ?? true { gst_app_src_set_caps(appSource, caps) }
            if let current { gst_caps_unref(current) }
        }
        CGstShim_tsan_received(header)
        header.pointee.pts = ClockTime.none
        header.pointee.dts = ClockTime.none
        CGstShim_tsan_published(header)
        return gst_app_src_push_buffer(appSource, header) == GST_FLOW_OK
    }

    public func endOfStream() { gst_app_src_end_of_stream(appSource) }

    /// Writes a new buffer's timestamp. Its memory may have held another buffer, and appsrc's streaming thread
    /// reads it next: both hand-offs go through GLib, which TSan cannot see.
    private func stamp(_ buffer: UnsafeMutablePointer<GstBuffer>, _ presentationTime: ClockTime?, duration: ClockTime? = nil) {
        CGstShim_tsan_received(buffer)
        buffer.pointee.pts = presentationTime ?? ClockTime.none
        if let duration { buffer.pointee.duration = duration }
        CGstShim_tsan_published(buffer)
    }
}
