import Dispatch
import GStreamerKit

/// The one owner of the session's interruptions: where a source's trouble (a bus error, udev's word, the
/// stall watchdog, system pressure) becomes an interruption, a dropped microphone or the end of the session,
/// the interrupted inputs themselves (InterruptedInputs), the fillers and retries that get a device back
/// (SourceRecovery.swift), and the one path by which an interruption begins and ends (recorded, then the
/// outputs, then the app). Everything but the reads of `reasons` runs on the session's queue.
final class InterruptionCoordinator: Sendable {
    typealias Slot = SessionGraph.Slot
    typealias Reason = CaptureSession.InterruptionReason

    let interrupted = InterruptedInputs()
    let queue: DispatchQueue
    let sessionName: String
    /// The session is the coordinator's owner: weak, so that retries scheduled on its queue never keep a
    /// session the app let go of alive.
    private let owner = Locked(WeakSession())
    private struct WeakSession { weak var session: CaptureSession? }

    init(queue: DispatchQueue, sessionName: String) {
        self.queue = queue
        self.sessionName = sessionName
    }

    /// Completes the link to the session; called once, at the end of the session's init.
    func attach(to session: CaptureSession) { owner.withLock { $0.session = session } }

    var session: CaptureSession? { owner.withLock { $0.session } }
    /// The graph interruptions concern: the running one (nil once the session stopped).
    var runningGraph: SessionGraph? { session?.runningGraph }

    /// Why, for each interrupted input (camera first). From any thread.
    var reasons: [Reason] { interrupted.reasons }

    // MARK: The session's life

    /// The session started playing `graph`: udev is followed, a camera held elsewhere at start is waited for,
    /// and a first available camera with no camera present waits for one.
    func sessionDidStart(_ graph: SessionGraph, cameraHeldElsewhere held: CaptureDevice?, selection: FormatSelection?) {
        dispatchPrecondition(condition: .onQueue(queue))
        watchDevices(of: graph)
        if let held { beginInterrupted(.video, reason: .videoDeviceInUseByAnotherClient, device: held, selection: selection, graph: graph) }
        awaitFirstAvailableCamera(in: graph)
    }

    /// A commit swapped the camera (or the microphone): what an interruption of the old one waited for is moot.
    func inputsDidChange(video: Bool, audio: Bool, in graph: SessionGraph) {
        dispatchPrecondition(condition: .onQueue(queue))
        if video { endInterruptionIfReplaced(.video, in: graph); awaitFirstAvailableCamera(in: graph) }
        if audio { endInterruptionIfReplaced(.audio, in: graph) }
    }

    /// The app's intent to run ended: no retry may bring a device back into a stopped session.
    func sessionWillStop() { interrupted.cancelAll() }

    // MARK: Where a source's trouble goes

    /// One hop from the graph's event to what it means. On the session queue, for the running graph.
    /// - A device's error the classifier recognizes (unplugged, busy, the audio server gone) interrupts its
    ///   input: a filler stands in, and retries begin (SourceRecovery.swift).
    /// - A silent camera (FrameStallWatchdog.swift) and system pressure at its last level (SessionPressure.swift)
    ///   interrupt it in place.
    /// - Any other microphone failure drops the audio and video goes on; any other failure ends the session.
    func handle(_ event: GraphEvent, in graph: SessionGraph) {
        dispatchPrecondition(condition: .onQueue(queue))
        switch event {
        case .sourceFailed(let device?, let error):
            let slot: Slot = device.mediaType == .video ? .video : .audio
            let reason = InterruptionClassifier.reason(for: error, from: device) ?? InterruptionClassifier.reasonAskingTheDevice(device)
            if let reason, let source = graph.source(for: slot),
               source.device == device {
                // A filler's own trouble is not the device's: the device is being waited for already.
                if !source.isFiller { interrupt(slot, reason: reason) }
                return
            }
            failWithoutRecovery(slot, device: device, error: error)
        case .sourceFailed(nil, let error):
            session?.fail(CaptureSession.RuntimeError(error: .startFailed(reason: "the capture graph failed", underlying: error), output: nil, isFatal: true))
        case .sourceStalled(let device):
            videoSourceDidStall(device, in: graph)
        case .sourceResumed(let device):
            videoSourceDidResume(device, in: graph)
        case .systemPressureChanged(let device, let pressure, let response, let previous):
            systemPressureDidChange(device, pressure, response, previous: previous, in: graph)
        case .outputFailed:
            break
        }
    }

    /// A stalled camera: an interruption like the others (isInterrupted, the outputs' hooks, the notification),
    /// but the camera is kept open and no filler takes its place: it did not fail, it went silent, and the
    /// watchdog's next frame from it ends the interruption. Reopening it would leave the outputs without frames
    /// for each try (a trial waits seconds for a first frame from a camera that may be silent still) and closes
    /// a device a wedged driver may not give back.
    private func videoSourceDidStall(_ device: CaptureDevice, in graph: SessionGraph) {
        guard let source = graph.source(for: .video), !source.isFiller,
              announce(.video, interruptedFor: .videoDeviceStalled, device: source.device, selection: source.selection,
                       in: graph) else { return }
        Log.session.warning("\(device) delivered no frame for its frame-stall timeout: interrupted")
    }

    private func videoSourceDidResume(_ device: CaptureDevice, in graph: SessionGraph) {
        guard announceEnd(of: .video, onlyFor: .videoDeviceStalled, in: graph) != nil else { return }
        Log.session.notice("\(device) delivers frames again")
    }

    /// The shutdown level of pressure interrupts the camera (held, not closed: its frames go nowhere);
    /// leaving it ends the interruption. A camera interrupted already for another reason stays so: the first
    /// reason stands.
    private func systemPressureDidChange(_ device: CaptureDevice, _ pressure: CaptureDevice.SystemPressureState,
                                         _ response: CaptureSession.PressureResponse, previous: CaptureSession.PressureResponse,
                                         in graph: SessionGraph) {
        session?.post(.systemPressureChanged(device, pressure, response))
        let reason = Reason.videoDeviceNotAvailableDueToSystemPressure
        if response == .interrupted, previous != .interrupted {
            let camera = graph.videoSource
            _ = announce(.video, interruptedFor: reason, device: camera?.device ?? device, selection: camera?.selection, in: graph)
        } else if response != .interrupted, previous == .interrupted {
            announceEnd(of: .video, onlyFor: reason, in: graph)
        }
    }

    /// An input that cannot be interrupted (its trouble is not one that ends by itself) or filled in for: a
    /// microphone is dropped and video goes on; otherwise the session fails as it did before interruptions
    /// existed.
    func failWithoutRecovery(_ slot: Slot, device: CaptureDevice, error: CaptureError) {
        failWithoutRecovery(slot, device: device, error: GStreamerError(kind: .stateChange, message: "\(error)"))
    }

    private func failWithoutRecovery(_ slot: Slot, device: CaptureDevice, error: GStreamerError) {
        guard let session else { return }
        if slot == .audio, let graph = runningGraph, graph.hasSource(.video) {
            // A microphone (or the audio server) went away for good: recordings end cleanly, video goes on.
            try? graph.setSource(nil, for: .audio)
            for output in graph.members { output.audioSourceDidFail(device, error: error) }
            session.publish(CaptureSession.RuntimeError(error: .audioDeviceFailed(device: device.description, underlying: error), output: nil, isFatal: false))
            return
        }
        session.fail(CaptureSession.RuntimeError(error: .deviceFailed(device: device.description, underlying: error), output: nil, isFatal: true))
    }

    // MARK: The one way in and out

    /// The one way an interruption begins, whoever noticed it: recorded first, so `isInterrupted` and
    /// `interruptionReasons` say so by the time anyone hears of it; then the outputs; then the app. False when
    /// the slot is interrupted already: its first reason stands, and nobody hears of a second.
    func announce(_ slot: Slot, interruptedFor reason: Reason, device: CaptureDevice, selection: FormatSelection?,
                  in graph: SessionGraph) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        guard interrupted.begin(slot, reason: reason, device: device, selection: selection) else { return false }
        for output in graph.members { output.sessionWasInterrupted(reason) }
        session?.post(.wasInterrupted(reason))
        return true
    }

    /// The one way an interruption ends: forgotten, then the outputs hear it, then the app. `reason`: only an
    /// interruption for that reason ends. Returns the interruption that ended.
    @discardableResult
    func announceEnd(of slot: Slot, onlyFor reason: Reason? = nil, in graph: SessionGraph) -> InterruptedInputs.Interruption? {
        dispatchPrecondition(condition: .onQueue(queue))
        if let reason, interrupted.interruption(of: slot)?.reason != reason { return nil }
        guard let ended = interrupted.end(slot) else { return nil }
        for output in graph.members { output.sessionInterruptionEnded(ended.reason) }
        session?.post(.interruptionEnded(ended.reason))
        return ended
    }
}

extension CaptureSession.InterruptionReason {
    /// The camera stays open through the interruption (it went silent, or the machine cannot keep up): no
    /// filler takes its place and nothing retries it; a failure of the camera meanwhile supersedes it.
    var keepsTheDeviceInPlace: Bool { self == .videoDeviceStalled || self == .videoDeviceNotAvailableDueToSystemPressure }
}
