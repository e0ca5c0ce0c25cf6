import CGst

/// A source pad owned by Swift, feeding an element's sink pad: `push` runs the elements downstream on the
/// calling thread, and when it returns they have done their work. Unlike appsrc, which queues the buffer
/// for a streaming thread of its own, there is no hand-off between threads. Pushes must not overlap.
public final class SourcePad: @unchecked Sendable {
    // @unchecked Sendable: `currentCaps` changes only in `push`, and pushes must not overlap (the caller's
    // contract, kept by the photo encoder's lock).
    private let pad: Pad
    private let peer: Pad
    private var currentCaps: Caps?

    /// Links a new pad to `element`'s static pad `sinkPad`. The element's pipeline should be PLAYING
    /// before the first push (with its sinks async=false: a sink waiting for preroll blocks the push).
    public init(feeding element: Element, sinkPad: String = "sink") throws {
        GStreamer.initialize()
        guard let peer = element.staticPad(sinkPad) else {
            throw GStreamerError(kind: .link, message: "\(element) has no pad '\(sinkPad)'")
        }
        guard let raw = gst_pad_new("src", GST_PAD_SRC) else {
            throw GStreamerError(kind: .link, message: "cannot make a source pad")
        }
        gst_object_ref_sink(UnsafeMutableRawPointer(raw))
        pad = Pad(adopting: raw)
        self.peer = peer
        try pad.link(to: peer)
        gst_pad_set_active(raw, 1)
        let streamID = "swift-source-pad-\(UInt(bitPattern: UnsafeRawPointer(raw).hashValue))"
        gst_pad_push_event(raw, gst_event_new_stream_start(streamID))
    }

    deinit {
        gst_pad_set_active(pad.pointer, 0)
        pad.unlink(from: peer)
    }

    /// Pushes the sample's buffer by reference (no copy) and returns once the elements downstream are done
    /// with it; its caps are announced first when they differ from the last ones.
    @discardableResult
    public func push(_ sample: Sample) -> Bool {
        guard let caps = sample.caps, let buffer = gst_sample_get_buffer(sample.pointer) else { return false }
        if currentCaps != caps {
            guard gst_pad_push_event(pad.pointer, gst_event_new_caps(caps.pointer)) != 0 else { return false }
            if currentCaps == nil {
                var segment = GstSegment()
                gst_segment_init(&segment, GST_FORMAT_TIME)
                guard gst_pad_push_event(pad.pointer, gst_event_new_segment(&segment)) != 0 else { return false }
            }
            currentCaps = caps
        }
        // gst_pad_push takes a reference: the sample keeps its own.
        return gst_pad_push(pad.pointer, gst_buffer_ref(buffer)) == GST_FLOW_OK
    }
}
