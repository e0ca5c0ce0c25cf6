/// A place in a description file: line and column from 1, as an editor shows them.
public struct SourcePosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) { self.line = line; self.column = column }
    public static let start = SourcePosition(line: 1, column: 1)
    public static func < (a: Self, b: Self) -> Bool { (a.line, a.column) < (b.line, b.column) }
    public var description: String { "\(line):\(column)" }
}

/// One finding about a description file, printed the way compilers print theirs so that editors jump to it:
/// `FILE:LINE:COLUMN: error: …`.
public struct DescriptionDiagnostic: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable {
        /// The description cannot run.
        case error
        /// It runs, but not entirely as written (a key for a feature this engine does not have yet).
        case warning
    }

    public var file: String
    public var position: SourcePosition
    public var severity: Severity
    public var message: String

    public init(file: String, position: SourcePosition, severity: Severity = .error, message: String) {
        self.file = file
        self.position = position
        self.severity = severity
        self.message = message
    }

    public var description: String { "\(file):\(position.line):\(position.column): \(severity.rawValue): \(message)" }
}

/// Every error found in a description, in file order: nothing starts while there is one.
public struct DescriptionError: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [DescriptionDiagnostic]
    public init(_ diagnostics: [DescriptionDiagnostic]) { self.diagnostics = diagnostics }
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

extension Array where Element == DescriptionDiagnostic {
    /// File order; a finding made twice (the same place and words) is said once.
    func ordered() -> [DescriptionDiagnostic] {
        var seen = Set<DescriptionDiagnostic>()
        return filter { seen.insert($0).inserted }.sorted { $0.position < $1.position }
    }
}

/// "did you mean" candidates: the closest allowed word within a few edits.
enum Suggestion {
    static func closest(to word: String, among candidates: [String]) -> String? {
        let lowered = word.lowercased()
        let scored = candidates.map { ($0, distance(lowered, $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        let limit = max(2, word.count / 3)
        return best.1 <= limit && best.1 < max(word.count, best.0.count) ? best.0 : nil
    }

    /// Levenshtein distance, with a transposition counting as one edit (a common slip: "mvoie").
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        // Long inputs cannot be a near miss of a key; do not spend quadratic time on them.
        if abs(a.count - b.count) > 8 || a.count > 200 || b.count > 200 { return max(a.count, b.count) }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = Swift.min(current[j], previous2[j - 2] + 1)
                }
            }
            previous2 = previous
            previous = current
        }
        return previous[b.count]
    }
}
