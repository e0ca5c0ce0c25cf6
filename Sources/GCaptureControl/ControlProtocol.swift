import Foundation
import GCapture

/// The control protocol of `gcapture run` (docs/control-protocol.md): requests in, one per line, as a JSON
/// object or as plain words; replies and events out, as JSON lines (--json) or plain words.
public enum ControlProtocol {
    public static let name = "gcapture-control"
    /// Raised when a request or a reply changes incompatibly; additions (a new command, a new field) keep it.
    public static let version = 1
    /// A longer line is refused: a client gone wrong must not grow our memory without bound.
    public static let maxLineBytes = 65_536
}

/// A request's id as the client sent it (an integer or a string), given back in its reply.
public enum RequestID: Sendable, Equatable {
    case number(Int)
    case text(String)

    public var json: any Sendable {
        switch self { case .number(let value): value; case .text(let value): value }
    }
}

/// One command of the protocol, in either form.
public enum ControlCommand: Sendable, Equatable {
    case photo(path: String?)
    case recordStart(path: String?)
    case recordStop
    /// Starts an event's clip (with the movie output's pre-roll), or extends the one going on;
    /// `source` says what fired it ("doorbell"), by default where the command came from.
    case trigger(source: String?)
    case pause
    case resume
    case switchCamera(String)
    case rotate(Int)
    case mirror(Bool)
    case help
    case quit

    /// The command words, for `help` and for the did-you-mean of an unknown one.
    public static let names = ["photo", "record", "trigger", "pause", "resume", "switch", "rotate", "mirror", "help", "quit"]

    /// The plain-words synopsis of every command, for `help` and the documentation's table.
    public static let synopsis = [
        "photo [PATH]", "record start [PATH]", "record stop", "trigger [SOURCE]", "pause", "resume", "switch CAMERA",
        "rotate 0|90|180|270", "mirror on|off", "help", "quit",
    ]

    /// `help`'s reply fields.
    public static let helpFields: ControlFields = ["commands": synopsis, "protocol": ControlProtocol.version]
}

public struct ControlRequest: Sendable, Equatable {
    public var id: RequestID?
    public var command: ControlCommand

    public init(id: RequestID? = nil, command: ControlCommand) {
        self.id = id
        self.command = command
    }
}

/// What is wrong with a line, in one sentence, and the line's id when it had a readable one (so that the
/// error reply still reaches the request it answers).
public struct ControlLineError: Error, Sendable, Equatable {
    public var id: RequestID?
    public var message: String
}

/// Reads request lines. A line whose first non-blank character is `{` is JSON; any other is plain words.
/// Both forms are accepted whatever the output form, so that a person can type at a --json session.
public enum ControlParser {
    public static func parse(_ line: String) -> Result<ControlRequest, ControlLineError> {
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") { return parseJSON(trimmed) }
        do {
            return .success(ControlRequest(id: nil, command: try command(fromWords: try words(trimmed))))
        } catch {
            return .failure(ControlLineError(id: nil, message: error.message))
        }
    }

    // MARK: JSON

    private static func parseJSON(_ line: String) -> Result<ControlRequest, ControlLineError> {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)), case .object(let object) = value else {
            return .failure(ControlLineError(id: nil, message: "the line is not a JSON object (a request is one JSON object on one line)"))
        }
        var id: RequestID?
        switch object["id"] {
        case nil, .null?: id = nil
        case .integer(let number)?: id = .number(number)
        case .string(let text)?: id = .text(text)
        case .number?:
            return .failure(ControlLineError(id: nil, message: "\"id\" is not a usable number: give a whole number from \(Int.min) to \(Int.max), or a string"))
        case let other?:
            return .failure(ControlLineError(id: nil, message: "\"id\" must be an integer or a string, not \(other.kind)"))
        }
        do {
            return .success(ControlRequest(id: id, command: try command(fromJSON: object)))
        } catch {
            return .failure(ControlLineError(id: id, message: error.message))
        }
    }

    private static func command(fromJSON object: [String: JSONValue]) throws(ParseError) -> ControlCommand {
        guard let commandValue = object["command"] else {
            throw ParseError("the request has no \"command\" (one of \(list(ControlCommand.names)))")
        }
        // mpv's array form: {"command": ["record", "start", "clip.mp4"]} says what the words say.
        if case .array(let items) = commandValue {
            try allowKeys([], in: object, for: "a command given as an array")
            let words = try items.map { item throws(ParseError) -> String in
                switch item {
                case .string(let text): return text
                case .integer(let number): return String(number)
                case .bool(let flag): return flag ? "on" : "off"
                default: throw ParseError("the words of an array \"command\" must be strings or numbers, not \(item.kind)")
                }
            }
            return try command(fromWords: words)
        }
        guard case .string(let name) = commandValue else {
            throw ParseError("\"command\" must be a string or an array of words, not \(commandValue.kind)")
        }
        switch name {
        case "photo":
            try allowKeys(["path"], in: object, for: name)
            return .photo(path: try optional("path", in: object))
        case "record":
            let action = try required("action", in: object)
            switch action {
            case "start":
                try allowKeys(["action", "path"], in: object, for: "record start")
                return .recordStart(path: try optional("path", in: object))
            case "stop":
                try allowKeys(["action"], in: object, for: "record stop")
                return .recordStop
            default:
                throw ParseError("\"action\" of record must be \"start\" or \"stop\", not \"\(action)\"" + suggestion(for: action, among: ["start", "stop"]))
            }
        case "trigger":
            try allowKeys(["source"], in: object, for: name)
            return .trigger(source: try optional("source", in: object))
        case "pause", "resume", "help", "quit":
            try allowKeys([], in: object, for: name)
            return ["pause": .pause, "resume": .resume, "help": .help, "quit": .quit][name]!
        case "switch":
            try allowKeys(["camera"], in: object, for: name)
            return .switchCamera(try required("camera", in: object))
        case "rotate":
            try allowKeys(["degrees"], in: object, for: name)
            switch object["degrees"] {
            case .integer(let degrees)?: return .rotate(try rotation(String(degrees)))
            case nil: throw ParseError("rotate needs \"degrees\": 0, 90, 180 or 270")
            case let other?: throw ParseError("\"degrees\" must be a whole number (0, 90, 180 or 270), not \(other.kind)")
            }
        case "mirror":
            try allowKeys(["enabled"], in: object, for: name)
            switch object["enabled"] {
            case .bool(let enabled)?: return .mirror(enabled)
            case nil: throw ParseError("mirror needs \"enabled\": true or false")
            case let other?: throw ParseError("\"enabled\" must be true or false, not \(other.kind)")
            }
        default:
            throw unknownCommand(name)
        }
    }

    private static func allowKeys(_ allowed: Set<String>, in object: [String: JSONValue], for command: String) throws(ParseError) {
        let known = allowed.union(["id", "command"])
        for key in object.keys.sorted() where !known.contains(key) {
            let hint = suggestion(for: key, among: allowed.sorted())
            let takes = allowed.isEmpty ? "takes no other key" : "takes \(list(allowed.sorted()))"
            throw ParseError("unknown key \"\(key)\": \(command) \(takes)" + hint)
        }
    }

    private static func optional(_ key: String, in object: [String: JSONValue]) throws(ParseError) -> String? {
        switch object[key] {
        case .string(let text)?:
            guard !text.isEmpty else { throw ParseError("\"\(key)\" must not be empty") }
            return text
        case nil, .null?: return nil
        case let other?: throw ParseError("\"\(key)\" must be a string, not \(other.kind)")
        }
    }

    private static func required(_ key: String, in object: [String: JSONValue]) throws(ParseError) -> String {
        guard let text = try optional(key, in: object) else { throw ParseError("the request needs \"\(key)\"") }
        return text
    }

    // MARK: Plain words

    /// Splits at blanks; double quotes keep blanks inside a word ("my photo.jpg"), a backslash escapes.
    static func words(_ line: String) throws(ParseError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false, quoted = false, escaped = false
        for character in line {
            if escaped { current.append(character); escaped = false; inWord = true; continue }
            switch character {
            case "\\": escaped = true
            case "\"": quoted.toggle(); inWord = true
            case " " where !quoted, "\t" where !quoted:
                if inWord { words.append(current); current = ""; inWord = false }
            default: current.append(character); inWord = true
            }
        }
        if quoted { throw ParseError("a double quote is not closed") }
        if escaped { current.append("\\") }
        if inWord { words.append(current) }
        return words
    }

    static func command(fromWords words: [String]) throws(ParseError) -> ControlCommand {
        guard let name = words.first else { throw ParseError("the line is empty") }
        let arguments = Array(words.dropFirst())
        func expect(_ range: ClosedRange<Int>, _ usage: String) throws(ParseError) {
            guard range.contains(arguments.count) else { throw ParseError("usage: \(usage)") }
        }
        switch name.lowercased() {
        case "photo":
            try expect(0...1, "photo [PATH]")
            return .photo(path: arguments.first)
        case "record":
            guard let action = arguments.first else { throw ParseError("usage: record start [PATH] | record stop") }
            switch action.lowercased() {
            case "start":
                try expect(1...2, "record start [PATH]")
                return .recordStart(path: arguments.dropFirst().first)
            case "stop":
                try expect(1...1, "record stop")
                return .recordStop
            default:
                throw ParseError("record takes start or stop, not \"\(action)\"" + suggestion(for: action, among: ["start", "stop"]))
            }
        case "trigger":
            try expect(0...1, "trigger [SOURCE]")
            return .trigger(source: arguments.first)
        case "pause": try expect(0...0, "pause"); return .pause
        case "resume": try expect(0...0, "resume"); return .resume
        case "help": return .help
        case "quit": try expect(0...0, "quit"); return .quit
        case "switch":
            try expect(1...1, "switch CAMERA (an id from `gcapture devices`)")
            return .switchCamera(arguments[0])
        case "rotate":
            try expect(1...1, "rotate 0|90|180|270")
            return .rotate(try rotation(arguments[0]))
        case "mirror":
            try expect(1...1, "mirror on|off")
            switch arguments[0].lowercased() {
            case "on", "true", "yes": return .mirror(true)
            case "off", "false", "no": return .mirror(false)
            default: throw ParseError("mirror takes on or off, not \"\(arguments[0])\"")
            }
        default:
            throw unknownCommand(name)
        }
    }

    private static func rotation(_ text: String) throws(ParseError) -> Int {
        guard let degrees = Int(text), Rotation.angles.contains(degrees) else {
            throw ParseError("rotate: the angle \(text) is not one of \(Rotation.accepted)")
        }
        return degrees
    }

    // MARK: Did you mean

    private static func unknownCommand(_ name: String) -> ParseError {
        let hint = suggestion(for: name.lowercased(), among: ControlCommand.names)
        return ParseError("unknown command \"\(name)\"" + (hint.isEmpty ? " (commands: \(list(ControlCommand.names)))" : hint))
    }

    /// "; did you mean "photo"?" for the nearest candidate within a few edits (or one it starts), else "".
    static func suggestion(for word: String, among candidates: [String]) -> String {
        let scored = candidates.map { candidate -> (String, Int) in
            let distance = editDistance(word.lowercased(), candidate)
            let prefix = word.count >= 2 && candidate.hasPrefix(word.lowercased())
            return (candidate, prefix ? min(distance, 1) : distance)
        }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(1, min(2, word.count / 3 + 1)) else { return "" }
        return "; did you mean \"\(best.0)\"?"
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }

    private static func list(_ words: [String]) -> String { words.map { "\"\($0)\"" }.joined(separator: ", ") }

    struct ParseError: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }
}

/// Any JSON value, decoded without losing which kind it was (a number is not a boolean).
enum JSONValue: Decodable, Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int.self) { self = .integer(value) }
        else if let number = Self.number(container) { self = .number(number) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    /// A number, also one beyond a Double (1e999): JSONDecoder refuses those with an error of its own rather
    /// than a type mismatch, and the whole line was then called "not a JSON object". Infinity says what it is.
    private static func number(_ container: any SingleValueDecodingContainer) -> Double? {
        do { return try container.decode(Double.self) } catch is DecodingError { return nil } catch { return .infinity }
    }

    /// "a number", "an object": for errors.
    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// The angles `rotate` and the settings take, as the CLI's rotation options spell them: "0, 90, 180 or 270
/// degrees". `Int(_:)` takes only an optional sign and decimal digits, as the CLI's number options do.
enum Rotation {
    static let angles = CaptureConnection.supportedVideoRotationAngles.map { Int($0) }
    static let accepted = angles.dropLast().map(String.init).joined(separator: ", ") + " or \(angles.last ?? 0) degrees"
}

/// What a file's name must end in, for every place that names one (the CLI's options, `photo PATH`,
/// `record start PATH`).
public enum NamingRules {
    public static let photo = "a photo's name ends in .jpg or .jpeg (it is a JPEG with EXIF)"
    public static let movie = "a movie's name ends in .mp4 (H.264 and AAC) or .mkv (Matroska: H.264 and Opus)"
}
