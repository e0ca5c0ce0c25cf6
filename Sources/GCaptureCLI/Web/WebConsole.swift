import Foundation
import GCaptureWeb

/// The web page's commands and events: the control protocol of `gcapture run`, carried out by the same
/// controller as stdin's. What a browser may not do is refused here: name a path (files are named by the
/// naming rule, in the output folders) or quit the program (that is for whoever runs it).
struct WebConsole: OperatorConsole {
    let controller: CaptureController
    let output: ControlOutput

    func perform(request: Data) async -> ConsoleReply {
        guard request.count <= ControlProtocol.maxLineBytes else {
            return reply(nil, .failure(ControlFailure("the request is longer than \(ControlProtocol.maxLineBytes) bytes")))
        }
        let line = String(decoding: request, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard line.hasPrefix("{") else {
            return reply(nil, .failure(ControlFailure("a command is a JSON object, e.g. {\"command\": \"photo\"}")))
        }
        let parsed: ControlRequest
        switch ControlParser.parse(line) {
        case .failure(let error): return reply(error.id, .failure(ControlFailure(error.message)))
        case .success(let request): parsed = request
        }
        switch parsed.command {
        case .photo(let path?), .recordStart(let path?):
            return reply(parsed.id, .failure(ControlFailure(
                "over HTTP files are named by the naming rule, in the output folder; \"path\" (\(path)) is not taken")))
        case .quit:
            return reply(parsed.id, .failure(ControlFailure("quit is not taken over HTTP: stop gcapture where it runs")))
        case .help:
            return reply(parsed.id, .success(ControlReply(fields: ControlCommand.helpFields, text: "")))
        default:
            return reply(parsed.id, await controller.perform(parsed.command, trigger: "web"))
        }
    }

    func events() -> AsyncStream<Data> { output.eventStream() }

    func status() async -> [String: any Sendable] { await controller.status() }

    private func reply(_ id: RequestID?, _ result: Result<ControlReply, ControlFailure>) -> ConsoleReply {
        let ok = if case .success = result { true } else { false }
        return ConsoleReply(ok: ok, json: ControlOutput.replyObject(id, result))
    }
}
