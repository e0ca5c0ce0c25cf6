import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What one child process cost, as the kernel accounted it (wait4), and what it printed on stdout.
struct ChildUsage: Sendable {
    /// The exit code, or nil when a signal ended it (see `signal`).
    var exitCode: Int32?
    var signal: Int32?
    var stdout: String
    var wallSeconds: Double
    var userSeconds: Double
    var systemSeconds: Double
    /// Peak resident set size of the program (VmHWM of its address space, KiB), sampled while it ran.
    var peakRSSKiB: Int
    /// The resident set's two parts at their largest samples (KiB): anonymous memory (heap, frames, stacks,
    /// relocated data) and pages of mapped files (code and constants of the program and its libraries,
    /// which other processes may share and the kernel may drop and read again).
    var peakSplit: ResidentSplit = .init()
    /// ru_maxrss from wait4 (KiB). Not the program's own peak: posix_spawn's vfork child execs from the
    /// parent's address space, and Linux folds that address space's high-water mark into the child's
    /// maxrss at exec, so this is at least the parent's RSS at spawn time.
    var waitMaxRSSKiB: Int
    /// Page faults served without I/O (ru_minflt): mostly first touches of freshly mapped memory.
    var minorFaults: Int = 0

    var cpuSeconds: Double { userSeconds + systemSeconds }
    var peakRSSMiB: Double { Double(peakRSSKiB) / 1024 }

    /// Another child run after this one for the same job: times summed, memory the larger of the two.
    mutating func add(_ next: ChildUsage) {
        wallSeconds += next.wallSeconds
        userSeconds += next.userSeconds
        systemSeconds += next.systemSeconds
        minorFaults += next.minorFaults
        peakRSSKiB = max(peakRSSKiB, next.peakRSSKiB)
        waitMaxRSSKiB = max(waitMaxRSSKiB, next.waitMaxRSSKiB)
        peakSplit = ResidentSplit(anonymousKiB: max(peakSplit.anonymousKiB, next.peakSplit.anonymousKiB),
                                  fileKiB: max(peakSplit.fileKiB, next.peakSplit.fileKiB))
    }
    var succeeded: Bool { exitCode == 0 }
    var endDescription: String {
        if let exitCode { return "exit status \(exitCode)" }
        return "signal \(signal ?? 0)"
    }
}

/// The largest anonymous and file-backed parts of a resident set seen over a run (RssAnon and RssFile of
/// /proc/<pid>/status, KiB). Each is its own maximum, so they need not add up to the peak.
struct ResidentSplit: Codable, Sendable {
    var anonymousKiB = 0
    var fileKiB = 0

    mutating func include(_ status: String) {
        anonymousKiB = max(anonymousKiB, ChildProcess.memoryKiB(inStatus: status, field: "RssAnon") ?? 0)
        fileKiB = max(fileKiB, ChildProcess.memoryKiB(inStatus: status, field: "RssFile") ?? 0)
    }
}

/// Runs programs with posix_spawn and reaps them with wait4, which reports the CPU time of that one child
/// (user + system). Its peak RSS is read from /proc/<pid>/status (VmHWM) while it runs: wait4's ru_maxrss
/// would include the parent's RSS (see ChildUsage.waitMaxRSSKiB). stderr is inherited.
enum ChildProcess {
    /// This benchmark's own executable, to re-run it in a child mode.
    static var currentExecutable: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if length > 0 { return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CommandLine.arguments[0]
    }

    /// posix_spawn(p) of `executable` with `arguments` and this process's environment: the child's pid, and 0
    /// or the error number.
    static func spawn(_ executable: String, _ arguments: [String], actions: inout posix_spawn_file_actions_t,
                      searchPath: Bool = false) -> (pid: pid_t, error: Int32) {
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let error = searchPath
            ? posix_spawnp(&pid, executable, &actions, nil, argv, envp)
            : posix_spawn(&pid, executable, &actions, nil, argv, envp)
        return (pid, error)
    }

    /// Spawns `executable` (looked up in PATH when `searchPath`), collects its stdout and waits for it; after
    /// `timeout` seconds it is killed (and reported as ended by SIGKILL).
    static func run(_ executable: String, _ arguments: [String], searchPath: Bool = false,
                    timeout: Double) throws(BenchmarkError) -> ChildUsage {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .child("pipe failed: errno \(errno)") }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        // Neither end leaks into other children; the child gets its copy of the write end below.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copy: the child keeps only its stdout end of the pipe.
        posix_spawn_file_actions_adddup2(&actions, writeEnd, STDOUT_FILENO)

        let started = Monotonic.now
        let (pid, spawned) = spawn(executable, arguments, actions: &actions, searchPath: searchPath)
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            throw .child("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }

        let (output, peakRSS, peakSplit) = readAll(readEnd, pid: pid, started: started, deadline: started + UInt64(timeout * 1e9))
        close(readEnd)

        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw .child("wait4 failed: errno \(errno)") }
        }
        let ended = Monotonic.now

        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
        let terminatingSignal = status & 0x7f
        return ChildUsage(
            exitCode: terminatingSignal == 0 ? (status >> 8) & 0xff : nil,
            signal: terminatingSignal == 0 ? nil : terminatingSignal,
            stdout: String(decoding: output, as: UTF8.self),
            wallSeconds: Monotonic.seconds(from: started, to: ended),
            userSeconds: seconds(usage.ru_utime),
            systemSeconds: seconds(usage.ru_stime),
            peakRSSKiB: peakRSS,
            peakSplit: peakSplit,
            waitMaxRSSKiB: usage.ru_maxrss,
            minorFaults: usage.ru_minflt)
    }

    /// This program again in a hidden child mode (`gcapture-bench child …`). It must exit 0 and print its report
    /// as the last line of stdout: one JSON object, decoded as `Report`. `label` names the child in errors.
    static func runChild<Report: Decodable>(_ arguments: [String], timeout: Double, label: String,
                                            as _: Report.Type = Report.self) throws(BenchmarkError) -> (ChildUsage, Report) {
        let usage = try run(currentExecutable, ["child"] + arguments, timeout: timeout)
        guard usage.succeeded else { throw .child("\(label) ended with \(usage.endDescription)") }
        guard let line = usage.stdout.split(separator: "\n").last,
              let report = try? JSONDecoder().decode(Report.self, from: Data(line.utf8)) else {
            throw .child("\(label) printed no report: \(usage.stdout.debugDescription)")
        }
        return (usage, report)
    }

    /// The child side of runChild: prints what `body` returns as one JSON line; the exit status for main.
    static func serve<Report: Encodable>(_ label: String, _ body: () async throws -> Report) async -> Int32 {
        do {
            let report = try await body()
            print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
            return 0
        } catch {
            printError("child \(label): \(error)")
            return 1
        }
    }

    /// gst-launch-1.0 -q running `description` (words separated by single spaces, nothing quoted) to its end;
    /// anything but exit status 0 is an error.
    static func gstLaunch(_ description: String, timeout: Double) throws(BenchmarkError) -> ChildUsage {
        let usage = try run("gst-launch-1.0", ["-q"] + description.split(separator: " ").map(String.init),
                            searchPath: true, timeout: timeout)
        guard usage.succeeded else { throw .child("gst-launch-1.0 ended with \(usage.endDescription): \(description)") }
        return usage
    }

    /// How often the child's VmHWM is sampled. It only grows, so the last sample before exit misses at most
    /// what the child allocated in its final moments (while tearing down).
    static let memorySamplingMilliseconds: UInt64 = 20

    /// Reads until end of file (the child exited, or at least closed its stdout), sampling the child's peak RSS
    /// and killing it at the deadline. The child is not reaped yet, so its pid cannot have been reused.
    private static func readAll(_ fd: Int32, pid: pid_t, started: UInt64,
                                deadline: UInt64) -> (output: [UInt8], peakRSSKiB: Int, peakSplit: ResidentSplit) {
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var killed = false
        var peakRSS = 0
        var peakSplit = ResidentSplit()
        let statusPath = "/proc/\(pid)/status"
        // posix_spawn returns as soon as the child starts its exec, a moment before the child leaves the
        // parent's address space: a sample taken then would show the parent's VmHWM. Sampling starts later.
        let firstSample = started + memorySamplingMilliseconds * 1_000_000
        while true {
            let now = Monotonic.now
            if now >= firstSample {
                // An exited (zombie) child has no memory lines: the last values read stay.
                if let status = try? String(contentsOfFile: statusPath, encoding: .utf8) {
                    peakRSS = max(peakRSS, memoryKiB(inStatus: status, field: "VmHWM") ?? 0)
                    peakSplit.include(status)
                }
            }
            if !killed, now >= deadline {
                kill(pid, SIGKILL)
                killed = true
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let untilDeadline = (deadline - min(now, deadline)) / 1_000_000 + 1
            let waitMilliseconds = killed ? -1 : Int32(min(untilDeadline, memorySamplingMilliseconds))
            let ready = poll(&poller, 1, waitMilliseconds)
            if ready == 0 { continue }
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            let count = read(fd, &buffer, buffer.count)
            if count > 0 {
                output.append(contentsOf: buffer[..<count])
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        return (output, peakRSS, peakSplit)
    }

    /// VmHWM ("VmHWM:     51234 kB") of a live process: the peak RSS of its current address space, which
    /// exec started afresh.
    static func highWaterMarkKiB(_ statusPath: String) -> Int? { memoryKiB(statusPath, field: "VmHWM") }

    /// A memory line of a live process's status ("VmRSS:     51234 kB"), in KiB.
    static func memoryKiB(_ statusPath: String, field: String) -> Int? {
        guard let status = try? String(contentsOfFile: statusPath, encoding: .utf8) else { return nil }
        return memoryKiB(inStatus: status, field: field)
    }

    static func memoryKiB(inStatus status: String, field: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }

    private static func seconds(_ time: timeval) -> Double {
        Double(time.tv_sec) + Double(time.tv_usec) / 1e6
    }
}

extension Array where Element == String {
    /// The argument after `flag` (`--seconds 10` → "10"), if both are there.
    func value(after flag: String) -> String? {
        firstIndex(of: flag).flatMap { $0 + 1 < count ? self[$0 + 1] : nil }
    }
}
