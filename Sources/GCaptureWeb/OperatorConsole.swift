import Foundation

/// What the web page drives: the commands and events of `gcapture run`'s control protocol
/// (docs/control-protocol.md). The program that serves the page provides it; this module knows the engine's
/// outputs and HTTP, not how a program carries out its commands.
public protocol OperatorConsole: Sendable {
    /// Carries out one request of the control protocol, a JSON object as one stdin line of `gcapture run`
    /// takes it (`{"command": "photo"}`), and answers with its reply object.
    func perform(request: Data) async -> ConsoleReply
    /// The protocol's events from now on (photo, recordingStarted, interrupted...), each a JSON object.
    func events() -> AsyncStream<Data>
    /// What the capture is doing now, for a page that has just opened: JSON values (strings, numbers, booleans,
    /// NSNull, and arrays and dictionaries of them).
    func status() async -> [String: any Sendable]
}

/// A reply of the control protocol: whether the command did what it asked, and the reply object.
public struct ConsoleReply: Sendable {
    public var ok: Bool
    public var json: Data

    public init(ok: Bool, json: Data) {
        self.ok = ok
        self.json = json
    }
}
