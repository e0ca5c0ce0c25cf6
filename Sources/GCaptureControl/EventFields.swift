import Foundation
import GCapture

extension CaptureStreamOutput.State {
    /// The state as a `streamState` event carries it, from `gcapture stream --json` and from `gcapture run`
    /// with a description's stream alike.
    public var eventFields: ControlFields {
        var fields: ControlFields = ["state": name]
        if case .reconnecting(let attempt, let next, let reason) = self {
            fields["attempt"] = attempt
            fields["retryIn"] = max(0, next.timeIntervalSinceNow)
            fields["reason"] = reason
        }
        if case .failed(let error) = self { fields["error"] = "\(error)" }
        return fields
    }
}

extension CaptureSession.PressureResponse {
    /// The response's name in JSON events (`systemPressure`, from `gcapture run` and the capture commands).
    public var eventName: String {
        switch self {
        case .none: "none"
        case .fewerFramesToOutputs: "fewerFramesToOutputs"
        case .reducedFrameRate: "reducedFrameRate"
        case .interrupted: "interrupted"
        }
    }
}
