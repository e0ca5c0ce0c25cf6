import CGst
import CGstShim

// GStreamer's own mark for media-neutral data made to fill a gap (GST_BUFFER_FLAG_GAP): black frames or
// silence standing in for a device that stopped. Whoever fills a gap marks its buffers so; consumers that
// must not take them for captured media (a photo, a file that should end at the gap) can tell them apart
// on any thread, without asking who made them.

extension Pad.ProbeInfo {
    /// Whether the passing buffer stands in for missing media (GST_BUFFER_FLAG_GAP).
    public var isGapBuffer: Bool {
        guard isBuffer, let data = raw.pointee.data else { return false }
        let buffer = UnsafeMutablePointer<GstBuffer>(OpaquePointer(data))
        return buffer.pointee.mini_object.flags & GST_BUFFER_FLAG_GAP.rawValue != 0
    }

    /// Marks the passing buffer as filler (making it writable first).
    public func markBufferAsGap() {
        guard isBuffer, let buffer = CGstShim_probe_info_writable_buffer(raw) else { return }
        buffer.pointee.mini_object.flags |= GST_BUFFER_FLAG_GAP.rawValue
        CGstShim_tsan_published(buffer)
    }

    /// Whether the probe's pad is linked to a peer now. An event reaching an unlinked sink pad was sent
    /// into it directly (gst_pad_send_event), not pushed by an upstream element.
    public var isPadLinked: Bool {
        guard let pad else { return false }
        return gst_pad_is_linked(pad) != 0
    }
}

extension Sample {
    /// Whether the frame stands in for missing media (GST_BUFFER_FLAG_GAP).
    public var isGap: Bool {
        guard let buffer = gst_sample_get_buffer(pointer) else { return false }
        return buffer.pointee.mini_object.flags & GST_BUFFER_FLAG_GAP.rawValue != 0
    }
}
