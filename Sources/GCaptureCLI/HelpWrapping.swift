import ArgumentParser
import Foundation

/// ArgumentParser wraps the help's prose at the terminal's width but prints a command's synopsis (USAGE:,
/// and the Usage: under an error) on one line however long it is, until a command has more than twelve
/// options: `gcapture record --help` had a 260-column first line. This wraps those lines at the library's
/// width (one column less than the terminal's), each continuation under the first option, and leaves
/// everything else as the library made it.
enum HelpWrapping {
    /// The width ArgumentParser wraps at: COLUMNS, else the terminal's, else 80.
    static var columns: Int {
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let columns = Int(text), columns > 0 { return columns }
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    static func wrapUsage(_ text: String, width: Int) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.count > width, line.hasPrefix("USAGE: ") || line.hasPrefix("Usage: ") else { return String(line) }
            return wrapSynopsis(String(line), width: width)
        }.joined(separator: "\n")
    }

    /// Breaks only between arguments: a bracketed `[--camera <camera>]` stays whole.
    private static func wrapSynopsis(_ line: String, width: Int) -> String {
        var words: [String] = [], current = "", depth = 0
        for character in line {
            switch character {
            case "[", "<": depth += 1
            case "]", ">": depth -= 1
            default: break
            }
            if character == " ", depth == 0 {
                if !current.isEmpty { words.append(current) }
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { words.append(current) }
        // "USAGE:" and the command's name come first; continuations line up under the first argument.
        let nameWords = words.dropFirst().prefix { !$0.hasPrefix("[") && !$0.hasPrefix("-") && !$0.hasPrefix("<") }
        let head = words.prefix(1 + nameWords.count).joined(separator: " ")
        let indent = head.count + 1 <= width / 2 ? head.count + 1 : 8
        var lines = [head]
        for word in words.dropFirst(1 + nameWords.count) {
            if lines[lines.count - 1].count + 1 + word.count <= width {
                lines[lines.count - 1] += " " + word
            } else {
                lines.append(String(repeating: " ", count: indent) + word)
            }
        }
        return lines.joined(separator: "\n")
    }
}
