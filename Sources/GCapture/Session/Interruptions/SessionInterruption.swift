import Foundation

/// The userInfo key of `CaptureSession.wasInterruptedNotification` (AVCaptureSessionInterruptionReasonKey):
/// the reason's raw value, an Int, as AVFoundation posts it.
public let CaptureSessionInterruptionReasonKey = "CaptureSessionInterruptionReason"

extension Notification.Name {
    /// AVFoundation's older spellings, so code written as `.AVCaptureSessionWasInterrupted` ports by renaming.
    public static let CaptureSessionWasInterrupted = CaptureSession.wasInterruptedNotification
    public static let CaptureSessionInterruptionEnded = CaptureSession.interruptionEndedNotification
    public static let CaptureSessionRuntimeError = CaptureSession.runtimeErrorNotification
    public static let CaptureSessionDidStartRunning = CaptureSession.didStartRunningNotification
    public static let CaptureSessionDidStopRunning = CaptureSession.didStopRunningNotification
}

extension CaptureSession {
    /// When an interrupted device is tried again: after each of these delays in turn, then every
    /// `recoveryRetryInterval` (and at once when udev announces it again).
    public static var recoveryRetryDelays: [Duration] { SourceRecovery.retryDelays }
    public static var recoveryRetryInterval: Duration { SourceRecovery.steadyRetryDelay }

    /// Whether an input is interrupted now: its device has gone (or is held elsewhere) and the session, still
    /// running, fills the gap and is trying to get it back.
    public var isInterrupted: Bool { !interruptions.reasons.isEmpty }

    /// Why, for each interrupted input (camera first).
    public var interruptionReasons: [InterruptionReason] { interruptions.reasons }


    /// Posted with the session as object and the reason's raw value under CaptureSessionInterruptionReasonKey
    /// when a device stops delivering for a reason the session expects to pass. The session keeps the app's
    /// intent to run and recovers by itself: no call to startRunning is needed.
    public static let wasInterruptedNotification = Notification.Name("GCaptureSessionWasInterrupted")
    /// Posted when the interrupted device delivers again, with the reason that ended under the same key.
    public static let interruptionEndedNotification = Notification.Name("GCaptureSessionInterruptionEnded")

    /// Everything the session's notifications say, as one value (see `events()`).
    public enum Event: Sendable {
        case didStartRunning
        case didStopRunning
        case runtimeError(RuntimeError)
        case wasInterrupted(InterruptionReason)
        case interruptionEnded(InterruptionReason)
        /// The camera's system pressure changed, and with it what the session does about it.
        case systemPressureChanged(CaptureDevice, CaptureDevice.SystemPressureState, PressureResponse)
    }

    /// Why the session was interrupted (AVCaptureSession.InterruptionReason). AVFoundation's raw values are
    /// kept; the reasons Linux adds start at 100.
    public enum InterruptionReason: Int, Sendable, CaseIterable, CustomStringConvertible {
        /// Never posted on Linux: a program here has no background. Kept so AVFoundation code compiles.
        @available(*, deprecated, message: "never posted on Linux: there is no background state")
        case videoDeviceNotAvailableInBackground = 1
        /// The audio server refused the microphone because another program holds it exclusively.
        case audioDeviceInUseByAnotherClient = 2
        /// Another program holds the camera (the driver answers "device or resource busy").
        case videoDeviceInUseByAnotherClient = 3
        /// Never posted on Linux. Kept so AVFoundation code compiles.
        @available(*, deprecated, message: "never posted on Linux: there is no split view")
        case videoDeviceNotAvailableWithMultipleForegroundApps = 4
        /// The machine cannot keep up (CPU or thermal pressure at its last level).
        case videoDeviceNotAvailableDueToSystemPressure = 5

        /// The camera was unplugged or disconnected; it comes back when it is plugged in again.
        case videoDeviceUnplugged = 100
        /// The camera stopped delivering frames without saying why (a wedged driver or device).
        case videoDeviceStalled = 101
        /// The microphone was unplugged or removed from the audio server.
        case audioDeviceUnplugged = 102
        /// The audio server (PulseAudio, PipeWire's pulse service) went away.
        case audioServerUnavailable = 103

        /// Whether the interruption concerns the camera (else the microphone).
        public var affectsVideo: Bool {
            switch rawValue {
            case Self.audioDeviceInUseByAnotherClient.rawValue, Self.audioDeviceUnplugged.rawValue,
                 Self.audioServerUnavailable.rawValue: false
            default: true
            }
        }

        public var description: String {
            switch rawValue {
            case 1: "the camera is not available in the background"
            case 2: "another program is using the microphone"
            case 3: "another program is using the camera"
            case 4: "the camera is not available with several foreground apps"
            case 5: "the system is under too much pressure to capture"
            case 100: "the camera was unplugged"
            case 101: "the camera stopped delivering frames"
            case 102: "the microphone was unplugged"
            default: "the audio server went away"
            }
        }

        /// Every case AVFoundation code can switch over; `allCases` minus the deprecated ones is what Linux posts.
        public static var allCases: [InterruptionReason] { (1...5).compactMap(Self.init) + (100...103).compactMap(Self.init) }
    }
}
