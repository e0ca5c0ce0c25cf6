import Foundation
import GCaptureControl

/// What the web page drives: the typed commands and events of `gcapture run`'s control protocol
/// (docs/control-protocol.md), the same ones stdin's lines are read into. The program that serves the page
/// provides it; this module reads the page's JSON into commands and writes the replies back, and does not
/// know how a program carries the commands out.
public protocol OperatorConsole: Sendable {
    /// Carries out one request the page sent, already read and allowed (see `WebCommands`), and answers it.
    func perform(_ request: ControlRequest) async -> ControlResponse
    /// The protocol's events from now on (photo, recordingStarted, interrupted...).
    func events() -> AsyncStream<ControlEvent>
    /// What the capture is doing now, for a page that has just opened: JSON values (strings, numbers, booleans,
    /// NSNull, and arrays and dictionaries of them).
    func status() async -> ControlFields
}
