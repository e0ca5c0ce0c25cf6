import Foundation
import GCaptureSupport

/// A reply's or an event's fields; JSON values (String, Int, Double, Bool, NSNull, arrays of them).
typealias ControlFields = [String: any Sendable]

/// Everything `gcapture run` says on stdout: replies to requests and events, as JSON lines (--json) or
/// plain words. Replies have "ok", events have "event", so a client tells them apart by one key. One lock
/// around each line: replies and events come from several tasks at once and must not interleave.
final class ControlOutput: Sendable {
    let json: Bool
    private let writing = Lock()
    /// The web page's event streams: every event as a JSON object, whatever the form printed on stdout.
    private let listeners = Locked<[UUID: AsyncStream<Data>.Continuation]>([:])

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
        let listening = listeners.withLock { Array($0.values) }
        if !listening.isEmpty, let line = JSONLine.encode(object) {
            for listener in listening { listener.yield(line) }
        }
    }

    /// The events from now on, as JSON objects. A listener that falls 256 events behind loses the oldest.
    func eventStream() -> AsyncStream<Data> {
        let (stream, continuation) = AsyncStream<Data>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let key = UUID()
        listeners.withLock { $0[key] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.listeners.withLock { $0.removeValue(forKey: key) } }
        return stream
    }

    /// A reply object as JSON: what the web page's command route answers.
    static func replyObject(_ id: RequestID?, _ result: Result<ControlReply, ControlFailure>) -> Data {
        var object: [String: Any]
        switch result {
        case .success(let reply): object = reply.fields; object["ok"] = true
        case .failure(let failure): object = ["ok": false, "error": failure.message]
        }
        if let id { object["id"] = id.json }
        return JSONLine.encode(object) ?? Data(#"{"ok":false}"#.utf8)
    }

    private func write(_ object: [String: Any], text: String) {
        writing.withLock {
            if json { JSONLine.print(object) } else { Console.write(text) }
        }
    }
}
