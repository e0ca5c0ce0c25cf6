import GStreamerKit

/// Everything that can go wrong in the engine, each case a sentence a user can act on.
public enum CaptureError: Error, Sendable, CustomStringConvertible, Equatable {
    case unknownDevice(id: String, known: [String])
    case presetUnsupported(preset: CaptureSession.Preset, device: String, offered: String, needs: String)
    case accessDenied(device: String, advice: String)
    case cannotAddInput(String)
    case cannotAddOutput(String)
    case invalidSettings(String)
    case configurationFailed(reason: String, underlying: GStreamerError?)
    case sessionNotRunning
    case startFailed(reason: String, underlying: GStreamerError?)
    case deviceFailed(device: String, underlying: GStreamerError)
    case outputFailed(output: String, underlying: GStreamerError)
    case timedOut(String)
    case missingPlugin(String)
    case tooManyPendingCaptures(limit: Int)

    public var description: String {
        switch self {
        case .unknownDevice(let id, let known):
            "no device with id '\(id)'; devices present: " + (known.isEmpty ? "none" : known.joined(separator: ", "))
        case .presetUnsupported(let preset, let device, let offered, let needs):
            "\(device) offers \(offered); preset \(preset.rawValue) needs \(needs)"
        case .accessDenied(let device, let advice):
            "cannot open \(device): \(advice)"
        case .cannotAddInput(let reason): "cannot add input: \(reason)"
        case .cannotAddOutput(let reason): "cannot add output: \(reason)"
        case .invalidSettings(let reason): "invalid settings: \(reason)"
        case .configurationFailed(let reason, let underlying):
            "configuration not applied, the previous one keeps running: \(reason)" + (underlying.map { " (\($0))" } ?? "")
        case .sessionNotRunning: "the capture session is not running"
        case .startFailed(let reason, let underlying):
            "the capture session could not start: \(reason)" + (underlying.map { " (\($0))" } ?? "")
        case .deviceFailed(let device, let underlying): "\(device) failed: \(underlying)"
        case .outputFailed(let output, let underlying): "\(output) failed and was detached: \(underlying)"
        case .timedOut(let what): "\(what) timed out"
        case .tooManyPendingCaptures(let limit):
            "\(limit) photos are already waiting to be processed; wait for readiness before capturing more"
        case .missingPlugin(let element):
            "GStreamer element '\(element)' is not installed (apt install gstreamer1.0-plugins-good gstreamer1.0-plugins-bad)"
        }
    }
}
