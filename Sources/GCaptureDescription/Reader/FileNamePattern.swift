import Foundation

/// How output files are named: text with `{counter}` (the photo's or movie's number, from 1, zero-padded to
/// 4 digits; `{counter:N}` for N digits) and `{date}` (local time, 20261123-171500; `{date:FORMAT}` with
/// %Y %m %d %H %M %S). A name must hold `{counter}`, so that no file ever overwrites another.
public struct FileNamePattern: Sendable, Equatable, CustomStringConvertible {
    public enum Part: Sendable, Equatable {
        case text(String)
        case counter(digits: Int)
        case date(format: String)
    }

    public let parts: [Part]
    public let text: String
    public var description: String { text }

    public static let defaultPhoto = try! FileNamePattern(parsing: "photo-{counter}.jpg")
    public static let defaultMovie = try! FileNamePattern(parsing: "movie-{counter}.mp4")
    static let dateTokens: Set<Character> = ["Y", "m", "d", "H", "M", "S"]

    /// Why a name cannot be used, in the user's words.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// `folderSetting`: where the user names the folder instead, as their surface spells it (a
    /// description's `folder:` key, a command's option).
    public init(parsing text: String, folderSetting: String = "`folder:`") throws(Problem) {
        self.text = text
        if text.contains("/") || text.contains("\0") {
            throw Problem(description: "a name cannot contain '/'; put the folder under \(folderSetting)")
        }
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let character = rest.first {
            rest = rest.dropFirst()
            guard character == "{" else {
                if character == "}" { throw Problem(description: "'}' without a matching '{' (placeholders are {counter} and {date})") }
                literal.append(character)
                continue
            }
            guard let end = rest.firstIndex(of: "}") else {
                throw Problem(description: "'{' is not closed (placeholders are {counter} and {date})")
            }
            let placeholder = rest[rest.startIndex..<end]
            rest = rest[rest.index(after: end)...]
            if !literal.isEmpty { parts.append(.text(literal)); literal = "" }
            let name = placeholder.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            switch name[0] {
            case "counter":
                var digits = 4
                if name.count == 2 {
                    guard let value = Int(name[1]), (1...9).contains(value) else {
                        throw Problem(description: "{counter:\(name[1])} needs a number of digits from 1 to 9")
                    }
                    digits = value
                }
                parts.append(.counter(digits: digits))
            case "date":
                let format = name.count == 2 ? String(name[1]) : "%Y%m%d-%H%M%S"
                try Self.checkDate(format)
                parts.append(.date(format: format))
            default:
                let suggestion = Suggestion.closest(to: String(name[0]), among: ["counter", "date"])
                throw Problem(description: "unknown placeholder {\(placeholder)}" + (suggestion.map { "; did you mean {\($0)}?" } ?? "; use {counter} or {date}"))
            }
        }
        if !literal.isEmpty { parts.append(.text(literal)) }
        guard parts.contains(where: { if case .counter = $0 { true } else { false } }) else {
            throw Problem(description: "the name has no {counter}: every file would overwrite the one before")
        }
        self.parts = parts
    }

    private static func checkDate(_ format: String) throws(Problem) {
        var characters = format.makeIterator()
        while let character = characters.next() {
            if character == "/" { throw Problem(description: "a date format cannot contain '/'") }
            guard character == "%" else { continue }
            guard let token = characters.next(), dateTokens.contains(token) else {
                throw Problem(description: "the date format '\(format)' may use only %Y %m %d %H %M %S")
            }
        }
    }

    /// The file extension, lowercased ("jpg").
    public var fileExtension: String {
        guard case .text(let last)? = parts.last, let dot = last.lastIndex(of: ".") else { return "" }
        return last[last.index(after: dot)...].lowercased()
    }

    public func render(counter: Int, date: Date) -> String {
        parts.map { part in
            switch part {
            case .text(let text): return text
            case .counter(let digits):
                let number = String(counter)
                return String(repeating: "0", count: max(0, digits - number.count)) + number
            case .date(let format): return Self.format(date, format)
            }
        }.joined()
    }

    /// The counter a file name was made with, if it was made by this pattern.
    public func counter(inName name: String) -> Int? {
        var pattern = "^"
        for part in parts {
            switch part {
            case .text(let text): pattern += NSRegularExpression.escapedPattern(for: text)
            case .counter: pattern += "([0-9]+)"
            case .date: pattern += ".+?"
            }
        }
        pattern += "$"
        guard let expression = try? NSRegularExpression(pattern: pattern),
              let match = expression.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)),
              match.numberOfRanges > 1, let range = Range(match.range(at: 1), in: name) else { return nil }
        return Int(name[range])
    }

    private static func format(_ date: Date, _ format: String) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&time, &parts)
        var result = ""
        var characters = format.makeIterator()
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        while let character = characters.next() {
            guard character == "%", let token = characters.next() else { result.append(character); continue }
            switch token {
            case "Y": result += String(parts.tm_year + 1900)
            case "m": result += two(parts.tm_mon + 1)
            case "d": result += two(parts.tm_mday)
            case "H": result += two(parts.tm_hour)
            case "M": result += two(parts.tm_min)
            case "S": result += two(parts.tm_sec)
            default: result.append(token)
            }
        }
        return result
    }
}
