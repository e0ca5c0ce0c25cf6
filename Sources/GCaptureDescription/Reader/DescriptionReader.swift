import Foundation
import Yams

/// Reads a description file against the schema, from Yams' node tree (whose nodes carry their line and
/// column) rather than by decoding into structs, so that every mistake is reported where it was made, and
/// all of them at once. Needs nothing of the machine: devices, elements and folders are checked later.
public enum DescriptionReader {
    /// What reading found: the description (when the file was YAML at all: with a default in place of
    /// each value that had an error) and every finding in file order.
    public struct Result: Sendable {
        public var description: CaptureDescription?
        public var diagnostics: [DescriptionDiagnostic]
        public var errors: [DescriptionDiagnostic] { diagnostics.filter { $0.severity == .error } }
        public var warnings: [DescriptionDiagnostic] { diagnostics.filter { $0.severity == .warning } }
    }

    /// Reads the bytes of a description file. `file` names it in diagnostics; `safe` applies the limits of
    /// `SafeLimits` and refuses custom GStreamer fragments.
    public static func read(_ data: Data, file: String, safe: Bool = false) -> Result {
        let (description, diagnostics) = readTree(data, file: file, safe: safe) { $0.readRoot($1) }
        return Result(description: description, diagnostics: diagnostics)
    }

    public static func read(_ text: String, file: String, safe: Bool = false) -> Result {
        let (description, diagnostics) = readTree(text, file: file, safe: safe) { $0.readRoot($1) }
        return Result(description: description, diagnostics: diagnostics)
    }

    /// What reading a file that may list several cameras found: one description per camera in file order
    /// (one for a one-camera file; none when the file was not YAML at all), every finding in file order,
    /// and each camera's warnings (the shared keys' and its own entry's).
    public struct Cameras: Sendable {
        public var descriptions: [CaptureDescription]
        public var diagnostics: [DescriptionDiagnostic]
        public var warningsByCamera: [[DescriptionDiagnostic]]
        public var errors: [DescriptionDiagnostic] { diagnostics.filter { $0.severity == .error } }
    }

    /// Reads a description file in either form: one camera, or a list of them under `cameras:`.
    public static func readCameras(_ data: Data, file: String, safe: Bool = false) -> Cameras {
        var entryDiagnostics: [[DescriptionDiagnostic]] = []
        let (descriptions, diagnostics) = readTree(data, file: file, safe: safe) { reader, root in
            defer { entryDiagnostics = reader.entryDiagnostics }
            return reader.readDescriptions(root)
        }
        let descriptionsRead = descriptions ?? []
        let inEntries = Set(entryDiagnostics.joined())
        let shared = diagnostics.filter { $0.severity == .warning && !inEntries.contains($0) }
        let warnings = descriptionsRead.indices.map { index in
            (shared + (index < entryDiagnostics.count ? entryDiagnostics[index].filter { $0.severity == .warning } : [])).ordered()
        }
        return Cameras(descriptions: descriptionsRead, diagnostics: diagnostics, warningsByCamera: warnings)
    }

    private static func readTree<T>(_ data: Data, file: String, safe: Bool,
                                    _ body: (inout NodeReader, Node) -> T) -> (T?, [DescriptionDiagnostic]) {
        if safe, data.count > SafeLimits.fileBytes {
            return (nil, [DescriptionDiagnostic(file: file, position: .start, message:
                "the file is \(data.count) bytes; under --safe a description may have at most \(SafeLimits.fileBytes)")])
        }
        guard let text = String(validatingUTF8Data: data) else {
            return (nil, [DescriptionDiagnostic(file: file, position: position(ofByte: firstInvalidUTF8(in: data), in: data),
                                                message: "the file is not UTF-8 text, so it is not a description (YAML)")])
        }
        return readTree(text, file: file, safe: safe, body)
    }

    /// The YAML tree, within the node budget, given to `body` with a reader; nil and the reason when the
    /// file is not one.
    private static func readTree<T>(_ text: String, file: String, safe: Bool,
                                    _ body: (inout NodeReader, Node) -> T) -> (T?, [DescriptionDiagnostic]) {
        let fail = { (position: SourcePosition, message: String) -> (T?, [DescriptionDiagnostic]) in
            (nil, [DescriptionDiagnostic(file: file, position: position, message: message)])
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            let (position, message) = explain(error, in: text)
            return fail(position, message)
        } catch {
            return fail(.start, "the file is not YAML: \(error)")
        }
        guard let root, !isNull(root) else {
            return fail(.start, "the file is empty; a description needs at least `version: 1` and one output")
        }
        let limit = safe ? SafeLimits.nodes : 100_000
        if countNodes(root, budget: limit + 1) > limit {
            return fail(position(root), "the description has more than \(limit) values (aliases count each time they are used)\(safe ? " under --safe" : "")")
        }
        var reader = NodeReader(file: file, safe: safe)
        let result = body(&reader, root)
        return (result, reader.diagnostics.ordered())
    }

    // MARK: YAML syntax errors

    /// Where a syntax error is and what the person most likely did, in place of libyaml's wording.
    static func explain(_ error: YamlError, in text: String) -> (SourcePosition, String) {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            let position = SourcePosition(line: max(1, mark.line), column: max(1, mark.column))
            let lines = yamlLines(text)
            let line = position.line <= lines.count ? lines[position.line - 1] : ""
            if let tab = line.firstIndex(of: "\t"), problem.contains("cannot start any token") || problem.contains("tab")
                || line[..<tab].allSatisfy({ $0 == " " }) {
                let column = line[..<tab].unicodeScalars.count + 1
                return (SourcePosition(line: position.line, column: column), "a tab character: YAML indents with spaces only")
            }
            if problem.contains("mapping values are not allowed") {
                return (position, "a ':' where no key can start: check this line's indentation, or quote a value that contains ': '")
            }
            if problem.contains("did not find expected key") || problem.contains("did not find expected '-' indicator") {
                return (position, "this line does not line up with the keys above it: check its indentation")
            }
            if problem.contains("found undefined alias") {
                return (position, "an alias (*name) with no anchor (&name) before it")
            }
            if problem.contains("found unexpected end of stream") || problem.contains("found unexpected end") {
                return (position, "the file ends inside a quoted or bracketed value: a closing quote or bracket is missing"
                        + (context.map { " (opened at line \($0.mark.line))" } ?? ""))
            }
            if problem.contains("did not find expected <document start>") {
                return (position, "this is not YAML as a description is written (`key: value` lines, lists as '- item'); see docs/description-files.md")
            }
            let where_ = context.map { ", \($0.text) at line \($0.mark.line)" } ?? ""
            return (position, "not valid YAML: \(problem)\(where_)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            let key = duplicates.first ?? "?"
            let first = SourcePosition(line: max(1, context.mark.line), column: max(1, context.mark.column))
            // Yams marks the first occurrence; the mistake is the second one, at the same indentation below.
            if let second = laterOccurrence(ofKey: key, after: first, in: text) {
                return (second, "the key '\(key)' is given twice in the same mapping (first at line \(first.line)); keep one")
            }
            return (first, "the key '\(key)' is given more than once in the same mapping; keep one")
        case .reader(let problem, let offset, _, _):
            let position = offset.map { Self.position(ofByte: $0, in: Data(text.utf8)) } ?? SourcePosition.start
            return (position, "the file is not a text description (YAML): \(problem)")
        default:
            return (.start, "the file is not YAML: \(error)")
        }
    }

    private static func laterOccurrence(ofKey key: String, after first: SourcePosition, in text: String) -> SourcePosition? {
        let lines = yamlLines(text)
        guard first.line <= lines.count else { return nil }
        let indent = first.column - 1
        for number in first.line..<lines.count {
            let line = lines[number]
            let leading = line.prefix { $0 == " " }.count
            if leading < indent, !line.allSatisfy({ $0 == " " }), !line.dropFirst(leading).hasPrefix("#") { return nil }
            guard leading == indent else { continue }
            let rest = line.dropFirst(leading)
            for candidate in [key, "\"\(key)\"", "'\(key)'"] where rest.hasPrefix(candidate) {
                if rest.dropFirst(candidate.count).drop(while: { $0 == " " }).hasPrefix(":") {
                    return SourcePosition(line: number + 1, column: indent + 1)
                }
            }
        }
        return nil
    }

    /// The lines as YAML numbers them: a line ends at LF, CRLF or a lone CR (a Swift String keeps CRLF as
    /// one Character, so splitting at "\n" would leave a Windows file one long line).
    static func yamlLines(_ text: String) -> [Substring] {
        var lines: [Substring] = []
        var start = text.unicodeScalars.startIndex
        var index = start
        let scalars = text.unicodeScalars
        while index < scalars.endIndex {
            let scalar = scalars[index]
            if scalar == "\n" || scalar == "\r" {
                lines.append(Substring(scalars[start..<index]))
                var next = scalars.index(after: index)
                if scalar == "\r", next < scalars.endIndex, scalars[next] == "\n" { next = scalars.index(after: next) }
                start = next
                index = next
            } else {
                index = scalars.index(after: index)
            }
        }
        lines.append(Substring(scalars[start...]))
        return lines
    }

    static func position(ofByte offset: Int, in data: Data) -> SourcePosition {
        var line = 1, column = 1
        var index = data.startIndex
        let end = data.index(data.startIndex, offsetBy: min(max(offset, 0), data.count))
        var previous: UInt8 = 0
        while index < end {
            let byte = data[index]
            if byte == 0x0A && previous == 0x0D {
                // The LF of a CRLF: the line already ended at the CR.
            } else if byte == 0x0A || byte == 0x0D {
                line += 1; column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
            previous = byte
            index += 1
        }
        return SourcePosition(line: line, column: column)
    }

    private static func firstInvalidUTF8(in data: Data) -> Int {
        var offset = 0
        var iterator = data.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += String(scalar).utf8.count
            case .emptyInput: return offset
            case .error: return offset
            }
        }
    }

    static func countNodes(_ node: Node, budget: Int) -> Int {
        var count = 0
        var stack = [node]
        while let next = stack.popLast() {
            count += 1
            if count >= budget { return count }
            switch next {
            case .mapping(let mapping): for (key, value) in mapping { stack.append(key); stack.append(value) }
            case .sequence(let sequence): stack.append(contentsOf: sequence)
            default: break
            }
        }
        return count
    }

    static func position(_ node: Node) -> SourcePosition {
        node.mark.map { SourcePosition(line: max(1, $0.line), column: max(1, $0.column)) } ?? .start
    }

    static func isNull(_ node: Node) -> Bool {
        guard case .scalar(let scalar) = node, scalar.style == .plain || scalar.style == .any else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }
}

extension String {
    init?(validatingUTF8Data data: Data) {
        var iterator = data.makeIterator()
        var decoder = UTF8()
        loop: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: break loop
            case .error: return nil
            }
        }
        self = String(decoding: data, as: UTF8.self)
    }
}
