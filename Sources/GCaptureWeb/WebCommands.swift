import Foundation
import GCaptureControl

/// The page's command route: the body read into a request of the control protocol, and what a browser may
/// not do refused: name a path (files are named by the naming rule, in the output folders) or quit the
/// program (that is for whoever runs it).
enum WebCommands {
    static func answer(_ body: Data, console: any OperatorConsole) async -> ControlResponse {
        let request: ControlRequest
        do { request = try read(body) } catch { return error.response }
        switch request.command {
        case .photo(let path?), .recordStart(let path?):
            return ControlResponse(id: request.id, .failure(ControlFailure(
                "over HTTP files are named by the naming rule, in the output folder; \"path\" (\(path)) is not taken")))
        case .quit:
            return ControlResponse(id: request.id, .failure(ControlFailure("quit is not taken over HTTP: stop gcapture where it runs")))
        case .help:
            return ControlResponse(id: request.id, .success(ControlReply(fields: ControlCommand.helpFields, text: "")))
        default:
            return await console.perform(request)
        }
    }

    /// The body as a request: one JSON object, as one stdin line of `gcapture run` takes it. Plain words,
    /// which stdin also takes, are refused: the page sends JSON, and anything else is a mistake.
    static func read(_ body: Data) throws(Refusal) -> ControlRequest {
        guard body.count <= ControlProtocol.maxLineBytes else {
            throw Refusal(id: nil, "the request is longer than \(ControlProtocol.maxLineBytes) bytes")
        }
        let line = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard line.hasPrefix("{") else { throw Refusal(id: nil, "a command is a JSON object, e.g. {\"command\": \"photo\"}") }
        switch ControlParser.parse(line) {
        case .success(let request): return request
        case .failure(let error): throw Refusal(id: error.id, error.message)
        }
    }

    /// A body that is not a request, answered with the line's id when it had a readable one.
    struct Refusal: Error {
        let response: ControlResponse
        init(id: RequestID?, _ message: String) { response = ControlResponse(id: id, .failure(ControlFailure(message))) }
    }
}
