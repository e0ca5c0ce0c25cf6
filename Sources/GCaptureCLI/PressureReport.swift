import Foundation
import GCapture
import GCaptureControl

/// Reports a running session's system pressure as it changes: a line on stderr (the human output keeps
/// stdout for results), or a `systemPressure` JSON event on stdout with --json. The command keeps running.
enum PressureReport {
    static func follow(_ session: CaptureSession, json: Bool) -> Task<Void, Never> {
        let events = session.events()
        return Task {
            for await event in events { report(event, json: json) }
        }
    }

    /// Every camera's, for several cameras at once (the event names its camera).
    static func follow(_ session: CaptureMultiCamSession, json: Bool) -> Task<Void, Never> {
        let events = session.events()
        return Task {
            for await event in events { report(event.event, json: json) }
        }
    }

    private static func report(_ event: CaptureSession.Event, json: Bool) {
        guard case .systemPressureChanged(let device, let state, let response) = event else { return }
        if json {
            JSONLine.print(["event": "systemPressure", "camera": device.description, "level": state.level.rawValue,
                            "factors": state.factors.names, "response": response.eventName])
        } else {
            let change = response == .none ? "capture unchanged" : "\(response)"
            FileHandle.standardError.write(Data("gcapture: system pressure \(state) on \(device.localizedName): \(change)\n".utf8))
        }
    }

}
