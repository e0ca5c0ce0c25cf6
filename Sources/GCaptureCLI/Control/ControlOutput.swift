import Foundation

/// A reply's or an event's fields; JSON values (String, Int, Double, Bool, NSNull, arrays of them).
typealias ControlFields = [String: any Sendable]

/// Everything `gcapture run` says on stdout: replies to requests and events, as JSON lines (--json) or
/// plain words. Replies have "ok", events have "event", so a client tells them apart by one key. One lock
/// around each line: replies and events come from several tasks at once and must not interleave.
final class ControlOutput: Sendable {
    let json: Bool
    private let lock = NSLock()

    init(json: Bool) { self.json = json }

    /// The first line: which protocol this is, so that a client can refuse a version it does not know.
    func hello() {
        event("hello", ["protocol": ControlProtocol.name, "version": ControlProtocol.version],
              text: "gcapture run: control protocol \(ControlProtocol.version); type `help` for the commands")
    }

    func reply(_ id: RequestID?, _ fields: ControlFields = [:], text: String) {
        var object: [String: Any] = fields
        object["ok"] = true
        if let id { object["id"] = id.json }
        write(object, text: text.isEmpty ? "ok" : "ok: \(text)")
    }

    func fail(_ id: RequestID?, _ message: String) {
        var object: [String: Any] = ["ok": false, "error": message]
        if let id { object["id"] = id.json }
        write(object, text: "error: \(message)")
    }

    /// `text` nil: the event is for programs only (progress every second would drown a person's typing).
    func event(_ name: String, _ fields: ControlFields = [:], text: String?) {
        var object: [String: Any] = fields
        object["event"] = name
        if json { write(object, text: "") } else if let text { write([:], text: text) }
    }

    private func write(_ object: [String: Any], text: String) {
        lock.withLock {
            if json { JSONLine.print(object) } else { Console.write(text) }
        }
    }
}
