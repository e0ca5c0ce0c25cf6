import Foundation
import GCaptureControl
import GCaptureSupport

/// Everything `gcapture run` says on stdout: replies to requests and events, as JSON lines (--json) or
/// plain words. Replies have "ok", events have "event", so a client tells them apart by one key. One lock
/// around each line: replies and events come from several tasks at once and must not interleave.
final class ControlOutput: Sendable {
    let json: Bool
    private let writing = Lock()
    /// The controller's events: printed here, and handed to the web page's event streams.
    let events: ControlEvents

    init(json: Bool) {
        self.json = json
        let writing = writing
        events = ControlEvents { event in
            if json {
                writing.withLock { JSONLine.print(event.object) }
            } else if let text = event.text {
                writing.withLock { Console.write(text) }
            }
        }
    }

    /// The first line: which protocol this is, so that a client can refuse a version it does not know.
    func hello() {
        event("hello", ["protocol": ControlProtocol.name, "version": ControlProtocol.version],
              text: "gcapture run: control protocol \(ControlProtocol.version); type `help` for the commands")
    }

    func reply(_ id: RequestID?, _ fields: ControlFields = [:], text: String) {
        answer(ControlResponse(id: id, .success(ControlReply(fields: fields, text: text))))
    }

    func fail(_ id: RequestID?, _ message: String) {
        answer(ControlResponse(id: id, .failure(ControlFailure(message))))
    }

    func answer(_ response: ControlResponse) {
        let text = switch response.result {
        case .success(let reply): reply.text.isEmpty ? "ok" : "ok: \(reply.text)"
        case .failure(let failure): "error: \(failure.message)"
        }
        writing.withLock {
            if json { JSONLine.print(response.object) } else { Console.write(text) }
        }
    }

    /// `text` nil: the event is for programs only (progress every second would drown a person's typing).
    func event(_ name: String, _ fields: ControlFields = [:], text: String?) {
        events.emit(name, fields, text: text)
    }
}
