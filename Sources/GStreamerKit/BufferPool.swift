import CGst

/// A GstBufferPool of same-sized buffers in system memory, reused from one buffer to the next. With a
/// maximum it is bounded like a camera's pool: once every buffer is out, `makeSample` fails rather than wait.
public final class BufferPool: @unchecked Sendable {
    // @unchecked Sendable: one reference to a GstBufferPool (thread-safe acquire and release) and its caps.
    private let pointer: UnsafeMutablePointer<GstBufferPool>
    private let caps: Caps

    public init(caps: Caps, bufferSize: Int, minimum: Int = 0, maximum: Int? = nil) throws {
        GStreamer.initialize()
        self.caps = caps
        pointer = gst_buffer_pool_new()
        gst_object_ref_sink(UnsafeMutableRawPointer(pointer))
        let config = gst_buffer_pool_get_config(pointer)
        gst_buffer_pool_config_set_params(config, caps.pointer, guint(bufferSize), guint(minimum), guint(maximum ?? 0))
        guard gst_buffer_pool_set_config(pointer, config) != 0, gst_buffer_pool_set_active(pointer, 1) != 0 else {
            gst_object_unref(UnsafeMutableRawPointer(pointer))
            throw GStreamerError(kind: .caps, message: "a pool of \(bufferSize)-byte buffers for \(caps) was refused")
        }
    }

    deinit {
        // Buffers still out are freed when they come back to the inactive pool.
        gst_buffer_pool_set_active(pointer, 0)
        gst_object_unref(UnsafeMutableRawPointer(pointer))
    }

    /// A buffer from the pool, written by `fill` and stamped with `presentationTime`; nil when none is free.
    public func makeSample(presentationTime: ClockTime?, fill: (UnsafeMutableRawBufferPointer) -> Void = { _ in }) -> Sample? {
        var buffer: UnsafeMutablePointer<GstBuffer>?
        var parameters = GstBufferPoolAcquireParams()
        parameters.flags = GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT
        guard gst_buffer_pool_acquire_buffer(pointer, &buffer, &parameters) == GST_FLOW_OK, let buffer else { return nil }
        return Sample(filling: buffer, caps: caps, presentationTime: presentationTime, fill: fill)
    }
}
