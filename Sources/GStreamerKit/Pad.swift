import CGst
import CGstShim

/// An owned reference to a GstPad.
public final class Pad: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked Sendable: one reference to a GstPad, which GStreamer lets any thread use (atomic refcount,
    // the object lock inside).
    package let pointer: UnsafeMutablePointer<GstPad>

    init(adopting pointer: UnsafeMutablePointer<GstPad>) { self.pointer = pointer }
    convenience init(retaining pointer: UnsafeMutablePointer<GstPad>) {
        gst_object_ref(UnsafeMutableRawPointer(pointer))
        self.init(adopting: pointer)
    }
    deinit { gst_object_unref(UnsafeMutableRawPointer(pointer)) }

    public static func == (a: Pad, b: Pad) -> Bool { a.pointer == b.pointer }
    public func hash(into hasher: inout Hasher) { hasher.combine(pointer) }

    public var name: String { takeString(gst_object_get_name(asObject(pointer))) ?? "" }
    public var description: String { objectPath(asObject(pointer)) ?? name }

    public var peer: Pad? { gst_pad_get_peer(pointer).map { Pad(adopting: $0) } }
    public var isLinked: Bool { gst_pad_is_linked(pointer) != 0 }

    /// The element that owns this pad.
    public var parentElement: Element? {
        gst_pad_get_parent_element(pointer).map { Element(adopting: $0) }
    }

    public var currentCaps: Caps? { gst_pad_get_current_caps(pointer).map { Caps(adopting: $0) } }

    /// Every format the pad could take now (a CAPS query, unfiltered): a source opens and probes its device for it.
    public func queryCaps() -> Caps? { gst_pad_query_caps(pointer, nil).map { Caps(adopting: $0) } }

    /// Whether the pad would take `caps` (an ACCEPT_CAPS query).
    public func accepts(_ caps: Caps) -> Bool { gst_pad_query_accept_caps(pointer, caps.pointer) != 0 }

    public func link(to sink: Pad) throws {
        try check(gst_pad_link(pointer, sink.pointer), linkingTo: sink)
    }

    /// Links a source pad whose caps are already negotiated and pinned, as they are: no caps query of either side
    /// (each walks everything behind the pad: through a tee, every branch) and no RECONFIGURE event sent upstream,
    /// which would make the source negotiate all over again (v4l2src: STREAMOFF, a new buffer pool, STREAMON) right
    /// after its first buffer. Caps the peer refuses fail the first buffer (not-negotiated) instead of the link.
    public func linkAsNegotiated(to sink: Pad) throws {
        let checks = GST_PAD_LINK_CHECK_HIERARCHY.rawValue | GST_PAD_LINK_CHECK_NO_RECONFIGURE.rawValue
        try check(gst_pad_link_full(pointer, sink.pointer, GstPadLinkCheck(rawValue: checks)), linkingTo: sink)
    }

    private func check(_ result: GstPadLinkReturn, linkingTo sink: Pad) throws {
        guard result == GST_PAD_LINK_OK else {
            let reason = String(cString: gst_pad_link_get_name(result))
            throw GStreamerError(kind: .link, message: "cannot link \(self) to \(sink): \(reason)")
        }
    }

    @discardableResult
    public func unlink(from sink: Pad) -> Bool { gst_pad_unlink(pointer, sink.pointer) != 0 }

    @discardableResult
    public func send(_ event: Event) -> Bool { gst_pad_send_event(pointer, event.take()) != 0 }

    /// Shifts the running time of everything passing this pad (negative: earlier). Muxers see timestamps
    /// from the offset on; sticky events are sent again with it.
    public var offset: Int64 {
        get { Int64(gst_pad_get_offset(pointer)) }
        set { gst_pad_set_offset(pointer, gint64(newValue)) }
    }

    // MARK: Probes

    /// What a probe sees.
    public struct ProbeInfo {
        let raw: UnsafeMutablePointer<GstPadProbeInfo>
        /// The pad the probe is on (not retained: it outlives every call of its probes).
        var pad: UnsafeMutablePointer<GstPad>? = nil

        public var isBuffer: Bool { raw.pointee.type.rawValue & GST_PAD_PROBE_TYPE_BUFFER.rawValue != 0 }
        public var isIdle: Bool { raw.pointee.type.rawValue & GST_PAD_PROBE_TYPE_IDLE.rawValue != 0 }

        public var eventType: EventType? {
            guard raw.pointee.type.rawValue & GST_PAD_PROBE_TYPE_EVENT_BOTH.rawValue != 0,
                  let data = raw.pointee.data else { return nil }
            return EventType(UnsafeMutablePointer<GstEvent>(OpaquePointer(data)).pointee.type)
        }

        /// Whether the passing query is serialized with the data (an allocation query, a drain): it is
        /// answered only after every buffer sent before it has been handled downstream.
        public var isSerializedQuery: Bool {
            guard raw.pointee.type.rawValue & GST_PAD_PROBE_TYPE_QUERY_BOTH.rawValue != 0, let data = raw.pointee.data else { return false }
            let query = UnsafeMutablePointer<GstQuery>(OpaquePointer(data))
            return query.pointee.type.rawValue & GST_QUERY_TYPE_SERIALIZED.rawValue != 0
        }

        /// The caps a passing caps event carries.
        public var eventCaps: Caps? {
            guard eventType == .caps, let data = raw.pointee.data else { return nil }
            var caps: UnsafeMutablePointer<GstCaps>?
            gst_event_parse_caps(UnsafeMutablePointer<GstEvent>(OpaquePointer(data)), &caps)
            return caps.map { Caps(retaining: $0) }
        }

        /// Presentation time of the buffer passing, if any.
        public var bufferPTS: ClockTime? {
            guard isBuffer, let data = raw.pointee.data else { return nil }
            let pts = UnsafeMutablePointer<GstBuffer>(OpaquePointer(data)).pointee.pts
            return pts == ClockTime.none ? nil : pts
        }

        /// The clock time at which the passing buffer's presentation time falls (the pad's element's base
        /// time plus the PTS): on the pipeline's clock, not the stream's running time.
        public var bufferClockTime: ClockTime? {
            guard let pts = bufferPTS, let pad, let element = gst_pad_get_parent_element(pad) else { return nil }
            defer { gst_object_unref(UnsafeMutableRawPointer(element)) }
            return gst_element_get_base_time(element) + pts
        }

        public var bufferDuration: ClockTime? {
            guard isBuffer, let data = raw.pointee.data else { return nil }
            let duration = UnsafeMutablePointer<GstBuffer>(OpaquePointer(data)).pointee.duration
            return duration == ClockTime.none ? nil : duration
        }

        /// Bytes in the buffer passing, if any.
        public var bufferSize: Int? {
            guard isBuffer, let data = raw.pointee.data else { return nil }
            return Int(gst_buffer_get_size(UnsafeMutablePointer<GstBuffer>(OpaquePointer(data))))
        }

        /// Moves the passing buffer's timestamps earlier by `amount` (making it writable first), after moving them
        /// `later` first: how a recording's timeline starts at zero, skips its pauses, and puts a frame a moment
        /// after the one before.
        public func shiftBufferTimestamps(earlierBy amount: ClockTime, later: ClockTime = 0) {
            guard isBuffer, let buffer = CGstShim_probe_info_writable_buffer(raw) else { return }
            func shifted(_ time: ClockTime) -> ClockTime {
                time == ClockTime.none ? time : time + later >= amount ? time + later - amount : 0
            }
            buffer.pointee.pts = shifted(buffer.pointee.pts)
            buffer.pointee.dts = shifted(buffer.pointee.dts)
            CGstShim_tsan_published(buffer)
        }

        /// Gives the passing buffer new timestamps (making it writable first): how a timelapse puts the frames
        /// it keeps one frame apart, whatever time they were captured at. A decoding time, when it has one,
        /// becomes the new presentation time (raw frames are decoded in the order they come).
        public func setBufferTimestamps(pts: ClockTime, duration: ClockTime) {
            guard isBuffer, let buffer = CGstShim_probe_info_writable_buffer(raw) else { return }
            buffer.pointee.pts = pts
            if buffer.pointee.dts != ClockTime.none { buffer.pointee.dts = pts }
            buffer.pointee.duration = duration
            CGstShim_tsan_published(buffer)
        }

        /// Cuts the first `amount` of time off the passing raw-audio buffer (making it writable first): its bytes
        /// in proportion to its duration, whole frames of `frameBytes` each, and its start moved as much later.
        /// How audio captured across a cut starts exactly at it.
        public func trimBufferStart(by amount: ClockTime, frameBytes: Int) {
            guard isBuffer, let buffer = CGstShim_probe_info_writable_buffer(raw) else { return }
            let size = Int(gst_buffer_get_size(buffer)), duration: ClockTime = buffer.pointee.duration
            guard duration != ClockTime.none, duration > 0, amount > 0, amount < duration, frameBytes > 0 else { return }
            let proportional = Double(size) * Double(amount) / Double(duration)
            let bytes = Int(proportional) / frameBytes * frameBytes
            guard bytes > 0, bytes < size else { return }
            let cut = ClockTime(Double(duration) * Double(bytes) / Double(size))
            gst_buffer_resize(buffer, gssize(bytes), gssize(size - bytes))
            if buffer.pointee.pts != ClockTime.none { buffer.pointee.pts += cut }
            if buffer.pointee.dts != ClockTime.none { buffer.pointee.dts += cut }
            buffer.pointee.duration = duration - cut
            CGstShim_tsan_published(buffer)
        }

        /// Puts `amount` of silence (zero bytes: signed PCM) before the passing raw-audio buffer's samples and
        /// moves its start as much earlier (making it writable first), whole frames of `frameBytes`, at the
        /// buffer's own rate. How audio that began after a cut is made to start exactly at it.
        public func extendBufferStartWithSilence(by amount: ClockTime, frameBytes: Int) {
            guard isBuffer, let buffer = CGstShim_probe_info_writable_buffer(raw) else { return }
            let size = Int(gst_buffer_get_size(buffer)), duration: ClockTime = buffer.pointee.duration
            guard duration != ClockTime.none, duration > 0, size > 0, amount > 0, frameBytes > 0 else { return }
            let proportional = Double(size) * Double(amount) / Double(duration)
            let bytes = Int(proportional.rounded()) / frameBytes * frameBytes
            guard bytes > 0, let silence = gst_allocator_alloc(nil, gsize(bytes), nil) else { return }
            var map = GstMapInfo()
            if gst_memory_map(silence, &map, GST_MAP_WRITE) != 0 {
                memset(map.data, 0, bytes)
                gst_memory_unmap(silence, &map)
            }
            gst_buffer_prepend_memory(buffer, silence)
            let added = ClockTime(Double(duration) * Double(bytes) / Double(size))
            if buffer.pointee.pts != ClockTime.none { buffer.pointee.pts -= min(added, buffer.pointee.pts) }
            if buffer.pointee.dts != ClockTime.none { buffer.pointee.dts -= min(added, buffer.pointee.dts) }
            buffer.pointee.duration = duration + added
            CGstShim_tsan_published(buffer)
        }

        /// The first `count` bytes of the passing buffer (fewer if it is shorter), copied without making the
        /// buffer writable: a cheap look before deciding to edit it.
        public func bufferPrefix(_ count: Int) -> [UInt8] {
            guard isBuffer, let data = raw.pointee.data, count > 0 else { return [] }
            let buffer = UnsafeMutablePointer<GstBuffer>(OpaquePointer(data))
            var bytes = [UInt8](repeating: 0, count: count)
            let copied = bytes.withUnsafeMutableBytes { gst_buffer_extract(buffer, 0, $0.baseAddress, gsize(count)) }
            return Array(bytes.prefix(Int(copied)))
        }

        /// Replaces the passing buffer with a copy of its memory when a bounded pool lent it (a device's), and
        /// lets the original go back to its pool at once: nothing downstream keeps a device's buffer (or the
        /// device) however long it holds the frame. Buffers of unbounded pools pass as they are. Returns
        /// whether it copied.
        @discardableResult
        public func replaceBufferWithCopyIfLentByBoundedPool() -> Bool {
            guard isBuffer else { return false }
            return CGstShim_probe_info_copy_if_lent_by_bounded_pool(raw) != 0
        }

        /// Replaces the passing buffer with a copy of its own (memory included) stamped `pts` and `duration`:
        /// retiming that writes nothing a reader of the original, or of its pool's next use of it, can see.
        @discardableResult
        public func replaceBufferWithRetimedCopy(pts: ClockTime, duration: ClockTime) -> Bool {
            guard isBuffer else { return false }
            return CGstShim_probe_info_retimed_copy(raw, pts, duration) != 0
        }

        /// Makes the passing buffer writable and hands its memory to `body` (for in-place edits).
        public func withWritableBuffer(_ body: (WritableBuffer) -> Void) {
            guard isBuffer, let buffer = CGstShim_probe_info_writable_buffer(raw) else { return }
            body(WritableBuffer(pointer: buffer))
            // Downstream threads read what was written (they receive it with the sample).
            CGstShim_tsan_published(buffer)
        }
    }

    public enum ProbeReturn: Sendable {
        /// Let the data pass, keep the probe.
        case ok
        /// Drop the data (upstream sees success), keep the probe.
        case drop
        /// Let the data pass and remove the probe.
        case remove
        /// Let the data pass and keep the probe; a blocking probe then blocks on the next data.
        case pass

        var raw: GstPadProbeReturn {
            switch self {
            case .ok: GST_PAD_PROBE_OK
            case .drop: GST_PAD_PROBE_DROP
            case .remove: GST_PAD_PROBE_REMOVE
            case .pass: GST_PAD_PROBE_PASS
            }
        }
    }

    public struct ProbeKind: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let buffer = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_BUFFER.rawValue)
        public static let downstreamEvent = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM.rawValue)
        public static let upstreamEvent = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_EVENT_UPSTREAM.rawValue)
        public static let idle = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_IDLE.rawValue)
        public static let downstreamQuery = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM.rawValue)
        public static let blockDownstream = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_BLOCK_DOWNSTREAM.rawValue)
        /// Blocking, buffers only: runs before every non-blocking probe, and a pad linked in it sends its
        /// sticky events (caps, segment) to the new peer before the buffer goes on (.remove lets it go).
        public static let blockBuffer = ProbeKind(rawValue: GST_PAD_PROBE_TYPE_BLOCK.rawValue | GST_PAD_PROBE_TYPE_BUFFER.rawValue)
    }

    public typealias ProbeHandler = @Sendable (ProbeInfo) -> ProbeReturn

    private final class ProbeBox {
        let handler: ProbeHandler
        init(_ handler: @escaping ProbeHandler) { self.handler = handler }
    }

    /// Installs a probe; the handler runs on the streaming thread and must not block. Returns an id for
    /// `removeProbe`. An IDLE probe may run at once on the calling thread when the pad is idle.
    @discardableResult
    public func addProbe(_ kind: ProbeKind, _ handler: @escaping ProbeHandler) -> UInt {
        let box = Unmanaged.passRetained(ProbeBox(handler)).toOpaque()
        // The streaming thread gets the handler through the pad's lock, which TSan cannot see.
        CGstShim_tsan_published(box)
        let id = gst_pad_add_probe(pointer, GstPadProbeType(rawValue: kind.rawValue), { pad, info, userData in
            guard let info, let userData else { return GST_PAD_PROBE_OK }
            CGstShim_tsan_received(userData)
            // The passing buffer, or the memory GSlice reused for it, was last written before it got here.
            let buffer = info.pointee.type.rawValue & GST_PAD_PROBE_TYPE_BUFFER.rawValue != 0 ? info.pointee.data : nil
            if let buffer { CGstShim_tsan_received(buffer) }
            let box = Unmanaged<ProbeBox>.fromOpaque(userData).takeUnretainedValue()
            let result = box.handler(ProbeInfo(raw: info, pad: pad)).raw
            // What the handler read of it happened before whoever writes that memory next (the buffer made
            // writable elsewhere, or a new buffer GSlice puts in the same place).
            if let buffer { CGstShim_tsan_published(buffer) }
            return result
        }, box, { userData in
            if let userData { Unmanaged<ProbeBox>.fromOpaque(userData).release() }
        })
        return UInt(id)
    }

    public func removeProbe(_ id: UInt) { gst_pad_remove_probe(pointer, gulong(id)) }

    /// Answers the serialized queries that reach this sink pad from upstream (an allocation query after a
    /// branch was linked somewhere, a drain) at once, left empty, instead of passing them into the branch
    /// behind it. Such a query waits until everything queued before it has been handled downstream, so one
    /// sent into a branch whose sink blocks (a server that never answers, a stalled disk) held the thread
    /// that sent it for as long, and through the tees the source behind it.
    @discardableResult
    public func answerSerializedQueriesFromUpstreamAtOnce() -> UInt {
        addProbe(.downstreamQuery) { info in info.isSerializedQuery ? .drop : .ok }
    }

    /// Stops the reconfigure events sent up through this source pad (a branch linked or changed behind it), so
    /// that the elements upstream keep the format and buffers they negotiated: for a source whose caps are
    /// pinned, one that would renegotiate its device (v4l2src: S_FMT) while its buffers are still downstream.
    @discardableResult
    public func dropReconfigureFromDownstream() -> UInt {
        // The raw type, not `info.eventType`: that names every other kind with a new String, and sinks send QoS
        // events upstream for every frame.
        addProbe(.upstreamEvent) { info in
            guard let data = info.raw.pointee.data else { return .ok }
            return UnsafeMutablePointer<GstEvent>(OpaquePointer(data)).pointee.type == GST_EVENT_RECONFIGURE ? .drop : .ok
        }
    }

    /// Stops end-of-stream pushed from upstream at this sink pad, for a branch that must outlive its source
    /// (a source that dies pushes one through every tee behind it). With `unlessSentDirectly`, an
    /// end-of-stream sent into the pad itself once it is unlinked (gst_pad_send_event: the branch's own end,
    /// to finalize it) still passes.
    @discardableResult
    public func dropEndOfStreamFromUpstream(unlessSentDirectly: Bool = false) -> UInt {
        addProbe(.downstreamEvent) { info in
            info.eventType == .endOfStream && (!unlessSentDirectly || info.isPadLinked) ? .drop : .ok
        }
    }
}

/// A buffer whose memory may be edited in place (inside a probe).
public struct WritableBuffer {
    let pointer: UnsafeMutablePointer<GstBuffer>

    public func withMappedBytes<R>(_ body: (UnsafeMutableRawBufferPointer) -> R) -> R? {
        var map = GstMapInfo()
        guard gst_buffer_map(pointer, &map, GstMapFlags(rawValue: GST_MAP_READ.rawValue | GST_MAP_WRITE.rawValue)) != 0 else { return nil }
        defer { gst_buffer_unmap(pointer, &map) }
        return body(UnsafeMutableRawBufferPointer(start: map.data, count: Int(map.size)))
    }
}

extension WritableBuffer {
    /// Adds uniform noise of ±`amplitude` to `rows` rows of `rowBytes` bytes each, `stride` apart, starting
    /// at `offset`: a synthetic sensor noise for test signals. `state` carries the generator between frames.
    public func addUniformNoise(offset: Int, rowBytes: Int, rows: Int, stride: Int, amplitude: Int,
                                state: inout UInt32) {
        _ = withMappedBytes { bytes in
            guard let base = bytes.baseAddress, offset + stride * (rows - 1) + rowBytes <= bytes.count else { return }
            CGstShim_add_noise(base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), rowBytes, rows,
                               stride, Int32(amplitude), &state)
        }
    }
}
