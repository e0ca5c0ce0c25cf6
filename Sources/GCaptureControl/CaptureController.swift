import Foundation
import GCapture
import GCaptureDescription
import GCapturePhotos
import GCaptureSupport

/// Carries out the control commands on a running `ControlledCapture`. An actor: requests from stdin, the
/// shutter signal, a reload and the session's own events all reach it at once. Slow work (a photo's
/// encoding, a recording's finalization, a camera swap) awaits outside its lock, so that one slow command
/// does not hold the others.
public actor CaptureController {
    /// Re-reads the set-up's description and returns its settings, and what changed that needs a new run;
    /// `apply` then changes only what differs. Called on SIGHUP with the settings now in force. A throw
    /// keeps the set-up as it is (the error is reported as a reloadFailed event).
    /// It blocks (it reads the file and reconfigures the session): it runs on `reloading`, never on this actor.
    public typealias ReloadHook = @Sendable (_ current: ControlledCaptureSettings) throws -> ReloadedSetUp

    /// The reload of a set-up made from command-line options, which have no file to re-read: the settings
    /// in force, applied again (so SIGHUP changes nothing and the session runs on).
    public static let reapplyCurrentSettings: ReloadHook = { ReloadedSetUp(settings: $0) }

    public nonisolated let capture: ControlledCapture
    nonisolated let events: ControlEvents
    // Internal rather than private where the CaptureController+*.swift files (one per concern) use them.
    let onReload: ReloadHook
    private let onFatalError: @Sendable (String) -> Void
    var settings: ControlledCaptureSettings
    var camera: String
    /// The files handed out per folder and naming rule: numbering goes on after the highest in the folder.
    var files: [String: OutputFiles] = [:]
    var recording: RecordingWatcher?
    /// Records events' clips (`trigger`), made at the first trigger with the settings then in force.
    var eventRecorder: CaptureEventRecorder?
    var eventReports: Task<Void, Never>?
    /// Triggers an event every `settings.triggerInterval` seconds while the run goes on.
    var eventSchedule: Task<Void, Never>?
    var motionReports: Task<Void, Never>?
    /// The box of the motion going on now (fractions of the picture), for the web page's status.
    nonisolated let motionNow = Locked<[Double]?>(nil)
    var progress: Task<Void, Never>?
    var photosInFlight = 0
    /// The photo folders' libraries, one per folder (`outputs.photo.album`): opened once, their index kept.
    var photoLibraries: [URL: PhotoLibrary] = [:]
    var photosIdle: [CheckedContinuation<Void, Never>] = []
    var stopping = false
    /// Whether a `record start` is recording now (for a set-up of several cameras: where `record stop` goes).
    public var isRecording: Bool { recording != nil }
    private var sessionEvents: Task<Void, Never>?
    /// Why the session is interrupted now, or nil: for the web page's status.
    nonisolated let interruption = Locked<String?>(nil)
    private var streamEvents: Task<Void, Never>?
    var isReloading = false
    var reloadAgain = false

    /// `onFatalError`: the session stopped by itself (the run then ends, with an error).
    public init(capture: ControlledCapture, events: ControlEvents, onReload: @escaping ReloadHook = CaptureController.reapplyCurrentSettings,
                onFatalError: @escaping @Sendable (String) -> Void) {
        self.capture = capture
        self.events = events
        self.onReload = onReload
        self.onFatalError = onFatalError
        settings = capture.settings
        camera = capture.camera
    }

    // MARK: Running

    public func start() async throws(CaptureError) {
        applyToConnections(settings)
        let sessionUpdates = capture.session.events()
        let events = events, onFatalError = onFatalError, interruption = interruption
        sessionEvents = Task {
            for await event in sessionUpdates {
                switch event {
                case .wasInterrupted(let reason): interruption.withLock { $0 = reason.description }
                case .interruptionEnded: interruption.withLock { $0 = nil }
                default: break
                }
                Self.report(event, events: events, onFatalError: onFatalError)
            }
        }
        // Before the session starts: the timelapse starts with it.
        followTimelapse()
        try await capture.session.start()
        let started = capture.startedEvent(camera: camera, settings: settings)
        events.emit("started", started.fields, text: started.text)
        try startStream()
        scheduleTriggers()
        followMotion()
    }

    /// A description's stream: its states as `streamState` events (as `gcapture stream --json` prints them).
    func startStream() throws(CaptureError) {
        guard let stream = capture.streamOutput, let location = capture.streamLocation else { return }
        let states = stream.stateUpdates()
        let events = events
        streamEvents = Task {
            for await state in states { events.emit("streamState", state.eventFields, text: "stream: \(state)") }
        }
        try stream.startStreaming(to: location)
    }

    /// Finishes everything: the recording is finalized, the photos requested are written, the session stops.
    /// Commands from now on are refused.
    public func shutDown() async {
        stopping = true
        if let recording, let movie = capture.movieOutput {
            _ = await stopAndWait(movie, recording)
            forget(recording)
        }
        await endEvents()
        await photosWritten()
        if let stream = capture.streamOutput, stream.isStreaming {
            // Ended as a stream ends (HLS's playlist closed, the RTMP server told), before the session stops.
            stream.stopStreaming()
            let deadline = Date().addingTimeInterval(5)
            while stream.isStreaming, Date() < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        }
        await capture.session.stop()
        // The session's stop drained the timelapse; its file is told finished (and is a plain MP4) before `stopped`.
        await capture.timelapse?.waitUntilSettled()
        sessionEvents?.cancel()
        streamEvents?.cancel()
    }

    nonisolated static func report(_ event: CaptureSession.Event, events: ControlEvents, onFatalError: @Sendable (String) -> Void) {
        switch event {
        case .didStartRunning, .didStopRunning: break
        case .runtimeError(let error):
            events.emit("runtimeError", ["error": error.description, "fatal": error.isFatal],
                         text: (error.isFatal ? "stopped: " : "error: ") + error.description)
            if error.isFatal { onFatalError(error.description) }
        case .wasInterrupted(let reason):
            events.emit("interrupted", ["reason": reason.description, "code": reason.rawValue], text: "interrupted: \(reason)")
        case .interruptionEnded(let reason):
            events.emit("interruptionEnded", ["reason": reason.description, "code": reason.rawValue],
                         text: "capturing again (the interruption ended: \(reason))")
        case .systemPressureChanged(let device, let state, let response):
            events.emit("systemPressure", ["camera": device.description, "level": state.level.rawValue,
                                            "factors": state.factors.names, "response": response.eventName],
                         text: "system pressure \(state) on \(device.localizedName): "
                             + (response == .none ? "capture unchanged" : "\(response)"))
        }
    }

    func refuseWhenStopping() throws(ControlFailure) {
        if stopping { throw ControlFailure("gcapture is stopping") }
    }

    /// Carries out one command and waits for its outcome (a photo's: until it is written). `help` and
    /// `quit` belong to whoever reads the requests, not to the capture.
    public func perform(_ command: ControlCommand, trigger: String) async -> Result<ControlReply, ControlFailure> {
        do {
            switch command {
            case .photo(let path): return await takePhoto(try requestPhoto(path: path, trigger: trigger))
            case .recordStart(let path): return .success(try await startRecording(path: path))
            case .recordStop: return .success(try await stopRecording())
            case .trigger(let source): return .success(try triggerEvent(source: source ?? trigger))
            case .pause: return .success(try pauseRecording())
            case .resume: return .success(try resumeRecording())
            case .switchCamera(let camera): return .success(try await switchCamera(camera))
            case .rotate(let degrees): return .success(try rotate(degrees))
            case .mirror(let mirrored): return .success(try mirror(mirrored))
            case .help, .quit: return .failure(ControlFailure("\(command) is not a capture command"))
            }
        } catch {
            return .failure(error)
        }
    }

}
