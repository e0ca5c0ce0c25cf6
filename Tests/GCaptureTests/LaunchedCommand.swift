import Foundation
import XCTest

/// A built program running as a subprocess while a test watches its output and signals it. Every wait has
/// a deadline, and a process still running when the test ends is killed (SIGKILL, by its own pid).
final class LaunchedCommand: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()
    private let reading = DispatchGroup()
    let stdout = Pipe()
    /// The program's stdin when launched with `writesStdin` (else it inherits the test's).
    let stdin = Pipe()

    /// `readsStdout: false` leaves stdout's pipe to the test (to close it, for one).
    /// `environment`: variables added to the test process's own; `currentDirectory`: the test's own when nil.
    init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], readsStdout: Bool = true,
         writesStdin: Bool = false, currentDirectory: URL? = nil) throws {
        process.executableURL = executable
        process.arguments = arguments
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        if writesStdin {
            process.standardInput = stdin
            // A program that has exited must fail the test that writes to it, not kill the whole test bundle
            // with SIGPIPE: the write then fails with EPIPE, which send() ignores.
            Foundation.signal(SIGPIPE, SIG_IGN)
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        if readsStdout { collect(stdout.fileHandleForReading) { $0.out.append($1) } }
        collect(stderr.fileHandleForReading) { $0.err.append($1) }
    }

    private func collect(_ handle: FileHandle, into append: @escaping @Sendable (LaunchedCommand, Data) -> Void) {
        DispatchQueue.global().async(group: reading) { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                lock.withLock { append(self, chunk) }
            }
        }
    }

    var output: String { lock.withLock { String(decoding: out, as: UTF8.self) } }
    var errorOutput: String { lock.withLock { String(decoding: err, as: UTF8.self) } }

    /// Stdout's JSON lines so far.
    var events: [[String: Any]] {
        output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func events(_ name: String) -> [[String: Any]] { events.filter { $0["event"] as? String == name } }

    /// Waits until stdout has `count` JSON events called `name`; false when the deadline passed first.
    @discardableResult
    func waitForEvent(_ name: String, count: Int = 1, timeout: TimeInterval = 20) -> Bool {
        // A program that has exited says nothing more: no use waiting out the deadline.
        _ = wait(timeout) { self.events(name).count >= count || !self.process.isRunning }
        return events(name).count >= count
    }

    /// Writes one line to the program's stdin (launched with `writesStdin`).
    func send(_ line: String) {
        try? stdin.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    func signal(_ number: Int32) {
        if process.isRunning { Foundation.kill(process.processIdentifier, number) }
    }

    /// Waits for the process to exit; false (and the process killed) when the deadline passed first.
    @discardableResult
    func waitForExit(timeout: TimeInterval) -> Bool {
        let exited = wait(timeout) { !self.process.isRunning }
        if !exited { kill() }
        return exited
    }

    /// Exit status, or 128 + the signal's number when a signal ended the process.
    var status: Int32 {
        process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    func kill() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        _ = reading.wait(timeout: .now() + 5)
    }

    private func wait(_ timeout: TimeInterval, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.02)
        }
        if !process.isRunning { _ = reading.wait(timeout: .now() + 5) } // the last of the output
        return true
    }
}

extension XCTestCase {
    /// Starts a program built next to the tests; it is killed at the end of the test if still running.
    func launch(_ name: String, _ arguments: [String], environment: [String: String] = [:],
                readsStdout: Bool = true, writesStdin: Bool = false, currentDirectory: URL? = nil) throws -> LaunchedCommand {
        let command = try LaunchedCommand(try productURL(name), arguments, environment: environment, readsStdout: readsStdout,
                                          writesStdin: writesStdin, currentDirectory: currentDirectory)
        addTeardownBlock { command.kill() }
        return command
    }

    /// Runs gcapture to its end within `timeout` seconds (killed after it): a command that ignores a
    /// limit must fail the test, not hang it.
    func runGCapture(_ arguments: [String], timeout: TimeInterval) throws -> (status: Int32, stdout: String, stderr: String) {
        let command = try launch("gcapture", arguments)
        let exited = command.waitForExit(timeout: timeout)
        XCTAssertTrue(exited, "gcapture \(arguments.joined(separator: " ")) still ran after \(timeout) s")
        command.kill()
        return (command.status, command.output, command.errorOutput)
    }
}
