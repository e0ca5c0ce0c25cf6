import Foundation
import GCapture

/// Says when the session's camera or microphone is interrupted and when it is back, while the command keeps
/// running: a line on stderr (stdout carries the command's own results), or a JSON event with --json.
final class InterruptionReporter: Sendable {
    private let task: Task<Void, Never>

    /// Subscribe before the session starts: a camera held elsewhere at start is reported as it starts.
    init(_ session: CaptureSession, json: Bool) {
        let events = session.events()
        task = Task {
            for await event in events {
                switch event {
                case .wasInterrupted(let reason): Self.report("interrupted", reason, json: json)
                case .interruptionEnded(let reason): Self.report("interruptionEnded", reason, json: json)
                default: break
                }
            }
        }
    }

    deinit { task.cancel() }

    private static func report(_ event: String, _ reason: CaptureSession.InterruptionReason, json: Bool) {
        if json {
            JSONLine.print(["event": event, "reason": name(of: reason), "reasonCode": reason.rawValue, "message": reason.description])
        } else {
            let line = event == "interrupted" ? "interrupted: \(reason); waiting for it to come back" : "interruption ended: \(reason), capturing again"
            FileHandle.standardError.write(Data("gcapture: \(line)\n".utf8))
        }
    }

    /// The reason's case name, as AVFoundation code spells it.
    static func name(of reason: CaptureSession.InterruptionReason) -> String {
        switch reason.rawValue {
        case 1: "videoDeviceNotAvailableInBackground"
        case 2: "audioDeviceInUseByAnotherClient"
        case 3: "videoDeviceInUseByAnotherClient"
        case 4: "videoDeviceNotAvailableWithMultipleForegroundApps"
        case 5: "videoDeviceNotAvailableDueToSystemPressure"
        case 100: "videoDeviceUnplugged"
        case 101: "videoDeviceStalled"
        case 102: "audioDeviceUnplugged"
        case 103: "audioServerUnavailable"
        default: "unknown"
        }
    }
}
