import Foundation
import XCTest

/// `gcapture --help` and every subcommand's help as a person reads them in an 80-column terminal, and the
/// shell completions generated from the same argument parser.
final class HelpAndCompletionTests: XCTestCase {
    static let known = ["devices", "frames", "photo", "preview", "record", "run", "inspect", "library"]

    /// The subcommands `gcapture --help` lists: a command added later is checked too.
    func subcommands() throws -> [String] {
        let help = try runProduct("gcapture", ["--help"], environment: ["COLUMNS": "200"]).stdout
        let listed = help.components(separatedBy: "SUBCOMMANDS:\n").last?.split(separator: "\n")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") && !$0.contains("'gcapture help") }
            .compactMap { $0.split(separator: " ").first.map(String.init) } ?? []
        XCTAssertTrue(Set(Self.known).isSubset(of: Set(listed)), "\(listed)")
        return listed
    }

    /// No line longer than the terminal, and the prose wrapped as a greedy wrap does it: a line is broken
    /// only where the next word would not fit (a hard newline in a paragraph left a short line in the middle
    /// of it: "link, a node such as" then "/dev/video0, or ..."). An indented line (an example, an option) is
    /// never followed by an unindented one: that is an example wrapped onto the margin.
    func testEveryHelpWrapsAt80Columns() throws {
        for arguments in [["--help"], ["help"]] + (try subcommands()).flatMap({ [[$0, "--help"], ["help", $0]] }) {
            let result = try runProduct("gcapture", arguments, environment: ["COLUMNS": "80"])
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr)")
            let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            XCTAssertGreaterThan(lines.count, 10, "\(arguments): \(result.stdout)")
            for (number, line) in lines.enumerated() {
                XCTAssertLessThanOrEqual(line.count, 80, "gcapture \(arguments.joined(separator: " ")), line \(number + 1): \(line)")
            }
            for (first, second) in zip(lines, lines.dropFirst()) where !first.isEmpty && !second.isEmpty && !second.hasPrefix(" ") {
                let where_ = "gcapture \(arguments.joined(separator: " ")): \"\(first)\" / \"\(second)\""
                XCTAssertFalse(first.hasPrefix(" "), "an indented line wrapped onto the margin: \(where_)")
                let nextWord = second.split(separator: " ").first.map(String.init) ?? ""
                // ArgumentParser keeps the last column free: it wraps at 79.
                XCTAssertGreaterThan(first.count + 1 + nextWord.count, 79, "a paragraph broken early: \(where_)")
            }
        }
    }

    /// A synopsis longer than the terminal is wrapped too (ArgumentParser prints it on one line), each
    /// continuation under the first argument, and a wider terminal gets it on fewer lines. `preview`'s
    /// (215 columns): `record` has more than twelve options since --timelapse, which ArgumentParser sums up
    /// as `[<options>]`.
    func testTheSynopsisWrapsUnderItsFirstArgument() throws {
        let narrow = try runProduct("gcapture", ["preview", "--help"], environment: ["COLUMNS": "80"]).stdout
        let usage = narrow.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("USAGE: ") }.prefix { !$0.isEmpty }
        XCTAssertGreaterThan(usage.count, 1, narrow)
        let column = "USAGE: gcapture preview ".count
        for line in usage.dropFirst() {
            XCTAssertEqual(line.prefix(column).trimmingCharacters(in: .whitespaces), "", "\(line)")
            XCTAssertTrue(line.dropFirst(column).hasPrefix("[") || line.dropFirst(column).hasPrefix("--"), "\(line)")
        }
        let words = { (text: Substring) in text.split(separator: " ") }
        let wide = try runProduct("gcapture", ["preview", "--help"], environment: ["COLUMNS": "300"]).stdout
        let wideUsage = wide.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("USAGE: ") }.prefix { !$0.isEmpty }
        XCTAssertEqual(wideUsage.count, 1, wide)
        XCTAssertEqual(usage.flatMap(words), wideUsage.flatMap(words), "wrapping changed the synopsis")
        // A mistake on the command line shows the synopsis too, wrapped the same, on stderr, status 64.
        let mistake = try runProduct("gcapture", ["preview", "--no-such-option"], environment: ["COLUMNS": "80"])
        XCTAssertEqual(mistake.status, 64)
        XCTAssertTrue(mistake.stderr.contains("Usage: gcapture preview [--log-level <log-level>] [--camera <camera>]\n"), mistake.stderr)
    }

    /// The bash completion parses, and completes: subcommands, a subcommand's options, a preset's values.
    func testTheBashCompletionCompletes() throws {
        let folder = try temporaryFolder()
        let script = folder.appendingPathComponent("gcapture.bash")
        let generated = try runProduct("gcapture", ["--generate-completion-script", "bash"])
        XCTAssertEqual(generated.status, 0, generated.stderr)
        try generated.stdout.write(to: script, atomically: true, encoding: .utf8)
        let syntax = try runTool("/bin/bash", ["-n", script.path])
        XCTAssertEqual(syntax.status, 0, syntax.stderr)
        func complete(_ words: [String]) throws -> [String] {
            let line = words.joined(separator: " ")
            let program = """
                source '\(script.path)'
                COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " "))); COMP_CWORD=\(words.count - 1)
                COMP_LINE='\(line)'; COMP_POINT=\(line.count)
                _gcapture gcapture '\(words.last!)' '\(words.dropLast().last!)'
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let result = try runTool("/bin/bash", ["-c", program])
            XCTAssertEqual(result.status, 0, result.stderr)
            return result.stdout.split(separator: "\n").map(String.init)
        }
        XCTAssertEqual(try complete(["gcapture", "re"]), ["record"])
        XCTAssertTrue(try complete(["gcapture", "run", "--pre"]).contains("--preview"))
        XCTAssertTrue(try complete(["gcapture", "frames", "--preset", "hd"]).contains("hd1280x720"))
    }

    /// zsh's and fish's scripts parse in their shells.
    func testTheZshAndFishCompletionsParse() throws {
        for (shell, path, check) in [("zsh", "/usr/bin/zsh", ["-n"]), ("fish", "/usr/bin/fish", ["--no-execute"])] {
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw TestEnvironment.missing("\(shell) is not installed (bash scripts/install-deps.sh)")
            }
            let folder = try temporaryFolder()
            let script = folder.appendingPathComponent("gcapture.\(shell)")
            let generated = try runProduct("gcapture", ["--generate-completion-script", shell])
            XCTAssertEqual(generated.status, 0, generated.stderr)
            XCTAssertTrue(generated.stdout.contains("record") && generated.stdout.contains("--preview"), shell)
            try generated.stdout.write(to: script, atomically: true, encoding: .utf8)
            let parsed = try runTool(path, check + [script.path])
            XCTAssertEqual(parsed.status, 0, "\(shell): \(parsed.stderr)")
        }
    }
}
