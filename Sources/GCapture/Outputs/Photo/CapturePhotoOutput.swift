import Dispatch
import Foundation
import GStreamerKit

/// Still photos from a running session (AVCapturePhotoOutput), with zero shutter lag: the photo is the frame
/// exposed at the instant of the request, taken from a ring of recent frames, never "the next frame".
/// Captures overlap (one is accepted while others encode), quality can be traded for speed, and deferred
/// delivery hands out a proxy at once and replaces it with the final image when processing is done.
public final class CapturePhotoOutput: CaptureOutput, @unchecked Sendable {
    // MARK: Configuration (set before adding the output or between captures)

    /// Whether the current configuration can give a photo exposed at the request: true while the output is
    /// in a session that has a camera (the ring is fed from its frames, whatever their format), false before
    /// it is added, after it is removed, or without a camera, as AVFoundation's is false there.
    public var isZeroShutterLagSupported: Bool { isFedByCamera }
    /// On by default: the photo is the frame nearest at or before the request. Off: the next frame.
    public var isZeroShutterLagEnabled: Bool { get { locked { zeroShutterLag } } set { locked { zeroShutterLag = newValue } } }
    /// Frames the ring keeps (at least 3, as CameraX). Applies when the output is next attached.
    public var zeroShutterLagRingDepth: Int { get { locked { ringDepth } } set { locked { ringDepth = max(3, newValue) } } }
    /// The highest prioritization a capture may ask for.
    public var maxPhotoQualityPrioritization: QualityPrioritization {
        get { locked { maxPrioritization } } set { locked { maxPrioritization = newValue } }
    }
    /// Overlapping captures need nothing of the camera beyond frames: supported when zero shutter lag is.
    public var isResponsiveCaptureSupported: Bool { isFedByCamera }
    /// On by default: up to `maxInFlightCaptures` photos are processed at once; off: one at a time.
    public var isResponsiveCaptureEnabled: Bool { get { locked { responsive } } set { locked { responsive = newValue } } }
    /// Supported whenever photos can be taken (stepping quality down needs no more than that).
    public var isFastCapturePrioritizationSupported: Bool { isFedByCamera }
    /// When captures come faster than they finish, step quality down to hold the shot-to-shot time.
    public var isFastCapturePrioritizationEnabled: Bool { get { locked { fastPrioritization } } set { locked { fastPrioritization = newValue } } }
    /// Supported whenever photos can be taken; applies to .quality captures written to a file.
    public var isAutoDeferredPhotoDeliverySupported: Bool { isFedByCamera }
    /// For .quality captures written to a file: a proxy at once, the final image when processing is done.
    public var isAutoDeferredPhotoDeliveryEnabled: Bool { get { locked { deferred } } set { locked { deferred = newValue } } }
    /// Deferred processing waits until no capture has been requested for this long, to stay out of a burst.
    public var deferredProcessingDelay: TimeInterval { get { locked { deferredDelay } } set { locked { deferredDelay = newValue } } }
    /// Folders whose unfinished deferred photos (from a crash or an earlier run) are finished when the output
    /// starts. Folders photos are written to are added by themselves.
    public var deferredPhotoDirectories: [URL] { get { locked { Array(deferredFolders) } } set { locked { deferredFolders = Set(newValue) } } }

    /// Called (on `delegateQueue`) for every deferred photo finished in the background, including work
    /// resumed from an earlier run, which has no capture delegate to tell.
    public var deferredPhotoHandler: (@Sendable (Result<CapturePhoto, CaptureError>) -> Void)? {
        get { locked { deferredHandler } } set { locked { deferredHandler = newValue } }
    }

    /// Captures processed at once with responsive capture on.
    public static let maxInFlightCaptures = 3
    /// Captures that may wait for processing beyond those; more is an error.
    public static let maxWaitingCaptures = 8
    /// Seconds a capture waits for a frame when none at the request can be used; then it fails.
    public static let frameTimeout: TimeInterval = 2
    /// The newest frame this many frame intervals older than the request is not used: delivery jitters by a
    /// frame or two, and a camera three frames late may have stalled. The capture waits for the next frame.
    static let staleFrameIntervals: UInt64 = 3

    /// The output is in a session's graph (built at commit, running or not) that has a camera.
    private var isFedByCamera: Bool { locked { context }?.videoDevice() != nil }

    /// Memory the zero-shutter-lag ring holds now.
    public var zeroShutterLagMemoryBytes: Int { locked { ring }?.memoryBytes ?? 0 }

    /// Readiness now (coordinators are told of every change).
    public var captureReadiness: CaptureReadiness { locked { baseReadiness() } }

    // MARK: State, all under `lock`

    private let lock = NSRecursiveLock()
    private var zeroShutterLag = true
    private var ringDepth = 4
    private var maxPrioritization = QualityPrioritization.quality
    private var responsive = true
    private var fastPrioritization = false
    private var deferred = false
    private var deferredDelay: TimeInterval = 0.5
    private var deferredFolders: Set<URL> = []
    private var deferredHandler: (@Sendable (Result<CapturePhoto, CaptureError>) -> Void)?

    private var ring: FrameRing?
    private var context: OutputContext?
    private var isReceiving = false
    /// The session's camera is interrupted now: captures fail at once, as AVFoundation's do.
    private var interruption: CaptureSession.InterruptionReason?
    private var momentary = 0
    private var waitingForCapture = 0
    private var inFlight = 0
    private var slotWaiters: [CheckedContinuation<Void, Never>] = []
    private var observers: [WeakCoordinator] = []
    private var lastRequest = Date.distantPast
    private var deferredScheduled = false
    private var callbackOrder = CaptureCallbackOrder()
    /// Captures choose their frames one at a time, in the order they were requested, since each photo is
    /// its own frame: a later press running first would take the frame an earlier one was about to take,
    /// and the earlier photo would be of the later moment.
    private var nextSelectionTurn: UInt64 = 0
    private var selectionTurn: UInt64 = 0
    private var selectionWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

    private struct WeakCoordinator { weak var coordinator: CapturePhotoOutputReadinessCoordinator? }

    private let processingQueue = DispatchQueue(label: "gcapture.photo.processing")
    private let deferredQueue = DispatchQueue(label: "gcapture.photo.deferred", qos: .utility)
    private var encoder: PhotoEncoder?
    private var deferredEncoder: PhotoEncoder?
    /// Where every delegate of this output is called (capture delegates, the deferred photo handler,
    /// readiness coordinators), in order, never with the output's lock held nor on a streaming thread.
    public let delegateQueue = DispatchQueue(label: "gcapture.photo.delegate")
    /// Marks `delegateQueue` with its output, so that code can tell it runs there.
    static let delegateQueueKey = DispatchSpecificKey<ObjectIdentifier>()

    public override init() {
        super.init()
        delegateQueue.setSpecific(key: Self.delegateQueueKey, value: ObjectIdentifier(self))
    }

    override class var turnsCapturedFrames: Bool { true }

    private func locked<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Graph

    override func branchDescription() throws(CaptureError) -> String? {
        Self.appSinkFragment
    }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        guard let sink = Self.appSink(in: branch) else { return }
        let ring = FrameRing(depth: locked { ringDepth })
        locked {
            self.ring = ring
            self.context = context
            isReceiving = false
            interruption = nil
        }
        sink.setSampleHandler { [weak self, ring] sample in
            // Filler frames while the camera is interrupted are no photo's: the ring keeps none.
            if ring.store(sample) { self?.frameArrived() }
        }
        // A camera that dies pushes end-of-stream through the session's tee; past it the branch would refuse
        // every later frame (the session's filler, the camera after recovery), and its error would stop the
        // filler. Photos never need an end-of-stream: the branch is only ever torn down.
        branch?.staticPad("sink")?.dropEndOfStreamFromUpstream()
        // The encoder's pipeline is made now, not on the first press.
        processingQueue.async { [weak self] in _ = try? self?.sharedEncoder() }
        resumeDeferredWork()
    }

    override func didDetach() {
        locked {
            ring?.reset()
            ring = nil
            context = nil
            isReceiving = false
            interruption = nil
            readinessChanged()
        }
    }

    /// On the session's queue. While the camera is interrupted no photo can be of the moment asked for (the
    /// session feeds filler frames): captures asked for fail at once with `.sessionWasInterrupted`, those
    /// waiting for a frame fail with it now, and readiness is `.sessionNotRunning` (the session is not
    /// running for AVFoundation while interrupted). Captures whose frames were chosen before finish.
    override func sessionWasInterrupted(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        let ring: FrameRing? = locked {
            interruption = reason
            isReceiving = false
            readinessChanged()
            return self.ring
        }
        // After the flag: a capture released here must find the reason.
        ring?.suspend()
    }

    /// On the session's queue: photos can be taken again from the camera's first frame from now on.
    override func sessionInterruptionEnded(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        let (ring, now): (FrameRing?, UInt64?) = locked {
            interruption = nil
            return (self.ring, context?.runningTime())
        }
        ring?.resume(keepingFramesFrom: now ?? 0)
    }

    private func frameArrived() {
        guard !locked({ isReceiving }) else { return }
        locked {
            guard !isReceiving, ring != nil else { return }
            isReceiving = true
            readinessChanged()
        }
    }

    // MARK: Readiness

    func addReadinessObserver(_ coordinator: CapturePhotoOutputReadinessCoordinator) {
        locked { observers.append(WeakCoordinator(coordinator: coordinator)) }
    }

    /// Runs `body` with the readiness state stable; coordinators use it to deliver in order.
    func withReadinessLock<R>(_ body: (CaptureReadiness) -> R) -> R { locked { body(baseReadiness()) } }

    private var maxInFlight: Int { responsive ? Self.maxInFlightCaptures : 1 }

    private func baseReadiness() -> CaptureReadiness {
        if !isReceiving { return .sessionNotRunning }
        if inFlight >= maxInFlight { return .notReadyWaitingForProcessing }
        if waitingForCapture > 0 { return .notReadyWaitingForCapture }
        if momentary > 0 { return .notReadyMomentarily }
        return .ready
    }

    /// With the lock held: tell every coordinator, in order (they call their delegates on `delegateQueue`).
    private func readinessChanged(begun settingsID: Int64? = nil) {
        observers.removeAll { $0.coordinator == nil }
        let base = baseReadiness()
        for observer in observers { observer.coordinator?.outputReadinessChanged(base, begunCapture: settingsID) }
    }

    // MARK: Capturing

    /// Takes a photo and follows it with `delegate` on `delegateQueue`. The request is taken now: the frame
    /// is the one exposed at this call, and the settings and the output's configuration are read here, so
    /// changing them after this returns changes nothing of this capture. Callbacks of captures requested
    /// one after another come in that order.
    public func capturePhoto(with settings: CapturePhotoSettings, delegate: any CapturePhotoCaptureDelegate) {
        let follower = Follower(delegate: delegate, ticket: locked { callbackOrder.issue() })
        let request: Request
        do throws(CaptureError) {
            request = try accept(settings)
        } catch {
            let resolved = CaptureResolvedPhotoSettings(
                unfinished: settings.uniqueID, prioritization: min(settings.photoQualityPrioritization, maxPhotoQualityPrioritization),
                zeroShutterLag: isZeroShutterLagEnabled, isDeferred: false, rotationAngle: Int(connection.videoRotationAngle),
                isMirrored: connection.mirrorsCapturedFrames)
            return finishWithoutPhoto(follower, error, resolved: resolved, fileURL: settings.fileURL)
        }
        Task {
            // Failures reach the delegate from inside.
            _ = try? await self.complete(request, follower: follower)
        }
    }

    /// Takes a photo; returns it when encoded (and written), or its proxy when delivery is deferred.
    public func capturePhoto(with settings: CapturePhotoSettings = CapturePhotoSettings()) async throws(CaptureError) -> CapturePhoto {
        try await complete(try accept(settings), follower: nil)
    }

    /// A capture accepted: everything it needs from the request, fixed at the request.
    private struct Request: Sendable {
        let ring: FrameRing
        let job: PhotoJob
        let file: PhotoProcessor.FilePath?
        let deferred: Bool
        let started: ContinuousClock.Instant
        /// With zero shutter lag, the frames the ring held at the request: a capture that starts late (a
        /// busy cooperative pool) must not find them gone from the ring.
        let framesAtRequest: [CapturedFrame]
        /// Its place in the order in which captures choose their frames.
        let selectionTurn: UInt64
    }

    /// A delegate following a capture, and the capture's place in the order of its callbacks.
    private struct Follower: Sendable {
        let delegate: any CapturePhotoCaptureDelegate
        let ticket: Int
    }

    /// Takes the request, without waiting: the request instant, the frames exposed by then, and one reading
    /// of the settings.
    private func accept(_ settings: CapturePhotoSettings) throws(CaptureError) -> Request {
        let (ring, job, file, isDeferred, started, turn) = try acceptRequest(settings)
        var atRequest: [CapturedFrame] = []
        if job.zeroShutterLag {
            atRequest = job.prioritization == .speed ? ring.newest().map { [$0] } ?? []
                : ring.frames(atOrBefore: job.requestTime, limit: job.prioritization.frameCount)
        }
        return Request(ring: ring, job: job, file: file, deferred: isDeferred, started: started, framesAtRequest: atRequest,
                       selectionTurn: turn)
    }

    private func acceptRequest(_ settings: CapturePhotoSettings) throws(CaptureError)
        -> (FrameRing, PhotoJob, PhotoProcessor.FilePath?, Bool, ContinuousClock.Instant, UInt64) {
        let started = ContinuousClock.now
        let (id, asked, orientation, fileURL) = (settings.uniqueID, settings.photoQualityPrioritization,
                                                 settings.orientationHandling, settings.fileURL)
        let file = fileURL.map(PhotoProcessor.FilePath.init)
        if let file { try PhotoProcessor.checkNewFile(file) }
        return try locked { () throws(CaptureError) -> (FrameRing, PhotoJob, PhotoProcessor.FilePath?, Bool, ContinuousClock.Instant, UInt64) in
            // Attached is enough: right after start the first frame may still be on its way to the ring.
            guard let ring, let context, let requestTime = context.runningTime() else { throw .sessionNotRunning }
            if let interruption { throw .sessionWasInterrupted(interruption) }
            guard inFlight + slotWaiters.count < maxInFlight + Self.maxWaitingCaptures else {
                throw .tooManyPendingCaptures(limit: Self.maxWaitingCaptures)
            }
            var prioritization = min(asked, maxPrioritization)
            if fastPrioritization {
                let backlog = inFlight + slotWaiters.count
                if backlog >= maxInFlight { prioritization = .speed } else if backlog >= 1 { prioritization = prioritization.lower }
            }
            momentary += 1
            lastRequest = Date()
            readinessChanged()
            let device = context.videoDevice()
            let job = PhotoJob(id: id, prioritization: prioritization,
                               rotation: Int(connection.videoRotationAngle), mirrored: connection.mirrorsCapturedFrames,
                               rotatePixels: orientation == .rotatePixels, zeroShutterLag: zeroShutterLag,
                               fileURL: fileURL, requestTime: requestTime, requestDate: Date(),
                               make: device.map { $0.manufacturer.isEmpty ? "gcapture" : $0.manufacturer } ?? "gcapture",
                               model: device?.localizedName ?? "unknown")
            let isDeferred = deferred && prioritization.defersDelivery && fileURL != nil
            nextSelectionTurn += 1
            return (ring, job, file, isDeferred, started, nextSelectionTurn - 1)
        }
    }

    /// Waits for the frames and a processing slot (suspended, holding no thread), then processes.
    private func complete(_ request: Request, follower: Follower?) async throws(CaptureError) -> CapturePhoto {
        let job = request.job
        let frames: [CapturedFrame]
        await waitForSelectionTurn(request.selectionTurn)
        do throws(CaptureError) {
            frames = try await selectFrames(from: request.ring, job: job, atRequest: request.framesAtRequest)
            passSelectionTurn()
        } catch {
            passSelectionTurn()
            locked { momentary -= 1; readinessChanged() }
            if let follower {
                finishWithoutPhoto(follower, error, resolved: CaptureResolvedPhotoSettings(unfinished: job, isDeferred: request.deferred),
                                   fileURL: job.fileURL)
            }
            throw error
        }
        await waitForProcessingSlot(settingsID: job.id)

        let resolvedAtStart = CaptureResolvedPhotoSettings(
            uniqueID: job.id, photoQualityPrioritization: job.prioritization,
            photoDimensions: (frames[0].info.width, frames[0].info.height), jpegQuality: job.prioritization.jpegQuality,
            isZeroShutterLag: job.zeroShutterLag, isDeferred: request.deferred, rotationAngle: job.rotation,
            isMirrored: job.mirrored, frameCount: frames.count)
        if let follower {
            deliver(follower, .begin, [{
                follower.delegate.photoOutput(self, willBeginCaptureFor: resolvedAtStart)
                follower.delegate.photoOutput(self, willCapturePhotoFor: resolvedAtStart)
                follower.delegate.photoOutput(self, didCapturePhotoFor: resolvedAtStart)
            }])
        }

        let result: Result<CapturePhoto, CaptureError> = await withCheckedContinuation { continuation in
            processingQueue.async {
                continuation.resume(returning: Result { () throws(CaptureError) -> CapturePhoto in
                    try self.process(job, file: request.file, frames: frames, deferred: request.deferred, started: request.started)
                })
            }
        }
        releaseProcessingSlot()
        if let follower {
            deliver(follower, .finish, [{
                let delegate = follower.delegate
                switch result {
                case .success(let photo) where photo.isProxy:
                    // Both shapes of the proxy callback (see the protocol); a delegate implements one.
                    delegate.photoOutput(self, didFinishCapturingDeferredPhotoProxy: Optional(photo), error: nil)
                    delegate.photoOutput(self, didFinishCapturingDeferredPhotoProxy: photo, error: nil)
                case .success(let photo):
                    delegate.photoOutput(self, didFinishProcessingPhoto: photo, error: nil)
                case .failure(let error):
                    delegate.photoOutput(self, didFinishProcessingPhoto: CapturePhoto(failed: resolvedAtStart, fileURL: job.fileURL), error: error)
                }
                delegate.photoOutput(self, didFinishCaptureFor: (try? result.get())?.resolvedSettings ?? resolvedAtStart, error: result.failure)
            }])
        }
        if request.deferred, case .success = result { scheduleDeferredProcessing(delegate: follower?.delegate) }
        return try result.get()
    }

    /// A capture that failed before it began: the delegate hears that its photo failed and that it finished,
    /// with the error, as AVFoundation's delegate does.
    private func finishWithoutPhoto(_ follower: Follower, _ error: CaptureError, resolved: CaptureResolvedPhotoSettings, fileURL: URL?) {
        deliver(follower, .begin, [])
        deliver(follower, .finish, [{
            follower.delegate.photoOutput(self, didFinishProcessingPhoto: CapturePhoto(failed: resolved, fileURL: fileURL), error: error)
            follower.delegate.photoOutput(self, didFinishCaptureFor: resolved, error: error)
        }])
    }

    /// Queues a capture's callbacks for its stage on `delegateQueue`, after those of earlier captures.
    /// Queued with the lock held, so that the queue's order is the order they became due in.
    private func deliver(_ follower: Follower, _ stage: CaptureCallbackOrder.Stage, _ callbacks: [CaptureCallbackOrder.Callback]) {
        locked {
            for callback in callbackOrder.pass(follower.ticket, stage, callbacks) { delegateQueue.async(execute: callback) }
        }
    }

    /// The frames a capture is made of: exposed at or before the request with zero shutter lag (the newest
    /// for .speed), else the next ones, waiting for them.
    private func selectFrames(from ring: FrameRing, job: PhotoJob, atRequest: [CapturedFrame]) async throws(CaptureError) -> [CapturedFrame] {
        let count = job.prioritization.frameCount
        var frames: [CapturedFrame] = []
        // What frames still missing are waited for: exposed after the request, or any (nil).
        var exposedAfter: UInt64? = job.requestTime
        // The next new frame stands in for one an earlier capture took: only it is waited for.
        var averagesEarlier = false
        if job.zeroShutterLag {
            frames = atRequest
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
               job.requestTime > newest.presentationTime + Self.staleFrameIntervals * interval {
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
        let timeout = frames.isEmpty ? Self.frameTimeout : 0.5
        locked { momentary -= 1; waitingForCapture += 1; readinessChanged() }
        let limit = averagesEarlier ? 1 : count - frames.count
        if frames.isEmpty {
            frames = await nextNewFrames(from: ring, after: exposedAfter, limit: limit, timeout: timeout)
        } else {
            frames += await ring.frames(after: exposedAfter, limit: limit, timeout: timeout)
        }
        locked { waitingForCapture -= 1; momentary += 1; readinessChanged() }
        guard let first = frames.first else {
            if let reason = locked({ interruption }) { throw .sessionWasInterrupted(reason) }
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

    private func waitForSelectionTurn(_ turn: UInt64) async {
        // The usual case, no capture choosing before this one, does not suspend.
        if locked({ selectionTurn == turn }) { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = locked {
                if selectionTurn == turn { return true }
                selectionWaiters[turn] = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func passSelectionTurn() {
        let next: CheckedContinuation<Void, Never>? = locked {
            selectionTurn += 1
            return selectionWaiters.removeValue(forKey: selectionTurn)
        }
        next?.resume()
    }

    private func waitForProcessingSlot(settingsID: Int64) async {
        // A free slot is taken at once, without suspending (a resumed continuation costs a thread hop).
        let taken: Bool = locked {
            guard inFlight < maxInFlight else { return false }
            momentary -= 1
            inFlight += 1
            readinessChanged(begun: settingsID)
            return true
        }
        if taken { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = locked {
                momentary -= 1
                if inFlight < maxInFlight {
                    inFlight += 1
                    readinessChanged(begun: settingsID)
                    return true
                }
                slotWaiters.append(continuation)
                readinessChanged(begun: settingsID)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func releaseProcessingSlot() {
        let next: CheckedContinuation<Void, Never>? = locked {
            if !slotWaiters.isEmpty { return slotWaiters.removeFirst() } // the slot passes on: inFlight unchanged
            inFlight -= 1
            readinessChanged()
            return nil
        }
        next?.resume()
    }

    private func process(_ job: PhotoJob, file: PhotoProcessor.FilePath?, frames: [CapturedFrame], deferred: Bool,
                         started: ContinuousClock.Instant) throws(CaptureError) -> CapturePhoto {
        let photoEncoder = try sharedEncoder()
        guard deferred, let url = job.fileURL else {
            return try PhotoProcessor.makePhoto(job, file: file, frames: frames, encoder: photoEncoder, quality: job.prioritization.jpegQuality,
                                                requestStart: started, isProxy: false)
        }
        // Keep the frames first: if the process dies after the proxy, the final is still made later.
        let folder = url.deletingLastPathComponent()
        let pending = try DeferredPhotoStore.save(job, frames: frames, in: folder)
        locked { _ = deferredFolders.insert(folder) }
        do throws(CaptureError) {
            return try PhotoProcessor.makePhoto(job, file: file, frames: [frames[0]], encoder: photoEncoder,
                                                quality: QualityPrioritization.speed.jpegQuality, requestStart: started, isProxy: true)
        } catch {
            // No proxy, no final: the final replaces its proxy, and must not replace a file that took its place.
            try? FileManager.default.removeItem(at: pending)
            throw error
        }
    }

    private func sharedEncoder() throws(CaptureError) -> PhotoEncoder {
        try locked { () throws(CaptureError) -> PhotoEncoder in
            if let encoder { return encoder }
            let made = try PhotoEncoder()
            encoder = made
            return made
        }
    }

    // MARK: Deferred processing

    /// Deferred photos in a folder: pending ones (proxy on disk) and finished ones.
    public static func deferredPhotos(in directory: URL) -> [DeferredPhoto] { DeferredPhotoStore.list(in: directory) }

    /// Finishes every pending deferred photo in `directory` now (each final replaces its proxy atomically)
    /// and returns the finished photos.
    public func finishDeferredPhotos(in directory: URL) async -> [Result<CapturePhoto, CaptureError>] {
        await withCheckedContinuation { continuation in
            deferredQueue.async { continuation.resume(returning: self.finishPending(in: directory).map(\.result)) }
        }
    }

    /// Waits until no capture has been requested for `deferredProcessingDelay`, then finishes the folder's
    /// pending deferred photos (what a program about to exit does with the work it deferred).
    public func finishDeferredPhotosWhenIdle(in directory: URL) async -> [Result<CapturePhoto, CaptureError>] {
        while true {
            let (idleFor, delay) = locked { (Date().timeIntervalSince(lastRequest), deferredDelay) }
            if idleFor >= delay { break }
            try? await Task.sleep(for: .milliseconds(Int((delay - idleFor) * 1000) + 1))
        }
        return await finishDeferredPhotos(in: directory)
    }

    /// Each pending photo's outcome, with its job when the job could be read.
    private func finishPending(in directory: URL) -> [(job: PhotoJob?, result: Result<CapturePhoto, CaptureError>)] {
        let handler = locked { deferredHandler }
        return DeferredPhotoStore.pendingJobs(in: directory).map { folder in
            var loadedJob: PhotoJob?
            let result = Result { () throws(CaptureError) -> CapturePhoto in
                let (job, frames) = try DeferredPhotoStore.load(folder)
                loadedJob = job
                let photoEncoder = try locked { () throws(CaptureError) -> PhotoEncoder in
                    if let deferredEncoder { return deferredEncoder }
                    let made = try PhotoEncoder()
                    self.deferredEncoder = made
                    return made
                }
                let photo = try PhotoProcessor.makePhoto(job, file: job.fileURL.map(PhotoProcessor.FilePath.init), frames: frames, encoder: photoEncoder,
                                                         quality: QualityPrioritization.quality.jpegQuality,
                                                         requestStart: .now, isProxy: false, replacingProxy: true)
                DeferredPhotoStore.finish(folder)
                return photo
            }
            if let handler { delegateQueue.async { handler(result) } }
            return (loadedJob, result)
        }
    }

    private func resumeDeferredWork() {
        let folders = locked { deferredFolders }
        if folders.contains(where: { !DeferredPhotoStore.pendingJobs(in: $0).isEmpty }) { scheduleDeferredProcessing(delegate: nil) }
    }

    /// Runs pending deferred work once no capture has been requested for `deferredProcessingDelay`.
    private func scheduleDeferredProcessing(delegate: (any CapturePhotoCaptureDelegate)?) {
        let delay: TimeInterval? = locked {
            guard !deferredScheduled else { return nil }
            deferredScheduled = true
            return deferredDelay
        }
        guard let delay else { return }
        deferredQueue.asyncAfter(deadline: .now() + delay) { [weak self] in self?.runDeferredWhenIdle(delegate: delegate) }
    }

    private func runDeferredWhenIdle(delegate: (any CapturePhotoCaptureDelegate)?) {
        let (idleFor, delay, folders) = locked { (Date().timeIntervalSince(lastRequest), deferredDelay, deferredFolders) }
        if idleFor < delay {
            deferredQueue.asyncAfter(deadline: .now() + (delay - idleFor)) { [weak self] in self?.runDeferredWhenIdle(delegate: delegate) }
            return
        }
        locked { deferredScheduled = false }
        for folder in folders {
            for (job, result) in finishPending(in: folder) {
                guard let delegate else { continue }
                delegateQueue.async {
                    switch result {
                    case .success(let photo): delegate.photoOutput(self, didFinishProcessingPhoto: photo, error: nil)
                    case .failure(let error):
                        // Work whose job cannot be read is for no capture's delegate: deferredPhotoHandler hears it.
                        guard let job else { return }
                        let failed = CapturePhoto(failed: CaptureResolvedPhotoSettings(unfinished: job, isDeferred: false), fileURL: job.fileURL)
                        delegate.photoOutput(self, didFinishProcessingPhoto: failed, error: error)
                    }
                }
            }
        }
    }
}

extension Result {
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}

extension Fraction {
    /// Nanoseconds between frames at this rate, when it is a rate.
    var interval: UInt64? { numerator > 0 ? UInt64(1_000_000_000 * denominator / numerator) : nil }
}
