import CGst
import CGstShim

/// A bus message, decoded on the posting thread into a Sendable value.
public struct Message: Sendable {
    public enum Kind: Sendable {
        case endOfStream
        case error(GStreamerError)
        case warning(GStreamerError)
        case stateChanged(old: ElementState, new: ElementState, pending: ElementState)
        case asyncDone
        case streamStart
        case latency
        case clockLost
        /// An element dropped or was late with buffers (a sink behind the clock, a leaky queue...).
        case qos(QualityOfService)
        /// An application/element message, by structure name.
        case element(CapsStructure?)
        case deviceAdded(Device)
        case deviceRemoved(Device)
        case other(String)
    }

    public let kind: Kind
    /// Path of the posting object ("/GstPipeline:session/GstBin:branch-1/GstQueue:queue0").
    public let sourcePath: String?

    /// Whether the message was posted by `path` or by something inside it.
    public func isFrom(inside path: String) -> Bool {
        guard let sourcePath else { return false }
        return sourcePath == path || sourcePath.hasPrefix(path + "/")
    }

    init(_ message: UnsafeMutablePointer<GstMessage>) {
        sourcePath = objectPath(message.pointee.src)
        switch message.pointee.type {
        case GST_MESSAGE_EOS:
            kind = .endOfStream
        case GST_MESSAGE_ERROR, GST_MESSAGE_WARNING:
            var error: UnsafeMutablePointer<GError>?
            var debug: UnsafeMutablePointer<gchar>?
            let isError = message.pointee.type == GST_MESSAGE_ERROR
            if isError { gst_message_parse_error(message, &error, &debug) }
            else { gst_message_parse_warning(message, &error, &debug) }
            let value: GStreamerError
            if let error {
                value = GStreamerError(consuming: error, debug: takeString(debug), sourcePath: sourcePath)
            } else {
                value = GStreamerError(kind: .gError, message: "unknown error", debug: takeString(debug),
                                       sourcePath: sourcePath)
            }
            kind = isError ? .error(value) : .warning(value)
        case GST_MESSAGE_STATE_CHANGED:
            var old = GST_STATE_VOID_PENDING, new = GST_STATE_VOID_PENDING, pending = GST_STATE_VOID_PENDING
            gst_message_parse_state_changed(message, &old, &new, &pending)
            kind = .stateChanged(old: ElementState(old), new: ElementState(new), pending: ElementState(pending))
        case GST_MESSAGE_ASYNC_DONE: kind = .asyncDone
        case GST_MESSAGE_STREAM_START: kind = .streamStart
        case GST_MESSAGE_LATENCY: kind = .latency
        case GST_MESSAGE_CLOCK_LOST: kind = .clockLost
        case GST_MESSAGE_QOS: kind = .qos(QualityOfService(message))
        case GST_MESSAGE_ELEMENT, GST_MESSAGE_APPLICATION:
            kind = .element(gst_message_get_structure(message).map { CapsStructure($0, features: nil) })
        case GST_MESSAGE_DEVICE_ADDED, GST_MESSAGE_DEVICE_REMOVED:
            var device: UnsafeMutablePointer<GstDevice>?
            if message.pointee.type == GST_MESSAGE_DEVICE_ADDED { gst_message_parse_device_added(message, &device) }
            else { gst_message_parse_device_removed(message, &device) }
            if let device {
                let wrapped = Device(adopting: device)
                kind = message.pointee.type == GST_MESSAGE_DEVICE_ADDED ? .deviceAdded(wrapped) : .deviceRemoved(wrapped)
            } else {
                kind = .other("device")
            }
        default:
            kind = .other(String(cString: gst_message_type_get_name(message.pointee.type)))
        }
    }
}

/// What a QoS message says: how late the element is and what it has processed and dropped so far.
public struct QualityOfService: Sendable {
    public var isLive: Bool
    /// Running time of the buffer concerned, in nanoseconds.
    public var runningTime: ClockTime
    /// How late (positive) or early the buffer was, in nanoseconds.
    public var jitter: Int64
    /// Buffers (or samples, per `format`) the element has processed and dropped since it started.
    public var processed: UInt64
    public var dropped: UInt64

    init(_ message: UnsafeMutablePointer<GstMessage>) {
        var live: gboolean = 0
        var runningTime: guint64 = 0, streamTime: guint64 = 0, timestamp: guint64 = 0, duration: guint64 = 0
        gst_message_parse_qos(message, &live, &runningTime, &streamTime, &timestamp, &duration)
        var jitter: gint64 = 0, proportion: Double = 0
        var quality: Int32 = 0
        gst_message_parse_qos_values(message, &jitter, &proportion, &quality)
        var format = GST_FORMAT_UNDEFINED
        var processed: guint64 = 0, dropped: guint64 = 0
        gst_message_parse_qos_stats(message, &format, &processed, &dropped)
        isLive = live != 0
        self.runningTime = ClockTime(runningTime)
        self.jitter = Int64(jitter)
        // -1 means "unknown" in GStreamer's counters.
        self.processed = processed == .max ? 0 : UInt64(processed)
        self.dropped = dropped == .max ? 0 : UInt64(dropped)
    }
}

/// The kinds of message a bus handler is given. The others are dropped before any Swift runs: each message
/// decoded costs its posting thread its object path and a Swift value, and a state change posts one message
/// per element, on the thread changing the state (for a session, between start() and its first frame).
public struct MessageFilter: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let endOfStream = MessageFilter(rawValue: bits(GST_MESSAGE_EOS))
    public static let error = MessageFilter(rawValue: bits(GST_MESSAGE_ERROR))
    public static let warning = MessageFilter(rawValue: bits(GST_MESSAGE_WARNING))
    public static let stateChanged = MessageFilter(rawValue: bits(GST_MESSAGE_STATE_CHANGED))
    public static let qos = MessageFilter(rawValue: bits(GST_MESSAGE_QOS))
    public static let element = MessageFilter(rawValue: bits(GST_MESSAGE_ELEMENT) | bits(GST_MESSAGE_APPLICATION))
    /// Device added and removed: GStreamer's extended messages, which are numbered, not flags.
    public static let devices = MessageFilter(rawValue: bits(GST_MESSAGE_EXTENDED))
    public static let all = MessageFilter(rawValue: UInt32.max)

    func admits(_ type: GstMessageType) -> Bool {
        let extended = Self.bits(GST_MESSAGE_EXTENDED), type = Self.bits(type)
        return type & extended != 0 ? rawValue & extended != 0 : rawValue & type != 0
    }

    private static func bits(_ type: GstMessageType) -> UInt32 { UInt32(bitPattern: type.rawValue) }
}

/// A pipeline's or monitor's bus.
public final class Bus: @unchecked Sendable {
    // @unchecked Sendable: one reference to a GstBus; GstBus is thread-safe (messages are posted from
    // streaming threads by design).
    let pointer: UnsafeMutablePointer<GstBus>

    init(adopting pointer: UnsafeMutablePointer<GstBus>) { self.pointer = pointer }
    deinit {
        gst_bus_set_sync_handler(pointer, nil, nil, nil)
        gst_object_unref(UnsafeMutableRawPointer(pointer))
    }

    private final class HandlerBox {
        let filter: MessageFilter
        let handler: @Sendable (Message) -> Void
        init(_ filter: MessageFilter, _ handler: @escaping @Sendable (Message) -> Void) {
            self.filter = filter
            self.handler = handler
        }
    }

    /// Delivers the messages `filter` admits to `handler` on the thread that posts them (a streaming thread,
    /// often), and drops the others: the handler must not block and must not change the pipeline's state.
    /// Replaces any previous handler.
    public func setHandler(for filter: MessageFilter = .all, _ handler: @escaping @Sendable (Message) -> Void) {
        gst_bus_set_sync_handler(pointer, nil, nil, nil)
        let box = Unmanaged.passRetained(HandlerBox(filter, handler)).toOpaque()
        // The posting thread gets the handler through the bus's lock, which TSan cannot see.
        CGstShim_tsan_published(box)
        gst_bus_set_sync_handler(pointer, { _, message, userData in
            guard let message else { return GST_BUS_DROP }
            if let userData {
                CGstShim_tsan_received(userData)
                let box = Unmanaged<HandlerBox>.fromOpaque(userData).takeUnretainedValue()
                if box.filter.admits(message.pointee.type) { box.handler(Message(message)) }
            }
            // GST_BUS_DROP means we own the message.
            gst_message_unref(message)
            return GST_BUS_DROP
        }, box, { userData in
            if let userData { Unmanaged<HandlerBox>.fromOpaque(userData).release() }
        })
    }

    public func removeHandler() { gst_bus_set_sync_handler(pointer, nil, nil, nil) }

    /// Messages as an AsyncStream (installs a handler; finishing the stream removes nothing else).
    public func messages() -> AsyncStream<Message> {
        let (stream, continuation) = AsyncStream<Message>.makeStream()
        setHandler { continuation.yield($0) }
        return stream
    }

    /// Waits up to `timeout` for the next message (only when no handler is installed).
    public func pop(timeout: ClockTime) -> Message? {
        guard let message = gst_bus_timed_pop(pointer, timeout) else { return nil }
        defer { gst_message_unref(message) }
        return Message(message)
    }
}
