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
            for await event in events { Self.report(event, camera: nil, json: json) }
        }
    }

    /// Every camera's, for several cameras at once: each line names its camera.
    init(_ session: CaptureMultiCamSession, json: Bool) {
        let events = session.events()
        task = Task {
            for await event in events { Self.report(event.event, camera: event.camera, json: json) }
        }
    }

    deinit { task.cancel() }

    private static func report(_ event: CaptureSession.Event, camera: CaptureDevice?, json: Bool) {
        let name: String, reason: CaptureSession.InterruptionReason
        switch event {
        case .wasInterrupted(let interrupted): (name, reason) = ("interrupted", interrupted)
        case .interruptionEnded(let ended): (name, reason) = ("interruptionEnded", ended)
        default: return
        }
        if json {
            var object: [String: Any] = ["event": name, "reason": Self.name(of: reason), "reasonCode": reason.rawValue, "message": reason.description]
            if let camera { object["camera"] = camera.description }
            JSONLine.print(object)
        } else {
            let which = camera.map { "\($0.localizedName) " } ?? ""
            let line = name == "interrupted" ? "\(which)interrupted: \(reason); waiting for it to come back"
                : "\(which)interruption ended: \(reason), capturing again"
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
