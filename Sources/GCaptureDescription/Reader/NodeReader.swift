import Foundation
import Yams

/// Reads the YAML node tree against the schema into a CaptureDescription, collecting every finding (each
/// at its FILE:LINE:COLUMN) rather than stopping at the first.
struct NodeReader {
    let file: String
    let safe: Bool
    var diagnostics: [DescriptionDiagnostic] = []
    var valuePositions: [String: SourcePosition] = [:]
    var keyPositions: [String: SourcePosition] = [:]
    /// Where the mapping read sits in the file, as messages name it: "cameras[1]." for an entry of
    /// `cameras:`, "" for the file itself. Positions stay keyed without it ("outputs.photo.folder"), so that
    /// an entry's description is keyed as a one-camera file's is.
    let scope: String
    /// The findings of each entry of `cameras:`, in file order (they are in `diagnostics` too).
    var entryDiagnostics: [[DescriptionDiagnostic]] = []

    init(file: String, safe: Bool, scope: String = "") {
        self.file = file
        self.safe = safe
        self.scope = scope
    }

    /// A key's dotted path as messages show it: inside its camera's entry when there is one.
    func shown(_ path: String) -> String {
        path.isEmpty ? String(scope.dropLast()) : scope + path
    }

    mutating func error(_ position: SourcePosition, _ message: String) {
        diagnostics.append(DescriptionDiagnostic(file: file, position: position, severity: .error, message: message))
    }

    mutating func warning(_ position: SourcePosition, _ message: String) {
        diagnostics.append(DescriptionDiagnostic(file: file, position: position, severity: .warning, message: message))
    }

    func at(_ node: Node) -> SourcePosition { DescriptionReader.position(node) }

    // MARK: Mappings

    /// A mapping's entries with string keys, after reporting unknown, non-text keys; nil (reported) when
    /// the node is not a mapping. `allowed`: the keys when they are not the schema's for `path`.
    mutating func entries(_ node: Node, path: String, what: String, allowed: [String]? = nil) -> [String: Node]? {
        let allowed = allowed ?? Schema.keys[path]!
        guard case .mapping(let mapping) = node else {
            let keys = allowed.joined(separator: ", ")
            if DescriptionReader.isNull(node), let key = keyPositions[path] {
                error(key, "\(what) has no value: its keys (\(keys)) go on the lines below it, indented")
                return nil
            }
            error(at(node), "\(what) must be a mapping of keys (\(keys)), not \(describe(node))")
            return nil
        }
        var result: [String: Node] = [:]
        for (keyNode, value) in mapping {
            guard case .scalar(let scalar) = keyNode else {
                error(at(keyNode), "a key must be a word, not \(describe(keyNode))")
                continue
            }
            let key = scalar.string
            let full = path.isEmpty ? key : "\(path).\(key)"
            guard allowed.contains(key) else {
                error(at(keyNode), unknownKeyMessage(key, path: path, allowed: allowed))
                continue
            }
            keyPositions[full] = at(keyNode)
            valuePositions[full] = at(value)
            result[key] = value
        }
        return result
    }

    func unknownKeyMessage(_ key: String, path: String, allowed: [String]) -> String {
        let place = shown(path).isEmpty ? "at the top level" : "in \(shown(path))"
        var message = "unknown key '\(key)' \(place)"
        if let suggestion = Suggestion.closest(to: key, among: allowed) {
            return message + "; did you mean '\(suggestion)'?"
        }
        let elsewhere = Schema.parents(of: key)
        if !elsewhere.isEmpty {
            let names = elsewhere.map { $0.isEmpty ? "the top level" : "'\($0)'" }.joined(separator: " or ")
            return message + "; '\(key)' belongs under \(names): check its indentation"
        }
        message += " (keys here: \(allowed.joined(separator: ", ")))"
        return message
    }

    func describe(_ node: Node) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar(let scalar):
            if DescriptionReader.isNull(node) { return "nothing" }
            let text = scalar.string.count > 40 ? String(scalar.string.prefix(37)) + "..." : scalar.string
            return "'\(text)'"
        }
    }

    // MARK: Scalars

    /// The text of a scalar, or nil (reported).
    mutating func text(_ node: Node, _ path: String) -> String? {
        guard case .scalar(let scalar) = node, !DescriptionReader.isNull(node) else {
            error(at(node), "\(path) needs a value as text, not \(describe(node))")
            return nil
        }
        if safe, scalar.string.count > 4096 {
            error(at(node), "\(path) is longer than 4096 characters (--safe)")
            return nil
        }
        return scalar.string
    }

    /// A plain scalar (not quoted): numbers and true/false written in quotes are text in YAML.
    private mutating func plain(_ node: Node, _ path: String, expected: String) -> String? {
        guard case .scalar(let scalar) = node, !DescriptionReader.isNull(node) else {
            error(at(node), "\(path) needs \(expected), not \(describe(node))")
            return nil
        }
        if scalar.style != .plain && scalar.style != .any {
            error(at(node), "\(path) needs \(expected), but '\(scalar.string)' is quoted, which makes it text: remove the quotes")
            return nil
        }
        return scalar.string
    }

    mutating func integer(_ node: Node, _ path: String, in range: ClosedRange<Int>, unit: String = "") -> Int? {
        let expected = "a whole number\(unit.isEmpty ? "" : " of \(unit)")"
        guard let string = plain(node, path, expected: expected) else { return nil }
        guard let value = Int(string.replacingOccurrences(of: "_", with: "")) else {
            error(at(node), "\(path) needs \(expected), not '\(string)'")
            return nil
        }
        guard range.contains(value) else {
            error(at(node), "\(path) must be from \(range.lowerBound) to \(range.upperBound)\(unit.isEmpty ? "" : " \(unit)"); \(value) is not")
            return nil
        }
        return value
    }

    mutating func seconds(_ node: Node, _ path: String, in range: ClosedRange<Double>) -> Double? {
        guard let string = plain(node, path, expected: "a number of seconds") else { return nil }
        guard let value = Double(string), value.isFinite, !string.lowercased().contains("n") else {
            error(at(node), "\(path) needs a number of seconds (like 1.5), not '\(string)'")
            return nil
        }
        guard range.contains(value) else {
            error(at(node), "\(path) must be from \(format(range.lowerBound)) to \(format(range.upperBound)) seconds; \(format(value)) is not")
            return nil
        }
        return value
    }

    private func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    mutating func bool(_ node: Node, _ path: String) -> Bool? {
        guard let string = plain(node, path, expected: "true or false") else { return nil }
        switch string {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default:
            error(at(node), "\(path) needs true or false, not '\(string)'")
            return nil
        }
    }

    mutating func choice(_ node: Node, _ path: String, among allowed: [String]) -> String? {
        guard let string = text(node, path) else { return nil }
        guard allowed.contains(string) else {
            let hint = Suggestion.closest(to: string, among: allowed).map { "did you mean '\($0)'? " } ?? ""
            error(at(node), "\(path) cannot be '\(string)'; \(hint)it is one of: \(allowed.joined(separator: ", "))")
            return nil
        }
        return string
    }

    mutating func quarterTurn(_ node: Node, _ path: String) -> Int? {
        guard let string = plain(node, path, expected: "0, 90, 180 or 270 degrees") else { return nil }
        guard let value = Int(string) ?? Double(string).flatMap({ $0 == $0.rounded() && abs($0) < 1e9 ? Int($0) : nil }) else {
            error(at(node), "\(path) needs a number of degrees: 0, 90, 180 or 270, not '\(string)'")
            return nil
        }
        guard Schema.quarterTurns.contains(value) else {
            error(at(node), "\(path) must be 0, 90, 180 or 270 degrees (quarter turns, clockwise); \(value) is not")
            return nil
        }
        return value
    }

    /// A size in bytes: a whole number, or one with a unit (500MB, 2GiB; KB/MB/GB are 1000s, KiB/MiB/GiB 1024s).
    mutating func bytes(_ node: Node, _ path: String, minimum: Int64 = 1) -> Int64? {
        guard let string = plain(node, path, expected: "a size in bytes (like 500MB)") else { return nil }
        let units: [(String, Int64)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
                                        ("KB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000), ("B", 1)]
        var number = string.trimmingCharacters(in: .whitespaces)
        var multiplier: Int64 = 1
        for (suffix, factor) in units where number.hasSuffix(suffix) {
            number = String(number.dropLast(suffix.count)).trimmingCharacters(in: .whitespaces)
            multiplier = factor
            break
        }
        guard let value = Int64(number), value >= 0 else {
            error(at(node), "\(path) needs a size in bytes (like 500MB or 2GiB), not '\(string)'")
            return nil
        }
        let (total, overflow) = value.multipliedReportingOverflow(by: multiplier)
        guard !overflow, total >= minimum else {
            error(at(node), "\(path) must be at least \(minimum) bytes and at most \(Int64.max); '\(string)' is not")
            return nil
        }
        return total
    }

    mutating func pattern(_ node: Node, _ path: String, extensions: [String], what: String) -> FileNamePattern? {
        guard let string = text(node, path) else { return nil }
        if safe, string.count > SafeLimits.nameLength {
            error(at(node), "\(path) is longer than \(SafeLimits.nameLength) characters (--safe)")
            return nil
        }
        do {
            let pattern = try FileNamePattern(parsing: string)
            guard extensions.contains(pattern.fileExtension) else {
                error(at(node), "\(path) must end in .\(extensions.joined(separator: " or ."))\(what); '\(string)' does not")
                return nil
            }
            return pattern
        } catch {
            self.error(at(node), "\(path): \(error.description)")
            return nil
        }
    }

    mutating func folder(_ node: Node, _ path: String) -> String? {
        guard let string = text(node, path) else { return nil }
        if string.isEmpty || string.contains("\0") {
            error(at(node), "\(path) needs a folder path")
            return nil
        }
        if safe {
            if string.hasPrefix("/") {
                error(at(node), "\(path) must be relative to the root under --safe, not '\(string)'")
                return nil
            }
            if string.split(separator: "/").contains("..") {
                error(at(node), "\(path) '\(string)' leaves the root through '..', which --safe forbids")
                return nil
            }
        }
        return string
    }
}
