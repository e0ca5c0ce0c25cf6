import CGst

// What branches that share one encoder need: whether an encoded frame can be decoded on its own (a branch
// joining a running encoder must begin with one), the frame's running time (an encoder may stamp its
// output in its own time domain, x264enc 1000 hours ahead, with a segment saying so), and how to ask the
// encoder for a key frame now.

extension Pad.ProbeInfo {
    /// Whether the passing buffer depends on earlier ones (GST_BUFFER_FLAG_DELTA_UNIT): not a key frame.
    public var isDeltaFrame: Bool {
        guard isBuffer, let data = raw.pointee.data else { return false }
        let buffer = UnsafeMutablePointer<GstBuffer>(OpaquePointer(data))
        return buffer.pointee.mini_object.flags & GST_BUFFER_FLAG_DELTA_UNIT.rawValue != 0
    }

    /// The passing buffer's presentation time as running time, through the segment in force on the pad;
    /// the PTS itself where the pad has no time segment.
    public var bufferRunningTime: ClockTime? {
        guard let pts = bufferPTS else { return nil }
        guard let pad, let event = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0) else { return pts }
        defer { gst_event_unref(event) }
        var segment: UnsafePointer<GstSegment>?
        gst_event_parse_segment(event, &segment)
        guard let segment, segment.pointee.format == GST_FORMAT_TIME else { return pts }
        let running = gst_segment_to_running_time(segment, GST_FORMAT_TIME, pts)
        return running == ClockTime.none ? nil : running
    }
}

extension Pad.ProbeInfo {
    /// Whether the passing event asks an encoder upstream for a key frame (a receiver's picture-loss report
    /// turned into GstForceKeyUnit by RTP's session).
    public var isKeyFrameRequest: Bool {
        guard raw.pointee.type.rawValue & GST_PAD_PROBE_TYPE_EVENT_UPSTREAM.rawValue != 0, let data = raw.pointee.data else { return false }
        return gst_video_event_is_force_key_unit(UnsafeMutablePointer<GstEvent>(OpaquePointer(data))) != 0
    }
}

extension Sample {
    /// Whether the sample's buffer depends on earlier ones (GST_BUFFER_FLAG_DELTA_UNIT): not a key frame.
    public var isDeltaFrame: Bool {
        guard let buffer = gst_sample_get_buffer(pointer) else { return false }
        return buffer.pointee.mini_object.flags & GST_BUFFER_FLAG_DELTA_UNIT.rawValue != 0
    }
}

extension Event {
    /// Asks an encoder upstream for a key frame as soon as it can, with its stream headers (SPS/PPS)
    /// before it: sent to the encoder element (or upstream from any pad below it).
    public static func keyFrameRequest() -> Event {
        GStreamer.initialize()
        return Event(adopting: gst_video_event_new_upstream_force_key_unit(ClockTime.none, 1, 0))
    }
}

extension Pad.ProbeInfo {
    /// Replaces a passing time segment that starts later than zero with one that starts at zero: what
    /// comes before the old start is then kept, not clipped, by the elements downstream. Every running
    /// time moves later by the old start, so tracks given the same segment stay together.
    public func extendSegmentToZero() {
        guard raw.pointee.type.rawValue & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM.rawValue != 0, let data = raw.pointee.data else { return }
        let event = UnsafeMutablePointer<GstEvent>(OpaquePointer(data))
        guard event.pointee.type == GST_EVENT_SEGMENT else { return }
        var parsed: UnsafePointer<GstSegment>?
        gst_event_parse_segment(event, &parsed)
        guard let parsed, parsed.pointee.format == GST_FORMAT_TIME, parsed.pointee.rate == 1, parsed.pointee.start > 0,
              parsed.pointee.time >= parsed.pointee.start else { return }
        var segment = parsed.pointee
        segment.time = parsed.pointee.time - parsed.pointee.start
        segment.position = 0
        segment.start = 0
        guard let replacement = gst_event_new_segment(&segment) else { return }
        gst_event_set_seqnum(replacement, gst_event_get_seqnum(event))
        gst_event_unref(event)
        raw.pointee.data = UnsafeMutableRawPointer(replacement)
    }
}
