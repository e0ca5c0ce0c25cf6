import CGst
import CGstShim

/// An owned, immutable GstCaps.
public final class Caps: @unchecked Sendable, CustomStringConvertible, Equatable {
    // @unchecked Sendable: one reference to GstCaps that is never written after it is made (immutable).
    package let pointer: UnsafeMutablePointer<GstCaps>

    init(adopting pointer: UnsafeMutablePointer<GstCaps>) { self.pointer = pointer }
    convenience init(retaining pointer: UnsafeMutablePointer<GstCaps>) {
        self.init(adopting: gst_caps_ref(pointer))
    }
    deinit { gst_caps_unref(pointer) }

    /// Parses caps text such as "video/x-raw,format=NV12,width=1280,height=720,framerate=30/1".
    public convenience init(_ text: String) throws {
        GStreamer.initialize()
        guard let raw = gst_caps_from_string(text) else {
            throw GStreamerError(kind: .caps, message: "'\(text)' is not valid caps")
        }
        self.init(adopting: raw)
    }

    public var description: String { takeString(gst_caps_to_string(pointer)) ?? "" }
    public var isEmpty: Bool { gst_caps_is_empty(pointer) != 0 }
    public var isAny: Bool { gst_caps_is_any(pointer) != 0 }
    public var isFixed: Bool { gst_caps_is_fixed(pointer) != 0 }

    public func canIntersect(_ other: Caps) -> Bool { gst_caps_can_intersect(pointer, other.pointer) != 0 }

    public static func == (a: Caps, b: Caps) -> Bool { gst_caps_is_equal(a.pointer, b.pointer) != 0 }

    /// A copy without the field `name` in any of its structures.
    public func removingField(_ name: String) -> Caps {
        let copy = Caps(adopting: gst_caps_copy(pointer))
        for index in 0..<gst_caps_get_size(copy.pointer) {
            gst_structure_remove_field(gst_caps_get_structure(copy.pointer, index), name)
        }
        return copy
    }

    /// The caps' structures as plain Swift values.
    public var structures: [CapsStructure] {
        (0..<gst_caps_get_size(pointer)).compactMap { index in
            guard let structure = gst_caps_get_structure(pointer, index) else { return nil }
            let features = gst_caps_get_features(pointer, index)
            let featureText = features.flatMap { takeString(gst_caps_features_to_string($0)) }
            return CapsStructure(structure, features: featureText)
        }
    }
}

/// A field value inside caps, decoded from its GValue.
public indirect enum CapsValue: Sendable, Equatable, CustomStringConvertible {
    case int(Int)
    case intRange(ClosedRange<Int>)
    case fraction(Fraction)
    case fractionRange(ClosedRange<Fraction>)
    case string(String)
    case bool(Bool)
    case list([CapsValue])
    case other(String)

    init(_ value: UnsafePointer<GValue>) {
        let type = CGstShim_value_type(value)
        if type == CGstShim_type_int() {
            self = .int(Int(g_value_get_int(value)))
        } else if type == gst_int_range_get_type() {
            self = .intRange(Int(gst_value_get_int_range_min(value))...Int(gst_value_get_int_range_max(value)))
        } else if type == gst_fraction_get_type() {
            self = .fraction(Fraction(gst_value_get_fraction_numerator(value), gst_value_get_fraction_denominator(value)))
        } else if type == gst_fraction_range_get_type(), let low = gst_value_get_fraction_range_min(value),
                  let high = gst_value_get_fraction_range_max(value) {
            let a = Fraction(gst_value_get_fraction_numerator(low), gst_value_get_fraction_denominator(low))
            let b = Fraction(gst_value_get_fraction_numerator(high), gst_value_get_fraction_denominator(high))
            self = .fractionRange(min(a, b)...max(a, b))
        } else if type == CGstShim_type_string() {
            self = .string(g_value_get_string(value).map { String(cString: $0) } ?? "")
        } else if type == CGstShim_type_boolean() {
            self = .bool(g_value_get_boolean(value) != 0)
        } else if type == gst_value_list_get_type() || type == gst_value_array_get_type() {
            let isList = type == gst_value_list_get_type()
            let count = isList ? gst_value_list_get_size(value) : gst_value_array_get_size(value)
            self = .list((0..<count).compactMap { index in
                (isList ? gst_value_list_get_value(value, index) : gst_value_array_get_value(value, index))
                    .map { CapsValue($0) }
            })
        } else {
            self = .other(takeString(gst_value_serialize(value)) ?? "?")
        }
    }

    /// Every value a list holds (or the value itself).
    public var alternatives: [CapsValue] {
        if case .list(let values) = self { return values.flatMap(\.alternatives) }
        return [self]
    }

    public var description: String {
        switch self {
        case .int(let v): "\(v)"
        case .intRange(let r): "[\(r.lowerBound), \(r.upperBound)]"
        case .fraction(let f): "\(f)"
        case .fractionRange(let r): "[\(r.lowerBound), \(r.upperBound)]"
        case .string(let s): s
        case .bool(let b): "\(b)"
        case .list(let l): "{ " + l.map(\.description).joined(separator: ", ") + " }"
        case .other(let s): s
        }
    }
}

/// One structure of caps: a media type ("video/x-raw") with fields.
public struct CapsStructure: Sendable, Equatable {
    public var name: String
    /// Caps features such as "memory:SystemMemory", when not the default.
    public var features: String?
    public var fields: [String: CapsValue]

    init(_ structure: UnsafePointer<GstStructure>, features: String?) {
        name = String(cString: gst_structure_get_name(structure))
        self.features = features
        var fields: [String: CapsValue] = [:]
        for index in 0..<gst_structure_n_fields(structure) {
            guard let fieldName = gst_structure_nth_field_name(structure, UInt32(index)),
                  let value = gst_structure_get_value(structure, fieldName) else { continue }
            fields[String(cString: fieldName)] = CapsValue(value)
        }
        self.fields = fields
    }

    public subscript(field: String) -> CapsValue? { fields[field] }
}

/// A rational number, as GStreamer expresses frame rates.
public struct Fraction: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var numerator: Int
    public var denominator: Int

    public init(_ numerator: Int, _ denominator: Int) {
        self.numerator = numerator
        self.denominator = denominator == 0 ? 1 : denominator
    }
    init(_ numerator: Int32, _ denominator: Int32) { self.init(Int(numerator), Int(denominator)) }

    public var doubleValue: Double { Double(numerator) / Double(denominator) }
    public static func < (a: Fraction, b: Fraction) -> Bool { a.numerator * b.denominator < b.numerator * a.denominator }
    public static func == (a: Fraction, b: Fraction) -> Bool { a.numerator * b.denominator == b.numerator * a.denominator }
    public func hash(into hasher: inout Hasher) { hasher.combine(doubleValue) }
    public var description: String { "\(numerator)/\(denominator)" }
}
