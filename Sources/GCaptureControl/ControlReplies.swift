import Foundation
import GCaptureSupport

/// A reply's or an event's fields; JSON values (String, Int, Double, Bool, NSNull, arrays and dictionaries
/// of them).
public typealias ControlFields = [String: any Sendable]

/// What a command answers when it worked: the reply's fields (for JSON) and its plain words.
public struct ControlReply: Sendable {
    public var fields: ControlFields
    public var text: String

    public init(fields: ControlFields = [:], text: String) {
        self.fields = fields
        self.text = text
    }
}

/// Why a command did not do what it asked, in one sentence for the person or program that asked.
public struct ControlFailure: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A request's answer as the protocol sends it: the request's id, and the reply or the failure.
public struct ControlResponse: Sendable {
    public var id: RequestID?
    public var result: Result<ControlReply, ControlFailure>

    public init(id: RequestID?, _ result: Result<ControlReply, ControlFailure>) {
        self.id = id
        self.result = result
    }

    public var ok: Bool { if case .success = result { true } else { false } }

    /// The reply object, as a JSON line of `gcapture run --json` and the web page's command route spell it:
    /// the fields and "ok": true, or "ok": false and "error"; "id" when the request had one.
    public var object: [String: Any] {
        var object: [String: Any]
        switch result {
        case .success(let reply): object = reply.fields; object["ok"] = true
        case .failure(let failure): object = ["ok": false, "error": failure.message]
        }
        if let id { object["id"] = id.json }
        return object
    }

    /// What the web page's command route answers; a reply that is not JSON (it never should be) a bare failure.
    public var json: Data { ControlJSON.encode(object) ?? Data(#"{"ok":false}"#.utf8) }
}

/// One event of the protocol (photo, recordingStarted, interrupted...).
public struct ControlEvent: Sendable {
    public var name: String
    public var fields: ControlFields
    /// Nil: the event is for programs only (progress every second would drown a person's typing).
    public var text: String?

    public init(name: String, fields: ControlFields = [:], text: String?) {
        self.name = name
        self.fields = fields
        self.text = text
    }

    /// The event object: its fields and "event": its name.
    public var object: [String: Any] {
        var object: [String: Any] = fields
        object["event"] = name
        return object
    }

    public var json: Data? { ControlJSON.encode(object) }
}

/// Where the controller's events go: to the program's own output first (`print`), then to every listener
/// (the web page's event streams), whatever the form printed.
public final class ControlEvents: Sendable {
    private let print: @Sendable (ControlEvent) -> Void
    private let listeners = Locked<[UUID: AsyncStream<ControlEvent>.Continuation]>([:])

    public init(print: @escaping @Sendable (ControlEvent) -> Void) { self.print = print }

    public func emit(_ name: String, _ fields: ControlFields = [:], text: String?) {
        let event = ControlEvent(name: name, fields: fields, text: text)
        print(event)
        for listener in listeners.withLock({ Array($0.values) }) { listener.yield(event) }
    }

    /// The events from now on. A listener that falls 256 events behind loses the oldest.
    public func stream() -> AsyncStream<ControlEvent> {
        let (stream, continuation) = AsyncStream<ControlEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let key = UUID()
        listeners.withLock { $0[key] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.listeners.withLock { $0.removeValue(forKey: key) } }
        return stream
    }
}

/// How the protocol spells JSON, on stdout and over HTTP alike: one line, keys sorted, slashes as they are.
public enum ControlJSON {
    public static func encode(_ object: [String: Any]) -> Data? {
        try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    }
}
