import GStreamerKit

/// Everything that can go wrong in the engine, each case a sentence a user can act on.
public enum CaptureError: Error, Sendable, CustomStringConvertible, Equatable {
    case unknownDevice(id: String, known: [String])
    case presetUnsupported(preset: CaptureSession.Preset, device: String, offered: String, needs: String)
    case accessDenied(device: String, advice: String)
    case cannotAddInput(String)
    case cannotAddOutput(String)
    /// A multi-camera session's connection that cannot be added (AVCaptureMultiCamSession raises instead).
    case cannotAddConnection(String)
    /// A multi-camera configuration the machine cannot run (AVError.sessionHardwareCostOverage): its
    /// hardwareCost or systemPressureCost is over 1.0; the reason names the bus or processors and what to do.
    case hardwareCostOverage(cost: Double, reason: String)
    case invalidSettings(String)
    case configurationFailed(reason: String, underlying: GStreamerError?)
    /// A picture could not be encoded or decoded (JPEG, the photo encoder turning or converting a frame).
    case encodingFailed(reason: String, underlying: GStreamerError?)
    /// A file or folder could not be written, read, created or removed: the sentence names the path and the
    /// system's reason.
    case fileAccessFailed(String)
    case sessionNotRunning
    case startFailed(reason: String, underlying: GStreamerError?)
    case deviceFailed(device: String, underlying: GStreamerError)
    case outputFailed(output: String, underlying: GStreamerError)
    case timedOut(String)
    case missingPlugin(String)
    /// A GStreamer element that comes in a Debian package other than the usual plugin sets.
    case missingPackage(element: String, package: String)
    /// No video sink could show a preview; `tried` says each sink tried and why it was not used.
    case noDisplay(tried: [String])
    case tooManyPendingCaptures(limit: Int)
    /// A live view over WebRTC has as many viewers as it serves (connected or connecting).
    case tooManyViewers(limit: Int)
    /// Recording stopped at maxRecordedDuration; the file is complete.
    case maximumDurationReached
    /// Recording stopped at maxRecordedFileSize; the file is complete.
    case maximumFileSizeReached
    /// Recording stopped because free space fell under minFreeDiskSpaceLimit; the file is complete.
    case diskSpaceLimitReached
    /// The microphone or audio server went away; the file is finalized up to that moment.
    case audioDeviceFailed(device: String, underlying: GStreamerError)
    /// Writing or encoding failed; the file plays up to the failure.
    case recordingFailed(reason: String, underlying: GStreamerError?)
    /// Stopped before any frame reached the file; no file is left.
    case noFramesRecorded
    /// A recording or a photo never replaces a file (AVFoundation's fileAlreadyExists): the file at the URL
    /// is left as it was. See `CaptureMovieFileOutput.removeMovie(at:)`; a program replacing a photo removes
    /// the old one first.
    case fileAlreadyExists(path: String)
    /// The URL asked for is taken by a take just recovered from a recording a crash or power cut interrupted
    /// (see `CaptureMovieFileOutput.didRecoverMovieNotification`): kept, never replaced.
    case recoveredTakeExists(path: String)
    /// The session's camera was interrupted (unplugged, held by another program, stalled...). A recording
    /// whose `interruptionBehavior` is `.finalizeAndResume` ends here, complete (its file plays to the
    /// interruption), and goes on in the next file when the interruption ends; a photo asked for, or still
    /// waiting for its frame, while the camera is interrupted fails with it.
    case sessionWasInterrupted(CaptureSession.InterruptionReason)
    /// The system's device discovery (GStreamer's device monitor) could not start: no real device is listed.
    case deviceDiscoveryFailed(classes: [String], underlying: GStreamerError)

    /// A recording that stopped for this reason is complete and plays to its end (AVFoundation's
    /// "recording successfully finished" flag).
    public var recordingFinishedSuccessfully: Bool {
        switch self {
        case .maximumDurationReached, .maximumFileSizeReached, .diskSpaceLimitReached, .sessionWasInterrupted: true
        default: false
        }
    }

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
        case .cannotAddConnection(let reason): "cannot add connection: \(reason)"
        case .hardwareCostOverage(let cost, let reason):
            "the cameras cannot stream together (cost \(String(format2: cost)), over 1.0): \(reason)"
        case .invalidSettings(let reason): "invalid settings: \(reason)"
        case .configurationFailed(let reason, let underlying):
            "configuration not applied, the previous one keeps running: \(reason)" + (underlying.map { " (\($0))" } ?? "")
        case .encodingFailed(let reason, let underlying): reason + (underlying.map { " (\($0))" } ?? "")
        case .fileAccessFailed(let sentence): sentence
        case .sessionNotRunning: "the capture session is not running"
        case .startFailed(let reason, let underlying):
            "the capture session could not start: \(reason)" + (underlying.map { " (\($0))" } ?? "")
        case .deviceFailed(let device, let underlying): "\(device) failed: \(underlying)"
        case .outputFailed(let output, let underlying): "\(output) failed and was detached: \(underlying)"
        case .timedOut(let what): "\(what) timed out"
        case .maximumDurationReached: "the recording reached its maximum duration"
        case .maximumFileSizeReached: "the recording reached its maximum file size"
        case .diskSpaceLimitReached: "free disk space fell under the recording's limit"
        case .audioDeviceFailed(let device, let underlying): "the microphone \(device) failed: \(underlying)"
        case .recordingFailed(let reason, let underlying): "recording failed: \(reason)" + (underlying.map { " (\($0))" } ?? "")
        case .sessionWasInterrupted(let reason): "the session was interrupted: \(reason)"
        case .noFramesRecorded: "the recording stopped before any frame reached the file"
        case .fileAlreadyExists(let path): "\(path) already exists; a photo or a recording never replaces a file"
        case .recoveredTakeExists(let path):
            "\(path) is a take recovered from an interrupted recording; a recording never replaces a file"
        case .tooManyPendingCaptures(let limit):
            "\(limit) photos are already waiting to be processed; wait for readiness before capturing more"
        case .tooManyViewers(let limit):
            "the live view has its \(limit) viewers already; one must leave before another joins"
        case .deviceDiscoveryFailed(let classes, _):
            "no \(classes.joined(separator: " or ")) device can be listed: GStreamer's device monitor did not start; "
                + "is a device provider plugin (gstreamer1.0-plugins-good for V4L2) installed?"
        case .noDisplay(let tried):
            "no display to show the preview on: tried " + tried.joined(separator: "; ")
                + "; run it in a desktop session, or name a video sink to use"
        case .missingPackage(let element, let package):
            "GStreamer element '\(element)' is not installed (apt install \(package))"
        case .missingPlugin(let element):
            // Not every missingPlugin names one element ("voaacenc or avenc_aac"): those keep the broad advice.
            "GStreamer element '\(element)' is not installed (apt install "
                + (ElementPackages.package(providing: element) ?? "gstreamer1.0-plugins-good gstreamer1.0-plugins-bad") + ")"
        }
    }
}
