import ArgumentParser
import GCapture

/// How every numeric option is read: a number in a stated, finite range, or an error naming the option
/// (ArgumentParser puts it in front) and the range. Swift's own parsing takes "inf", "nan" and "1e30" as
/// numbers, and a plain Int option takes 0 or -1 where neither means anything; both then reached
/// conversions that crash or limits that never end. NaN and the infinities fall outside every range here,
/// because a closed range with finite bounds contains neither. Only decimal digits are numbers here: Swift
/// also reads "0x10" as 16 and "0x1p3" as 8, so `--duration 0x10` recorded for 16 s.
struct NumberRange<Value: Comparable & LosslessStringConvertible & Sendable>: Sendable {
    let range: ClosedRange<Value>
    let unit: String
    /// Only these values of the range, when not all of them.
    let choices: [Value]?

    init(_ range: ClosedRange<Value>, _ unit: String = "", only choices: [Value]? = nil) {
        self.range = range
        self.unit = unit
        self.choices = choices
    }

    /// What the option takes, for its help and its error: "from 0 to 3600 seconds", "0, 90, 180 or 270".
    var accepted: String {
        let suffix = unit.isEmpty ? "" : " \(unit)"
        if let choices {
            let names = choices.map(Self.show)
            return names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "") + suffix
        }
        return "from \(Self.show(range.lowerBound)) to \(Self.show(range.upperBound))\(suffix)"
    }

    /// 3600 rather than 3600.0.
    private static func show(_ value: Value) -> String {
        let text = String(describing: value)
        return text.hasSuffix(".0") ? String(text.dropLast(2)) : text
    }

    func parse(_ text: String) throws -> Value {
        guard Self.isDecimal(text), let value = Value(text), range.contains(value), choices?.contains(value) ?? true else {
            let kind = choices != nil ? "" : Value.self is any BinaryInteger.Type ? "a whole number " : "a decimal number "
            throw OutOfRange(message: "must be \(kind)\(accepted)")
        }
        return value
    }

    /// A sign, digits and at most one decimal point: no hexadecimal, exponent, "inf" or "nan".
    private static func isDecimal(_ text: String) -> Bool {
        let unsigned = text.hasPrefix("-") || text.hasPrefix("+") ? text.dropFirst() : Substring(text)
        let parts = unsigned.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.contains { !$0.isEmpty } && parts.allSatisfy { $0.allSatisfy { ("0"..."9").contains($0) } }
    }

    /// The transform an `@Option` takes (with `parsing: .unconditional`, so that "-1" reaches it as a
    /// value instead of being taken for an option and reported as a missing value).
    var parser: @Sendable (String) throws -> Value { { [self] in try parse($0) } }

    private struct OutOfRange: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

/// The numeric options' ranges, shared by the commands that have the same option.
enum NumberRanges {
    static let noise = NumberRange(0...127)
    static let liveRate = NumberRange(0.5...60.0, "frames a second")
    static let rotation = NumberRange(0...270, "degrees", only: CaptureConnection.supportedVideoRotationAngles.map { Int($0) })
    /// Kept in memory all the time the session runs: a minute at most (at 8 Mbit/s, 60 MB).
    static let preRoll = NumberRange(0.0...60.0, "seconds")
    static let postRoll = NumberRange(0.0...3600.0, "seconds")
    static let eventGap = NumberRange(0.0...86400.0, "seconds")
    static let triggerInterval = NumberRange(1.0...86400.0, "seconds")
}
