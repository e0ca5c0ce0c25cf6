import Foundation
import GStreamerKit

/// The captures of one photo output between the press and the encoder: which may be accepted (the backlog),
/// the order they choose their frames in (turns), how many are processed at once (slots), and the
/// readiness all of that adds up to. Everything is one value behind one lock, so a readiness change is
/// told to coordinators in the order it happened.
final class PhotoCaptureQueue: Sendable {
    typealias Readiness = CapturePhotoOutput.CaptureReadiness

    private struct WeakCoordinator { weak var coordinator: CapturePhotoOutputReadinessCoordinator? }

    private struct State {
        var ring: FrameRing?
        var context: OutputContext?
        var isReceiving = false
        /// The session's camera is interrupted now: captures fail at once, as AVFoundation's do.
        var interruption: CaptureSession.InterruptionReason?
        var isResponsive = true
        var momentary = 0
        var waitingForCapture = 0
        var inFlight = 0
        var slotWaiters: [CheckedContinuation<Void, Never>] = []
        var observers: [WeakCoordinator] = []
        /// Captures choose their frames one at a time, in the order they were requested, since each photo
        /// is its own frame: a later press running first would take the frame an earlier one was about to
        /// take, and the earlier photo would be of the later moment.
        var nextSelectionTurn: UInt64 = 0
        var selectionTurn: UInt64 = 0
        var selectionWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

        var maxInFlight: Int { isResponsive ? CapturePhotoOutput.maxInFlightCaptures : 1 }

        var readiness: Readiness {
            if !isReceiving { return .sessionNotRunning }
            if inFlight >= maxInFlight { return .notReadyWaitingForProcessing }
            if waitingForCapture > 0 { return .notReadyWaitingForCapture }
            if momentary > 0 { return .notReadyMomentarily }
            return .ready
        }

        /// Tells every coordinator, in order, from inside the lock: a coordinator only records the change and
        /// queues its delegate's call on the delegate queue, and never calls back into this queue from here.
        mutating func readinessChanged(begunCapture settingsID: Int64? = nil) {
            observers.removeAll { $0.coordinator == nil }
            let now = readiness
            for observer in observers { observer.coordinator?.outputReadinessChanged(now, begunCapture: settingsID) }
        }
    }

    private let state = Locked(State())

    // MARK: Graph

    func attach(ring: FrameRing, context: OutputContext) {
        state.withLock { state in
            state.ring = ring
            state.context = context
            state.isReceiving = false
            state.interruption = nil
        }
    }

    func detach() {
        state.withLock { state in
            state.ring?.reset()
            state.ring = nil
            state.context = nil
            state.isReceiving = false
            state.interruption = nil
            state.readinessChanged()
        }
    }

    /// Returns the ring to suspend, once the reason is recorded: a capture the suspension releases must find it.
    func interrupt(_ reason: CaptureSession.InterruptionReason) -> FrameRing? {
        state.withLock { state in
            state.interruption = reason
            state.isReceiving = false
            state.readinessChanged()
            return state.ring
        }
    }

    /// Returns the ring to resume and the running time from which its frames are the camera's again.
    func endInterruption() -> (ring: FrameRing?, now: UInt64?) {
        state.withLock { state in
            state.interruption = nil
            return (state.ring, state.context?.runningTime())
        }
    }

    /// The ring and the session's running time now (nil before the output is attached).
    func ringNow() -> (ring: FrameRing?, now: UInt64?) {
        state.withLock { ($0.ring, $0.context?.runningTime()) }
    }

    var interruption: CaptureSession.InterruptionReason? { state.withLock { $0.interruption } }

    func frameArrived() {
        guard !state.withLock({ $0.isReceiving }) else { return }
        state.withLock { state in
            guard !state.isReceiving, state.ring != nil else { return }
            state.isReceiving = true
            state.readinessChanged()
        }
    }

    /// The output is in a session's graph (built at commit, running or not) that has a camera.
    var isFedByCamera: Bool { state.withLock { $0.context }?.videoDevice() != nil }

    var ringMemoryBytes: Int { state.withLock { $0.ring }?.memoryBytes ?? 0 }

    var isResponsive: Bool {
        get { state.withLock { $0.isResponsive } }
        set { state.withLock { $0.isResponsive = newValue } }
    }

    // MARK: Readiness

    var readiness: Readiness { state.withLock { $0.readiness } }

    func addReadinessObserver(_ coordinator: CapturePhotoOutputReadinessCoordinator) {
        state.withLock { $0.observers.append(WeakCoordinator(coordinator: coordinator)) }
    }

    /// Runs `body` with the readiness state stable; coordinators use it to deliver in order. `body` must not
    /// call back into this queue.
    func withReadinessLock<R>(_ body: (Readiness) -> R) -> R { state.withLock { body($0.readiness) } }

    // MARK: Backlog

    /// A capture let in: what it was let in with, read in one go with its request time.
    struct Admission {
        let ring: FrameRing
        let context: OutputContext
        let requestTime: UInt64
        let prioritization: CapturePhotoOutput.QualityPrioritization
        /// Its place in the order in which captures choose their frames.
        let selectionTurn: UInt64
    }

    /// Lets a capture in, or says why not. With fast capture prioritization, `asked` steps down as the
    /// backlog grows, to hold the shot-to-shot time.
    func admit(asking asked: CapturePhotoOutput.QualityPrioritization, fastPrioritization: Bool) throws(CaptureError) -> Admission {
        try state.withLock { (state: inout State) throws(CaptureError) -> Admission in
            // Attached is enough: right after start the first frame may still be on its way to the ring.
            guard let ring = state.ring, let context = state.context, let requestTime = context.runningTime() else { throw .sessionNotRunning }
            if let interruption = state.interruption { throw .sessionWasInterrupted(interruption) }
            let backlog = state.inFlight + state.slotWaiters.count
            guard backlog < state.maxInFlight + CapturePhotoOutput.maxWaitingCaptures else {
                throw .tooManyPendingCaptures(limit: CapturePhotoOutput.maxWaitingCaptures)
            }
            var prioritization = asked
            if fastPrioritization {
                if backlog >= state.maxInFlight { prioritization = .speed } else if backlog >= 1 { prioritization = prioritization.lower }
            }
            state.momentary += 1
            state.readinessChanged()
            state.nextSelectionTurn += 1
            return Admission(ring: ring, context: context, requestTime: requestTime, prioritization: prioritization,
                             selectionTurn: state.nextSelectionTurn - 1)
        }
    }

    /// A capture let in failed before it reached a processing slot.
    func abandon() {
        state.withLock { state in
            state.momentary -= 1
            state.readinessChanged()
        }
    }

    // MARK: Turns

    func waitForSelectionTurn(_ turn: UInt64) async {
        // The usual case, no capture choosing before this one, does not suspend.
        if state.withLock({ $0.selectionTurn == turn }) { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.selectionTurn == turn { return true }
                state.selectionWaiters[turn] = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    func passSelectionTurn() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.selectionTurn += 1
            return state.selectionWaiters.removeValue(forKey: state.selectionTurn)
        }
        next?.resume()
    }

    /// The capture waits for frames not exposed yet (readiness says so until `endWaitingForFrames`).
    private func beginWaitingForFrames() {
        state.withLock { state in
            state.momentary -= 1
            state.waitingForCapture += 1
            state.readinessChanged()
        }
    }

    private func endWaitingForFrames() {
        state.withLock { state in
            state.waitingForCapture -= 1
            state.momentary += 1
            state.readinessChanged()
        }
    }

    // MARK: Processing slots

    func waitForProcessingSlot(settingsID: Int64) async {
        // A free slot is taken at once, without suspending (a resumed continuation costs a thread hop).
        let taken = state.withLock { state -> Bool in
            guard state.inFlight < state.maxInFlight else { return false }
            state.momentary -= 1
            state.inFlight += 1
            state.readinessChanged(begunCapture: settingsID)
            return true
        }
        if taken { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                state.momentary -= 1
                if state.inFlight < state.maxInFlight {
                    state.inFlight += 1
                    state.readinessChanged(begunCapture: settingsID)
                    return true
                }
                state.slotWaiters.append(continuation)
                state.readinessChanged(begunCapture: settingsID)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func releaseProcessingSlot() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if !state.slotWaiters.isEmpty { return state.slotWaiters.removeFirst() } // the slot passes on: inFlight unchanged
            state.inFlight -= 1
            state.readinessChanged()
            return nil
        }
        next?.resume()
    }
}

// MARK: Frame selection

extension PhotoCaptureQueue {
    /// The frames a capture is made of: exposed at or before the request with zero shutter lag (the newest
    /// for .speed), else the next ones, waiting for them.
    /// `atRequest` is consumed: frames found unusable are let go here rather than held while the capture
    /// waits for new ones.
    func selectFrames(from ring: FrameRing, job: PhotoJob, atRequest: consuming [CapturedFrame]) async throws(CaptureError) -> [CapturedFrame] {
        let count = job.prioritization.frameCount
        var frames: [CapturedFrame] = []
        // What frames still missing are waited for: exposed after the request, or any (nil).
        var exposedAfter: UInt64? = job.requestTime
        // The next new frame stands in for one an earlier capture took: only it is waited for.
        var averagesEarlier = false
        if job.zeroShutterLag {
            frames = consume atRequest
            // None exposed by the request yet (right after start): the first frame to reach the ring may
            // have been exposed just before it, and is then the nearest.
            if frames.isEmpty { exposedAfter = nil }
            // A frame exposed before the request may still be on its way into the ring (it reaches the
            // appsink a few milliseconds after its timestamp): when the newest is a whole interval old,
            // wait that long for it rather than hand out a frame from before.
            if let newest = frames.first, let interval = newest.info.frameRate.interval,
               job.requestTime >= newest.presentationTime + interval,
               let inFlight = await ring.frames(after: newest.presentationTime, limit: 1, timeout: Double(interval) / 1e9).first,
               inFlight.presentationTime <= job.requestTime {
                frames = Array(([inFlight] + frames).prefix(count))
            }
            // A camera that has stopped delivering leaves only frames from long before the press: not the
            // moment the user asked for. Wait for a new frame instead, and fail if none comes.
            if let newest = frames.first, let interval = newest.info.frameRate.interval,
               job.requestTime > newest.presentationTime + CapturePhotoOutput.staleFrameIntervals * interval {
                frames = []
            }
            // Each photo is its own frame: when an earlier capture took the frame at this request (presses
            // less than a frame apart), this one is the next new frame, averaged with the ones before it.
            if let nearest = frames.first, !ring.take(nearest) {
                frames = []
                exposedAfter = nearest.presentationTime
                averagesEarlier = true
            }
            // The frame at the request comes first whatever else is averaged in.
            if frames.count == count { return frames }
        }
        // Frames still missing (no frame yet, zero shutter lag off, too few to average, a stalled camera, or
        // the frame at the request taken already) are the next ones.
        let timeout = frames.isEmpty ? CapturePhotoOutput.frameTimeout : 0.5
        beginWaitingForFrames()
        let limit = averagesEarlier ? 1 : count - frames.count
        if frames.isEmpty {
            frames = await nextNewFrames(from: ring, after: exposedAfter, limit: limit, timeout: timeout)
        } else {
            frames += await ring.frames(after: exposedAfter, limit: limit, timeout: timeout)
        }
        endWaitingForFrames()
        guard let first = frames.first else {
            if let reason = interruption { throw .sessionWasInterrupted(reason) }
            throw .timedOut("waiting \(Int(timeout)) s for a frame from the camera")
        }
        if averagesEarlier { frames += ring.frames(atOrBefore: first.presentationTime - 1, limit: count - 1) }
        return frames
    }

    /// Up to `limit` frames after `time` (any when nil), the first one no capture took before; it is
    /// taken. One a capture running at once takes between the look and the take gives way to the next.
    private func nextNewFrames(from ring: FrameRing, after time: UInt64?, limit: Int, timeout: TimeInterval) async -> [CapturedFrame] {
        let deadline = Date().addingTimeInterval(timeout)
        var after = time
        while true {
            let next = await ring.frames(after: after, limit: limit, timeout: max(0, deadline.timeIntervalSinceNow))
            guard let first = next.first else { return [] }
            if ring.take(first) { return next }
            after = first.presentationTime
        }
    }
}

extension Fraction {
    /// Nanoseconds between frames at this rate, when it is a rate.
    var interval: UInt64? { numerator > 0 ? UInt64(1_000_000_000 * denominator / numerator) : nil }
}
