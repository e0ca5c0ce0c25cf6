import Dispatch
import Foundation
import GCaptureControl
import GCaptureSupport
import Synchronization

/// How every command ends early: the first terminating signal (INT, TERM, HUP, QUIT) or a closed stdout
/// asks the command to stop, and it finishes what it started (the movie is finalized, the photos already
/// requested are written, the report is printed) before it exits; a second signal exits at once.
/// Without this SIGQUIT printed a crash report while the recording went on, SIGHUP killed a recording
/// without finalizing it, and an interrupted `frames` printed nothing.
final class StopSignals: Sendable {
    static let shared = StopSignals()

    /// The signals that end a command; SIGPIPE is ignored instead, so that a closed stdout shows up as a
    /// failed write (see `outputClosed`) rather than killing the process in the middle of a write.
    static let terminating: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Signals whose default action kills the process but that a command gives no meaning to unless it
    /// says so (`gcapture run`: SIGUSR1 is the shutter): ignored, since killing `record` left its movie
    /// unfinalized with a recovery sidecar, and a signal that means nothing must not cost a recording.
    static let meaningless: [Int32] = [SIGUSR1, SIGUSR2]

    private struct State {
        var sources: [any DispatchSourceSignal] = []
        var received: Int32?
        var handlers: [@Sendable (Int32) -> Void] = []
        var sleepers: [UInt64: Task<Void, Never>] = [:]
        var nextSleeper: UInt64 = 0
    }

    private let state = Locked(State())
    /// Not the main queue: a command may block its main thread while it waits, and the second signal
    /// must still end the process at once.
    private let queue = DispatchQueue(label: "gcapture.signals")

    /// Takes the terminating signals over from their default actions (and from the runtime's crash
    /// reporter, which handles SIGQUIT). Call first thing in a command's run.
    /// `actions`: signals that do something else instead (`gcapture run`: SIGHUP reloads, SIGUSR1 takes a
    /// photo); each action runs on the signal queue, every time the signal comes, and must not block.
    func install(actions: [Int32: @Sendable () -> Void] = [:]) {
        state.withLock { state in
            guard state.sources.isEmpty else { return }
            signal(SIGPIPE, SIG_IGN)
            for number in Self.meaningless where actions[number] == nil { signal(number, SIG_IGN) }
            let stopping = Self.terminating.filter { actions[$0] == nil }.map { number in
                (number, { [weak self] in self?.received(number, forcing: true) } as @Sendable () -> Void)
            }
            state.sources = (stopping + actions.map { ($0.key, $0.value) }).map { number, handler in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler(handler: handler)
                source.resume()
                return source
            }
        }
    }

    /// The first signal's number, once one came.
    var received: Int32? { state.withLock { $0.received } }

    /// The name of the signal that stopped the command ("SIGINT"), for its report.
    var receivedName: String? { received.map(Self.name) }

    /// Runs `handler` (on the signal queue) when the first signal comes, or now when it already came.
    func onStop(_ handler: @escaping @Sendable (Int32) -> Void) {
        let already: Int32? = state.withLock { state in
            if state.received == nil { state.handlers.append(handler) }
            return state.received
        }
        if let already { handler(already) }
    }

    /// Sleeps for `seconds` unless a signal comes first; returns whether the whole time passed.
    @discardableResult
    func sleep(seconds: Double) async -> Bool {
        let sleeper = Task { _ = try? await Task.sleep(for: .seconds(seconds)) }
        let id: UInt64? = state.withLock { state in
            guard state.received == nil else { return nil }
            state.nextSleeper += 1
            state.sleepers[state.nextSleeper] = sleeper
            return state.nextSleeper
        }
        if id == nil { sleeper.cancel() }
        await sleeper.value
        if let id { _ = state.withLock { $0.sleepers.removeValue(forKey: id) } }
        return received == nil
    }

    /// Stdout's reader went away (a write failed): the command stops as it does for a signal, since no
    /// one is left to read what it reports, but it is not a second signal however often it happens.
    func outputClosed() {
        received(SIGPIPE, forcing: false)
    }

    private func received(_ number: Int32, forcing: Bool) {
        let first: (handlers: [@Sendable (Int32) -> Void], sleepers: [Task<Void, Never>])? = state.withLock { state in
            guard state.received == nil else { return nil }
            state.received = number
            defer { state.handlers = []; state.sleepers = [:] }
            return (state.handlers, Array(state.sleepers.values))
        }
        guard let first else {
            if forcing { Self.exitNow(number) }
            return
        }
        first.handlers.forEach { $0(number) }
        first.sleepers.forEach { $0.cancel() }
    }

    /// The second signal: out without finishing anything (a recording stays as its crash-safe fragments,
    /// which the next recording in the folder recovers).
    private static func exitNow(_ number: Int32) -> Never {
        let message = "gcapture: a second signal (\(name(number))): exiting without finishing\n"
        _ = message.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        _exit(128 + number)
    }

    static func name(_ number: Int32) -> String {
        switch number {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        case SIGQUIT: "SIGQUIT"
        case SIGPIPE: "SIGPIPE"
        default: "signal \(number)"
        }
    }

    /// For the commands' --help.
    static let helpText = """
        Stopping: the first INT, TERM, HUP or QUIT signal (or the reader of stdout going away) stops the \
        command early but cleanly: a recording is finalized, photos already requested are written, the \
        report is printed, and the exit status is 0 when that went well. A second signal exits at once \
        with status 128 + its number (130 for SIGINT), leaving a recording as its crash-safe fragments. \
        SIGUSR1 and SIGUSR2 are ignored where the command gives them no meaning.
        """
}

/// Everything a command prints on stdout goes through here: flushed at once, so a program reading through
/// a pipe sees each line when it happens (not when a buffer fills or we exit), and a failed write (the
/// reader is gone; SIGPIPE is ignored) stops the command as a signal would.
enum Console {
    /// One write(2) per line, straight to the descriptor: its EPIPE is seen here whatever stdio's buffering
    /// (under `stdbuf -oL` print wrote the line itself, failed silently, and the fflush after it had nothing
    /// left to fail on, so a closed stdout never stopped the command).
    static func write(_ text: String, terminator: String = "\n") {
        // A progress line a terminal shows rewritten in place ends before anything else is said.
        let endsProgress = progressState.withLock { state in
            defer { state.lineOpen = false }
            return state.lineOpen
        }
        writeNow((endsProgress ? "\n" : "") + text + terminator)
    }

    /// Whether stdout is a terminal, where a progress line is rewritten in place with `\r`.
    static let isTerminal = isatty(STDOUT_FILENO) == 1

    private struct Progress {
        var lineOpen = false
        var lastLine: ContinuousClock.Instant?
    }
    private static let progressState = Locked(Progress())

    /// A progress line: rewritten in place on a terminal; into a pipe or a log, where `\r` rewrites pile
    /// up on one line, a whole line at most once a second.
    static func progress(_ text: String) {
        guard isTerminal else {
            let now = ContinuousClock.now
            let due = progressState.withLock { state in
                guard state.lastLine.map({ now - $0 >= .seconds(1) }) ?? true else { return false }
                state.lastLine = now
                return true
            }
            if due { write(text) }
            return
        }
        progressState.withLock { $0.lineOpen = true }
        writeNow("\r" + text)
    }

    private static func writeNow(_ text: String) {
        // Anything print() left in stdio's buffer goes first, to keep the order. nil: every stream, since
        // Swift 6 does not let us name the C global `stdout`.
        fflush(nil)
        var line = text
        let closed = line.withUTF8 { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno == EPIPE
                }
                offset += written
            }
            return false
        }
        if closed { StopSignals.shared.outputClosed() }
    }
}

/// One JSON object per line (see Console).
enum JSONLine {
    /// The object as one line of JSON, keys sorted: how every JSON the CLI says is spelt.
    static func encode(_ object: [String: Any]) -> Data? { ControlJSON.encode(object) }

    static func print(_ object: [String: Any]) {
        guard let data = encode(object) else { return }
        Console.write(String(decoding: data, as: UTF8.self))
    }
}
