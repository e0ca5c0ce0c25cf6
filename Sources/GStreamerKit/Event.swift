import CGst

/// A GstEvent about to be sent; sending consumes it.
public final class Event: @unchecked Sendable {
    // @unchecked Sendable: its pointer is taken once, by the one thread that sends the event.
    private var pointer: UnsafeMutablePointer<GstEvent>?

    init(adopting pointer: UnsafeMutablePointer<GstEvent>) { self.pointer = pointer }
    deinit { if let pointer { gst_event_unref(pointer) } }

    public static func endOfStream() -> Event {
        GStreamer.initialize()
        return Event(adopting: gst_event_new_eos())
    }

    /// Hands the reference over to GStreamer (the event can be sent once).
    func take() -> UnsafeMutablePointer<GstEvent> {
        guard let event = pointer else { preconditionFailure("an Event can be sent only once") }
        pointer = nil
        return event
    }
}

/// The kind of an event seen in a probe.
public enum EventType: Sendable, Equatable {
    case endOfStream, caps, segment, streamStart, flushStart, flushStop, reconfigure, other(String)

    init(_ raw: GstEventType) {
        switch raw {
        case GST_EVENT_EOS: self = .endOfStream
        case GST_EVENT_CAPS: self = .caps
        case GST_EVENT_SEGMENT: self = .segment
        case GST_EVENT_STREAM_START: self = .streamStart
        case GST_EVENT_FLUSH_START: self = .flushStart
        case GST_EVENT_FLUSH_STOP: self = .flushStop
        case GST_EVENT_RECONFIGURE: self = .reconfigure
        default: self = .other(String(cString: gst_event_type_get_name(raw)))
        }
    }
}
