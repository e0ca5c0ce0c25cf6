import CGst
import CGstShim

/// GStreamer element states.
public enum ElementState: Int, Sendable, Comparable, CustomStringConvertible {
    case voidPending = 0, null, ready, paused, playing

    init(_ raw: GstState) { self = ElementState(rawValue: Int(raw.rawValue)) ?? .voidPending }
    var raw: GstState { GstState(rawValue: UInt32(rawValue)) }

    public static func < (a: ElementState, b: ElementState) -> Bool { a.rawValue < b.rawValue }
    public var description: String { ["void-pending", "null", "ready", "paused", "playing"][rawValue] }
}

/// An owned reference to a GstElement: the reference is released when the wrapper goes away, floating
/// references are sunk on construction, so nobody above this layer calls ref/unref.
public class Element: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked Sendable: it owns one reference to a GstElement (a raw pointer, so not Sendable by itself);
    // GObject refcounts are atomic and GStreamer's element API takes the object lock, so any thread may use it.
    package let pointer: UnsafeMutablePointer<GstElement>

    /// Takes over one full (non-floating) reference, or sinks a floating one.
    package required init(adopting pointer: UnsafeMutablePointer<GstElement>) {
        GStreamer.initialize()
        self.pointer = pointer
        if g_object_is_floating(UnsafeMutableRawPointer(pointer)) != 0 {
            gst_object_ref_sink(UnsafeMutableRawPointer(pointer))
        }
    }

    /// Adds a reference of our own.
    package convenience init(retaining pointer: UnsafeMutablePointer<GstElement>) {
        gst_object_ref(UnsafeMutableRawPointer(pointer))
        self.init(adopting: pointer)
    }

    deinit { gst_object_unref(UnsafeMutableRawPointer(pointer)) }

    /// Creates an element from an installed factory ("videotestsrc", "tee", ...).
    public static func make(_ factory: String, name: String? = nil) throws -> Element {
        GStreamer.initialize()
        guard let raw = gst_element_factory_make(factory, name) else {
            throw GStreamerError(kind: .missingElement,
                                 message: "GStreamer element '\(factory)' is not installed")
        }
        return Element(adopting: raw)
    }

    public var name: String { takeString(gst_object_get_name(asObject(pointer))) ?? "" }

    /// Path in its bin hierarchy, e.g. "/GstPipeline:session/GstQueue:queue0".
    public var path: String { objectPath(asObject(pointer)) ?? name }

    public var factoryName: String {
        guard let factory = gst_element_get_factory(pointer) else { return "" }
        return takeString(gst_object_get_name(UnsafeMutablePointer<GstObject>(factory))) ?? ""
    }

    public var description: String { "\(factoryName) '\(name)'" }

    public static func == (a: Element, b: Element) -> Bool { a.pointer == b.pointer }
    public func hash(into hasher: inout Hasher) { hasher.combine(pointer) }

    /// Whether this element is `other` or sits (at any depth) inside it.
    public func isInside(_ other: Element) -> Bool {
        pointer == other.pointer
            || gst_object_has_as_ancestor(asObject(pointer), asObject(other.pointer)) != 0
    }

    // MARK: Properties

    /// Sets a property from its textual form, whatever its type (int, enum nick, caps, boolean...). A value
    /// that does not parse as the property's type, or lies outside its range, is an error naming element,
    /// property and value: gst_util_set_object_arg would skip it silently and leave the old value in place.
    public func set(_ property: String, _ value: some CustomStringConvertible) throws {
        guard let spec = propertySpec(property) else {
            throw GStreamerError(kind: .property, message: "\(self) has no property '\(property)'")
        }
        let text = value.description
        let typeName = String(cString: g_type_name(spec.pointee.value_type))
        guard spec.pointee.flags.rawValue & G_PARAM_WRITABLE.rawValue != 0 else {
            throw GStreamerError(kind: .property, message: "property '\(property)' of \(self) is read-only")
        }
        var gvalue = GValue()
        g_value_init(&gvalue, spec.pointee.value_type)
        defer { g_value_unset(&gvalue) }
        if spec.pointee.value_type == CGstShim_type_string() {
            // Taken literally: deserializing would unquote it and read "NULL" as no string at all.
            g_value_set_string(&gvalue, text)
        } else if gst_value_deserialize_with_pspec(&gvalue, text, spec) == 0 {
            throw GStreamerError(kind: .property, message: "\(self) cannot take '\(text)' for its property "
                                 + "'\(property)' (a \(typeName)\(Self.allowedValues(of: spec)))")
        }
        // g_param_value_validate clamps the value into range and says whether it had to.
        if g_param_value_validate(spec, &gvalue) != 0 {
            throw GStreamerError(kind: .property, message: "\(self) cannot take '\(text)' for its property "
                                 + "'\(property)': out of range\(Self.allowedValues(of: spec))")
        }
        g_object_set_property(asGObject(pointer), property, &gvalue)
    }

    /// ", one of: a, b, c" for enum properties; empty otherwise.
    private static func allowedValues(of spec: UnsafeMutablePointer<GParamSpec>) -> String {
        guard g_type_is_a(spec.pointee.value_type, CGstShim_type_enum()) != 0,
              let klass = g_type_class_ref(spec.pointee.value_type) else { return "" }
        defer { g_type_class_unref(klass) }
        let enumClass = klass.assumingMemoryBound(to: GEnumClass.self)
        let nicks = (0..<Int(enumClass.pointee.n_values)).compactMap { index in
            enumClass.pointee.values[index].value_nick.map { String(cString: $0) }
        }
        return nicks.isEmpty ? "" : ", one of: " + nicks.joined(separator: ", ")
    }

    public func set(_ property: String, caps: Caps) throws {
        guard hasProperty(property) else {
            throw GStreamerError(kind: .property, message: "\(self) has no property '\(property)'")
        }
        var value = GValue()
        g_value_init(&value, gst_caps_get_type())
        gst_value_set_caps(&value, caps.pointer)
        g_object_set_property(asGObject(pointer), property, &value)
        g_value_unset(&value)
    }

    public func hasProperty(_ property: String) -> Bool { propertySpec(property) != nil }

    private func propertySpec(_ property: String) -> UnsafeMutablePointer<GParamSpec>? {
        let klass = UnsafeMutablePointer<GObjectClass>(OpaquePointer(asGObject(pointer).pointee.g_type_instance.g_class))
        return g_object_class_find_property(klass, property)
    }

    /// A property's value in GStreamer's serialized form, or nil when there is no such property.
    public func property(_ property: String) -> String? {
        withPropertyValue(property) { value in takeString(gst_value_serialize(value)) } ?? nil
    }

    public func intProperty(_ property: String) -> Int? {
        withPropertyValue(property) { value -> Int? in
            var asInt64 = GValue()
            g_value_init(&asInt64, CGstShim_type_int64())
            defer { g_value_unset(&asInt64) }
            guard g_value_transform(value, &asInt64) != 0 else { return nil }
            return Int(g_value_get_int64(&asInt64))
        } ?? nil
    }

    /// A string property's own text (property() gives GStreamer's quoted, escaped form).
    public func stringProperty(_ property: String) -> String? {
        withPropertyValue(property) { value -> String? in
            guard CGstShim_value_type(value) == CGstShim_type_string() else { return nil }
            return g_value_get_string(value).map { String(cString: $0) }
        } ?? nil
    }

    /// For a queue with a time limit: how full it is (current-level-time / max-size-time, 0...1).
    public var queueTimeFill: Double? {
        guard let limit = intProperty("max-size-time"), limit > 0, let level = intProperty("current-level-time") else { return nil }
        return Double(level) / Double(limit)
    }

    public func boolProperty(_ property: String) -> Bool? {
        withPropertyValue(property) { value -> Bool? in
            guard CGstShim_value_type(value) == CGstShim_type_boolean() else { return nil }
            return g_value_get_boolean(value) != 0
        } ?? nil
    }

    private func withPropertyValue<R>(_ property: String, _ body: (UnsafeMutablePointer<GValue>) -> R) -> R? {
        guard let spec = propertySpec(property) else { return nil }
        var value = GValue()
        g_value_init(&value, spec.pointee.value_type)
        defer { g_value_unset(&value) }
        g_object_get_property(asGObject(pointer), property, &value)
        return body(&value)
    }

    // MARK: Pads and links

    public func staticPad(_ name: String) -> Pad? {
        gst_element_get_static_pad(pointer, name).map { Pad(adopting: $0) }
    }

    /// Requests a pad from a request template such as a tee's "src_%u".
    public func requestPad(_ templateName: String) throws -> Pad {
        guard let pad = gst_element_request_pad_simple(pointer, templateName) else {
            throw GStreamerError(kind: .link, message: "\(self) gave no '\(templateName)' request pad")
        }
        return Pad(adopting: pad)
    }

    public func releaseRequestPad(_ pad: Pad) {
        gst_element_release_request_pad(pointer, pad.pointer)
    }

    public func link(to next: Element) throws {
        guard gst_element_link(pointer, next.pointer) != 0 else {
            throw GStreamerError(kind: .link, message: "cannot link \(self) to \(next)")
        }
    }

    public func unlink(from next: Element) { gst_element_unlink(pointer, next.pointer) }

    /// Links elements in order.
    public static func link(_ chain: [Element]) throws {
        for (a, b) in zip(chain, chain.dropFirst()) { try a.link(to: b) }
    }

    // MARK: State

    public enum StateChange: Sendable { case success, async, noPreroll }

    /// Requests a state change. Live sources answer `.noPreroll` on their way to PAUSED.
    @discardableResult
    public func setState(_ state: ElementState) throws -> StateChange {
        switch gst_element_set_state(pointer, state.raw) {
        case GST_STATE_CHANGE_SUCCESS: return .success
        case GST_STATE_CHANGE_ASYNC: return .async
        case GST_STATE_CHANGE_NO_PREROLL: return .noPreroll
        default:
            throw GStreamerError(kind: .stateChange, message: "\(self) refused to go to \(state)",
                                 sourcePath: path)
        }
    }

    /// The current state, waiting up to `timeout` for a pending asynchronous change to settle.
    public func state(timeout: ClockTime = 0) -> (current: ElementState, pending: ElementState) {
        var current = GST_STATE_VOID_PENDING, pending = GST_STATE_VOID_PENDING
        gst_element_get_state(pointer, &current, &pending, timeout)
        return (ElementState(current), ElementState(pending))
    }

    /// Brings the element to its parent's state (after adding it to a running bin).
    public func syncStateWithParent() throws {
        guard gst_element_sync_state_with_parent(pointer) != 0 else {
            throw GStreamerError(kind: .stateChange, message: "\(self) could not follow its parent's state",
                                 sourcePath: path)
        }
    }

    /// Keeps the element in its current state regardless of its parent's changes.
    public func setLockedState(_ locked: Bool) { gst_element_set_locked_state(pointer, locked ? 1 : 0) }

    public func sendEvent(_ event: Event) -> Bool { gst_element_send_event(pointer, event.take()) != 0 }

    /// Running time of the element's clock now (clock time minus base time), if it has a clock.
    public var currentRunningTime: ClockTime? {
        guard let clock = gst_element_get_clock(pointer) else { return nil }
        defer { gst_object_unref(UnsafeMutableRawPointer(clock)) }
        let now = gst_clock_get_time(clock)
        let base = gst_element_get_base_time(pointer)
        return now >= base ? now - base : 0
    }
}

extension Element {
    /// The clock time at which running time 0 happened; elements added to a running pipeline must share
    /// the pipeline's, or their timestamps will not line up.
    public var baseTime: ClockTime {
        get { gst_element_get_base_time(pointer) }
        set { gst_element_set_base_time(pointer, newValue) }
    }
}

extension Element {
    /// Makes a videoflip that is not yet playing pass frames through untouched while it is unturned. GStreamer
    /// 1.22's videoflip starts with passthrough off and its active direction already "identity", so asking for
    /// identity changes nothing and every frame is copied (perf: `gst_video_frame_copy` was a fifth of the CPU of
    /// delivering 1080p30 frames to code); a direction that changes and comes back turns passthrough on. Later
    /// directions keep it right: each turn turns passthrough off, each return to identity on again.
    public func letVideoFlipPassFramesThrough() throws {
        try set("video-direction", "90r")
        try set("video-direction", "identity")
    }
}
