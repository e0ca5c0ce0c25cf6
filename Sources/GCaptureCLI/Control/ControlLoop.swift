import Foundation
import GCapture
import GCaptureControl

/// Why a run ends.
enum RunStopReason: Sendable {
    case signal(String)
    case quit(RequestID?)
    case failure(String)
}

/// Set once by whatever ends the run first (a signal, `quit`, a fatal session error); awaited by the run.
final class StopLatch: Sendable {
    private let reason = OneShot<RunStopReason>()
    func trigger(_ reason: RunStopReason) { self.reason.set(reason) }
    func wait() async -> RunStopReason {
        // Without a deadline the wait returns only with the value.
        await reason.wait(seconds: nil)!
    }
}

/// Drives a `MultiCameraController` (one camera or several) from stdin and the signals until the run ends, then finishes it.
/// Requests are started in the order they come (a `record start` then `record stop` never cross); only a
/// photo's encoding runs on while the next requests are read, so photo replies may come later than replies
/// to requests sent after them: match replies by id.
final class ControlLoop: Sendable {
    let controller: MultiCameraController
    let output: ControlOutput
    private let stop = StopLatch()
    private let photos = CapturesInFlight()
    private let onStopping: @Sendable () -> Void

    /// `onStopping`: called once the run begins to finish, before anything is finalized.
    init(controller: MultiCameraController, output: ControlOutput, onStopping: @escaping @Sendable () -> Void = {}) {
        self.controller = controller
        self.output = output
        self.onStopping = onStopping
    }

    /// The session stopped by itself: finish and exit with this error.
    func fail(_ message: String) { stop.trigger(.failure(message)) }

    /// Runs until a signal, `quit` or a fatal error; then the recording is finalized, the photos requested
    /// are written and the session stops. Throws the fatal error, if that is what ended it.
    func run() async throws {
        StopSignals.shared.onStop { [stop] number in stop.trigger(.signal(StopSignals.name(number))) }
        let reader = Task { await self.consume(StandardInputLines.stream()) }
        let reason = await stop.wait()
        onStopping()
        await controller.shutDown()
        _ = await photos.finish()
        reader.cancel()
        switch reason {
        case .quit(let id):
            output.reply(id, text: "quit")
            output.event("stopped", ["reason": "quit"], text: "stopped")
        case .signal(let name):
            output.event("stopped", ["reason": "signal", "signal": name], text: "stopped by \(name)")
        case .failure(let message):
            output.event("stopped", ["reason": "error", "error": message], text: "stopped: \(message)")
            throw CommandFailure(message)
        }
    }

    /// SIGUSR2: an event's clip begins or goes on (as `trigger`); its events say which.
    func triggerEvent() async {
        if case .failure(let error) = await controller.perform(.trigger(source: "signal"), trigger: "signal") {
            output.event("triggerFailed", ["error": error.message, "trigger": "SIGUSR2"], text: "trigger failed (SIGUSR2): \(error.message)")
        }
    }

    /// SIGUSR1: a photo named by the naming rule; its event says where it went.
    func shutter() async {
        do {
            let ticket = try await controller.requestPhoto(path: nil, trigger: "SIGUSR1")
            photos.start { [controller] in _ = await controller.takePhoto(ticket) }
        } catch {
            output.event("photoFailed", ["error": error.message, "trigger": "SIGUSR1"], text: "photo failed (SIGUSR1): \(error.message)")
        }
    }

    private func consume(_ lines: AsyncStream<StandardInputLines.Line>) async {
        for await line in lines {
            switch line {
            case .tooLong:
                output.fail(nil, "the line is longer than \(ControlProtocol.maxLineBytes) bytes")
            case .text(let text):
                // The \r of a CRLF line too: a script written on Windows has blank lines of only \r.
                let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                // Blank lines and comments: a script of commands may be commented.
                if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
                switch ControlParser.parse(trimmed) {
                case .failure(let error): output.fail(error.id, error.message)
                case .success(let request): if await !handle(request) { return }
                }
            }
        }
    }

    /// Carries out one request; false when nothing more is to be read (quit).
    private func handle(_ request: ControlRequest) async -> Bool {
        let id = request.id
        switch request.command {
        case .photo(let path):
            do {
                let ticket = try await controller.requestPhoto(path: path, trigger: "command")
                photos.start { [controller, output] in output.answer(ControlResponse(id: id, await controller.takePhoto(ticket))) }
            } catch {
                output.fail(id, error.message)
            }
        case .recordStart, .recordStop, .pause, .resume, .switchCamera, .rotate, .mirror:
            output.answer(ControlResponse(id: id, await controller.perform(request.command, trigger: "command")))
        case .trigger:
            output.answer(ControlResponse(id: id, await controller.perform(request.command, trigger: "stdin")))
        case .help:
            output.reply(id, ControlCommand.helpFields, text: "commands: " + ControlCommand.synopsis.joined(separator: "; ") + " (see docs/control-protocol.md)")
        case .quit:
            // Answered once everything is finished, by run().
            stop.trigger(.quit(id))
            return false
        }
        return true
    }
}

/// Stdin as lines, read on a thread of its own (a blocking read must not hold a task's thread). The end of
/// stdin ends the requests, not the run: a kiosk started with stdin on /dev/null runs on, driven by signals.
enum StandardInputLines {
    enum Line: Sendable {
        case text(String)
        /// A line longer than ControlProtocol.maxLineBytes, dropped.
        case tooLong
    }

    static func stream() -> AsyncStream<Line> {
        let (stream, continuation) = AsyncStream<Line>.makeStream()
        Thread.detachNewThread {
            var line: [UInt8] = []
            var tooLong = false
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(STDIN_FILENO, &chunk, chunk.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                for byte in chunk[0..<count] {
                    if byte == UInt8(ascii: "\n") {
                        continuation.yield(tooLong ? .tooLong : .text(String(decoding: line, as: UTF8.self)))
                        line.removeAll(keepingCapacity: true)
                        tooLong = false
                    } else if !tooLong {
                        line.append(byte)
                        if line.count > ControlProtocol.maxLineBytes { tooLong = true; line.removeAll() }
                    }
                }
            }
            if tooLong { continuation.yield(.tooLong) } else if !line.isEmpty { continuation.yield(.text(String(decoding: line, as: UTF8.self))) }
            continuation.finish()
        }
        return stream
    }
}
