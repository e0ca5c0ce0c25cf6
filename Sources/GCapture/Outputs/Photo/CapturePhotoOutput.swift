import Dispatch
import Foundation
import GStreamerKit

/// Still photos from a running session (AVCapturePhotoOutput), with zero shutter lag: the photo is the frame
/// exposed at the instant of the request, taken from a ring of recent frames, never "the next frame".
/// Captures overlap (one is accepted while others encode), quality can be traded for speed, and deferred
/// delivery hands out a proxy at once and replaces it with the final image when processing is done.
public final class CapturePhotoOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked as CaptureOutput is: every stored property is a `let` of a Sendable type, and what changes
    // is behind `settings`, `encoder`, `callbackOrder` or in `captures` and `deferredWork`.

    // MARK: Configuration (set before adding the output or between captures)

    /// Whether the current configuration can give a photo exposed at the request: true while the output is
    /// in a session that has a camera (the ring is fed from its frames, whatever their format), false before
    /// it is added, after it is removed, or without a camera, as AVFoundation's is false there.
    public var isZeroShutterLagSupported: Bool { captures.isFedByCamera }
    /// On by default: the photo is the frame nearest at or before the request. Off: the next frame.
    public var isZeroShutterLagEnabled: Bool {
        get { settings.withLock { $0.zeroShutterLag } } set { settings.withLock { $0.zeroShutterLag = newValue } }
    }
    /// Frames the ring keeps (at least 3, as CameraX). Applies when the output is next attached.
    public var zeroShutterLagRingDepth: Int {
        get { settings.withLock { $0.ringDepth } } set { settings.withLock { $0.ringDepth = max(3, newValue) } }
    }
    /// The highest prioritization a capture may ask for.
    public var maxPhotoQualityPrioritization: QualityPrioritization {
        get { settings.withLock { $0.maxPrioritization } } set { settings.withLock { $0.maxPrioritization = newValue } }
    }
    /// Overlapping captures need nothing of the camera beyond frames: supported when zero shutter lag is.
    public var isResponsiveCaptureSupported: Bool { captures.isFedByCamera }
    /// On by default: up to `maxInFlightCaptures` photos are processed at once; off: one at a time.
    public var isResponsiveCaptureEnabled: Bool { get { captures.isResponsive } set { captures.isResponsive = newValue } }
    /// Supported whenever photos can be taken (stepping quality down needs no more than that).
    public var isFastCapturePrioritizationSupported: Bool { captures.isFedByCamera }
    /// When captures come faster than they finish, step quality down to hold the shot-to-shot time.
    public var isFastCapturePrioritizationEnabled: Bool {
        get { settings.withLock { $0.fastPrioritization } } set { settings.withLock { $0.fastPrioritization = newValue } }
    }
    /// Supported whenever photos can be taken; applies to .quality captures written to a file.
    public var isAutoDeferredPhotoDeliverySupported: Bool { captures.isFedByCamera }
    /// For .quality captures written to a file: a proxy at once, the final image when processing is done.
    public var isAutoDeferredPhotoDeliveryEnabled: Bool {
        get { settings.withLock { $0.deferred } } set { settings.withLock { $0.deferred = newValue } }
    }
    /// Deferred processing waits until no capture has been requested for this long, to stay out of a burst.
    public var deferredProcessingDelay: TimeInterval { get { deferredWork.delay } set { deferredWork.delay = newValue } }
    /// Folders whose unfinished deferred photos (from a crash or an earlier run) are finished when the output
    /// starts. Folders photos are written to are added by themselves.
    public var deferredPhotoDirectories: [URL] { get { deferredWork.folders } set { deferredWork.folders = newValue } }

    /// Called (on `delegateQueue`) for every deferred photo finished in the background, including work
    /// resumed from an earlier run, which has no capture delegate to tell.
    public var deferredPhotoHandler: (@Sendable (Result<CapturePhoto, CaptureError>) -> Void)? {
        get { deferredWork.handler } set { deferredWork.handler = newValue }
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

    /// Memory the zero-shutter-lag ring holds now.
    public var zeroShutterLagMemoryBytes: Int { captures.ringMemoryBytes }

    /// The frames the zero-shutter-lag ring holds now, newest first.
    var framesInRing: [CapturedFrame] { captures.ringNow().ring?.frames(atOrBefore: .max, limit: .max) ?? [] }

    /// Readiness now (coordinators are told of every change).
    public var captureReadiness: CaptureReadiness { captures.readiness }

    // MARK: Parts

    /// What a capture reads from the configuration when it is requested.
    private struct Settings {
        var zeroShutterLag = true
        var ringDepth = 4
        var maxPrioritization = QualityPrioritization.quality
        var fastPrioritization = false
        var deferred = false
    }
    private let settings = Locked(Settings())
    private let captures = PhotoCaptureQueue()
    private let deferredWork: DeferredPhotoProcessor
    private let callbackOrder = Locked(CaptureCallbackOrder())

    /// Concurrent: the processing slots (PhotoCaptureQueue) bound how many photos run at once, up to
    /// `maxInFlightCaptures`. A serial queue made those slots wait on one thread, so two cores encoded one
    /// photo at a time and a 2160p burst at 30 a second fell behind (and was refused) as soon as that one
    /// thread was preempted; every step of a photo (the encoder's pixel pipeline behind its lock, libjpeg
    /// with a compressor per call, the atomic write) may run beside another.
    private let processingQueue = DispatchQueue(label: "gcapture.photo.processing", attributes: .concurrent)
    /// Apart from the other state: making the encoder takes a while, and requests are taken meanwhile.
    private let encoder = Locked<PhotoEncoder?>(nil)
    /// Where every delegate of this output is called (capture delegates, the deferred photo handler,
    /// readiness coordinators), in order, never with the output's lock held nor on a streaming thread.
    public let delegateQueue: DispatchQueue
    /// Marks `delegateQueue` with its output, so that code can tell it runs there.
    static let delegateQueueKey = DispatchSpecificKey<ObjectIdentifier>()

    public override init() {
        let delegateQueue = DispatchQueue(label: "gcapture.photo.delegate")
        self.delegateQueue = delegateQueue
        deferredWork = DeferredPhotoProcessor(delegateQueue: delegateQueue)
        super.init()
        delegateQueue.setSpecific(key: Self.delegateQueueKey, value: ObjectIdentifier(self))
    }

    override class var turnsCapturedFrames: Bool { true }

    // MARK: Graph

    override func branchDescription() throws(CaptureError) -> String? {
        Self.appSinkFragment
    }

    /// The ring keeps frames, but copies by itself those the camera's pool cannot spare and hands captures
    /// copies (FrameRing); it forgets its frames when the camera is interrupted or another takes over.
    override var keepsFrames: Bool { false }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        guard let sink = Self.appSink(in: branch) else { return }
        let ring = FrameRing(depth: settings.withLock { $0.ringDepth })
        captures.attach(ring: ring, context: context)
        sink.setSampleHandler { [weak self, ring] sample in
            // Filler frames while the camera is interrupted are no photo's: the ring keeps none.
            if ring.store(sample) { self?.captures.frameArrived() }
        }
        // A camera that dies pushes end-of-stream through the session's tee; past it the branch would refuse
        // every later frame (the session's filler, the camera after recovery), and its error would stop the
        // filler. Photos never need an end-of-stream: the branch is only ever torn down.
        branch?.staticPad("sink")?.dropEndOfStreamFromUpstream()
        // The encoder's pipeline is made now, not on the first press.
        processingQueue.async { [weak self] in _ = try? self?.sharedEncoder() }
        deferredWork.resumeWork(of: self)
    }

    override func didDetach() {
        captures.detach()
    }

    /// On the session's queue. While the camera is interrupted no photo can be of the moment asked for (the
    /// session feeds filler frames): captures asked for fail at once with `.sessionWasInterrupted`, those
    /// waiting for a frame fail with it now, and readiness is `.sessionNotRunning` (the session is not
    /// running for AVFoundation while interrupted). Captures whose frames were chosen before finish.
    override func sessionWasInterrupted(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        // After the flag: a capture released here must find the reason.
        captures.interrupt(reason)?.suspend()
    }

    /// On the session's queue, once another camera delivers: a photo asked for from now on is of it. The old
    /// camera's frames would otherwise stay in the ring until pushed out, and one asked for right after the
    /// switch (before the new camera's first frame had reached the ring) was the old camera's picture.
    override func videoDeviceDidChange(_ device: CaptureDevice?) {
        let (ring, now) = captures.ringNow()
        if let ring, let now { ring.forgetFrames(exposedBefore: now) }
    }

    /// On the session's queue: photos can be taken again from the camera's first frame from now on.
    override func sessionInterruptionEnded(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        let (ring, now) = captures.endInterruption()
        ring?.resume(keepingFramesFrom: now ?? 0)
    }

    // MARK: Readiness

    func addReadinessObserver(_ coordinator: CapturePhotoOutputReadinessCoordinator) {
        captures.addReadinessObserver(coordinator)
    }

    /// Runs `body` with the readiness state stable; coordinators use it to deliver in order.
    func withReadinessLock<R>(_ body: (CaptureReadiness) -> R) -> R { captures.withReadinessLock(body) }

    // MARK: Capturing

    /// Takes a photo and follows it with `delegate` on `delegateQueue`. The request is taken now: the frame
    /// is the one exposed at this call, and the settings and the output's configuration are read here, so
    /// changing them after this returns changes nothing of this capture. Callbacks of captures requested
    /// one after another come in that order.
    public func capturePhoto(with settings: CapturePhotoSettings, delegate: any CapturePhotoCaptureDelegate) {
        let follower = Follower(delegate: delegate, ticket: callbackOrder.withLock { $0.issue() })
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
        /// busy cooperative pool) must not find them gone from the ring. Taken out when its frames are
        /// chosen, so that captures waiting their turn hold them but no longer.
        let framesAtRequest: HeldFrames
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
        let started = ContinuousClock.now
        let (id, asked, orientation, fileURL) = (settings.uniqueID, settings.photoQualityPrioritization,
                                                 settings.orientationHandling, settings.fileURL)
        let file = fileURL.map(PhotoProcessor.FilePath.init)
        if let file { try PhotoProcessor.checkNewFile(file) }
        let configuration = self.settings.withLock { $0 }
        let (rotation, mirrored) = (Int(connection.videoRotationAngle), connection.mirrorsCapturedFrames)
        let admission = try captures.admit(asking: min(asked, configuration.maxPrioritization),
                                           fastPrioritization: configuration.fastPrioritization)
        deferredWork.captureRequested()
        let device = admission.context.videoDevice()
        let job = PhotoJob(id: id, prioritization: admission.prioritization,
                           rotation: rotation, mirrored: mirrored,
                           rotatePixels: orientation == .rotatePixels, zeroShutterLag: configuration.zeroShutterLag,
                           fileURL: fileURL, requestTime: admission.requestTime, requestDate: Date(),
                           make: device.map { $0.manufacturer.isEmpty ? "gcapture" : $0.manufacturer } ?? "gcapture",
                           model: device?.localizedName ?? "unknown")
        let isDeferred = configuration.deferred && admission.prioritization.defersDelivery && fileURL != nil
        let ring = admission.ring
        var atRequest: [CapturedFrame] = []
        if job.zeroShutterLag {
            atRequest = job.prioritization == .speed ? ring.newest().map { [$0] } ?? []
                : ring.frames(atOrBefore: job.requestTime, limit: job.prioritization.frameCount)
        }
        return Request(ring: ring, job: job, file: file, deferred: isDeferred, started: started, framesAtRequest: HeldFrames(atRequest),
                       selectionTurn: admission.selectionTurn)
    }

    /// Waits for the frames and a processing slot (suspended, holding no thread), then processes.
    private func complete(_ request: Request, follower: Follower?) async throws(CaptureError) -> CapturePhoto {
        let job = request.job
        let frames: [CapturedFrame]
        await captures.waitForSelectionTurn(request.selectionTurn)
        do throws(CaptureError) {
            frames = try await captures.selectFrames(from: request.ring, job: job, atRequest: request.framesAtRequest.take())
            captures.passSelectionTurn()
        } catch {
            captures.passSelectionTurn()
            captures.abandon()
            if let follower {
                finishWithoutPhoto(follower, error, resolved: CaptureResolvedPhotoSettings(unfinished: job, isDeferred: request.deferred),
                                   fileURL: job.fileURL)
            }
            throw error
        }
        await captures.waitForProcessingSlot(settingsID: job.id)

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
        captures.releaseProcessingSlot()
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
        if request.deferred, case .success = result { deferredWork.schedule(for: self, delegate: follower?.delegate) }
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
    /// Queued with the lock held, so that the queue's order is the order they became due in; queued, not
    /// called: the delegate runs later, outside the lock.
    private func deliver(_ follower: Follower, _ stage: CaptureCallbackOrder.Stage, _ callbacks: [CaptureCallbackOrder.Callback]) {
        callbackOrder.withLock { order in
            for callback in order.pass(follower.ticket, stage, callbacks) { delegateQueue.async(execute: callback) }
        }
    }

    private func process(_ job: PhotoJob, file: PhotoProcessor.FilePath?, frames: [CapturedFrame], deferred: Bool,
                         started: ContinuousClock.Instant) throws(CaptureError) -> CapturePhoto {
        let photoEncoder = try sharedEncoder()
        guard deferred, let url = job.fileURL else {
            return try PhotoProcessor.makePhoto(job, file: file, frames: frames, encoder: photoEncoder, quality: job.prioritization.jpegQuality,
                                                requestStart: started, isProxy: false)
        }
        // Keep the frames first: if the process dies after the proxy, the final is still made later.
        let pending = try deferredWork.keep(job, frames: frames, in: url.deletingLastPathComponent())
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
        try encoder.madeOnFirstUse()
    }

    // MARK: Deferred processing

    /// Deferred photos in a folder: pending ones (proxy on disk) and finished ones.
    public static func deferredPhotos(in directory: URL) -> [DeferredPhoto] { DeferredPhotoStore.list(in: directory) }

    /// Finishes every pending deferred photo in `directory` now (each final replaces its proxy atomically)
    /// and returns the finished photos.
    public func finishDeferredPhotos(in directory: URL) async -> [Result<CapturePhoto, CaptureError>] {
        await deferredWork.finish(in: directory)
    }

    /// Waits until no capture has been requested for `deferredProcessingDelay`, then finishes the folder's
    /// pending deferred photos (what a program about to exit does with the work it deferred).
    public func finishDeferredPhotosWhenIdle(in directory: URL) async -> [Result<CapturePhoto, CaptureError>] {
        await deferredWork.finishWhenIdle(in: directory)
    }
}

/// Frames a capture holds until it hands them on: the request (and the task running it) lives until the
/// photo is delivered, its frames need not. A capture whose frame at the request an earlier one took waits
/// for a new frame; holding the old one meanwhile kept a frame alive per waiting capture, which, when the
/// camera slowed to half its rate under a 2160p burst (the pressure monitor), reached 708 MiB at the peak.
final class HeldFrames: Sendable {
    private let frames: Locked<[CapturedFrame]>

    init(_ frames: [CapturedFrame]) { self.frames = Locked(frames) }

    /// The frames, once: later calls get none.
    func take() -> [CapturedFrame] { frames.withLock { held in defer { held = [] }; return held } }
}

extension Result {
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
