import CGst
import CGstShim

/// A buffer kept after its probe returned, by a reference of its own: what a ring holds (encoded frames,
/// audio) until something wants it. Never written through; timestamps change only on the copies pushed.
public final class RetainedBuffer: @unchecked Sendable {
    // @unchecked Sendable: a reference to a GstBuffer nobody writes any more (its owner passed it on
    // downstream as read-only); GstMiniObject reference counting is atomic.
    let pointer: UnsafeMutablePointer<GstBuffer>

    init(retaining pointer: UnsafeMutablePointer<GstBuffer>) {
        self.pointer = gst_buffer_ref(pointer)
    }

    deinit { gst_buffer_unref(pointer) }

    public var presentationTime: ClockTime? { pointer.pointee.pts == ClockTime.none ? nil : pointer.pointee.pts }
    public var duration: ClockTime? { pointer.pointee.duration == ClockTime.none ? nil : pointer.pointee.duration }
    public var byteCount: Int { Int(gst_buffer_get_size(pointer)) }
    public var isDeltaFrame: Bool { pointer.pointee.mini_object.flags & GST_BUFFER_FLAG_DELTA_UNIT.rawValue != 0 }
}

extension Pad.ProbeInfo {
    /// A reference of its own to the passing buffer, which goes on downstream unchanged.
    public func retainBuffer() -> RetainedBuffer? {
        guard isBuffer, let data = raw.pointee.data else { return nil }
        return RetainedBuffer(retaining: UnsafeMutablePointer<GstBuffer>(OpaquePointer(data)))
    }
}

extension AppSource {
    /// Pushes a kept buffer without copying its memory: a new header sharing it, its presentation and decode
    /// times moved by `offset` (nanoseconds, either way), e.g. from its stream's time to running time.
    @discardableResult
    public func push(_ buffer: RetainedBuffer, movedBy offset: Int64) -> Bool {
        guard let header = gst_buffer_copy(buffer.pointer) else { return false }
        CGstShim_tsan_received(header)
        for time in [\GstBuffer.pts, \GstBuffer.dts] where header.pointee[keyPath: time] != ClockTime.none {
            let moved = Int64(clamping: header.pointee[keyPath: time]) + offset
            header.pointee[keyPath: time] = ClockTime(max(0, moved))
        }
        CGstShim_tsan_published(header)
        // gst_app_src_push_buffer takes the header's reference.
        return gst_app_src_push_buffer(reinterpret(element.pointer), header) == GST_FLOW_OK
    }

    /// Bytes queued inside the appsrc, not yet pushed downstream.
    public var queuedBytes: Int { Int(gst_app_src_get_current_level_bytes(reinterpret(element.pointer))) }
}
