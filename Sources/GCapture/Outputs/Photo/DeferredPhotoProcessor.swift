import Dispatch
import Foundation
import GStreamerKit

/// The second half of deferred delivery: finishes the photos whose frames DeferredPhotoStore keeps, at
/// full quality, in the background, once the user has stopped pressing the shutter for a while, and
/// tells whoever waits for them (the capture's delegate, `deferredPhotoHandler`) on the delegate queue.
final class DeferredPhotoProcessor: Sendable {
    private struct State {
        var delay: TimeInterval = 0.5
        var folders: Set<URL> = []
        var handler: (@Sendable (Result<CapturePhoto, CaptureError>) -> Void)?
        var lastRequest = Date.distantPast
        var isScheduled = false
    }

    private let state = Locked(State())
    /// Apart from `state`: making the encoder takes a while, and captures note their requests meanwhile.
    private let madeEncoder = Locked<PhotoEncoder?>(nil)
    private let queue = DispatchQueue(label: "gcapture.photo.deferred", qos: .utility)
    private let delegateQueue: DispatchQueue

    init(delegateQueue: DispatchQueue) {
        self.delegateQueue = delegateQueue
    }

    var delay: TimeInterval {
        get { state.withLock { $0.delay } }
        set { state.withLock { $0.delay = newValue } }
    }

    var folders: [URL] {
        get { state.withLock { Array($0.folders) } }
        set { state.withLock { $0.folders = Set(newValue) } }
    }

    var handler: (@Sendable (Result<CapturePhoto, CaptureError>) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// A capture was requested now: deferred work waits for the user to stop pressing.
    func captureRequested() {
        state.withLock { $0.lastRequest = Date() }
    }

    /// Keeps a capture's frames on disk before its proxy is made: if the process dies after the proxy,
    /// the final is still made later. Returns the pending job's folder.
    func keep(_ job: PhotoJob, frames: [CapturedFrame], in folder: URL) throws(CaptureError) -> URL {
        let pending = try DeferredPhotoStore.save(job, frames: frames, in: folder)
        state.withLock { _ = $0.folders.insert(folder) }
        return pending
    }

    /// Finishes every pending deferred photo in `directory` now, off the caller's thread.
    func finish(in directory: URL) async -> [Result<CapturePhoto, CaptureError>] {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.finishPending(in: directory).map(\.result)) }
        }
    }

    /// Waits until no capture has been requested for `delay`, then finishes the folder's pending photos.
    func finishWhenIdle(in directory: URL) async -> [Result<CapturePhoto, CaptureError>] {
        while true {
            let (idleFor, delay) = state.withLock { (Date().timeIntervalSince($0.lastRequest), $0.delay) }
            if idleFor >= delay { break }
            try? await Task.sleep(for: .milliseconds(Int((delay - idleFor) * 1000) + 1))
        }
        return await finish(in: directory)
    }

    /// Work left unfinished in the known folders (by a crash or an earlier run) is scheduled again.
    func resumeWork(of output: CapturePhotoOutput) {
        let folders = state.withLock { $0.folders }
        if folders.contains(where: { !DeferredPhotoStore.pendingJobs(in: $0).isEmpty }) { schedule(for: output, delegate: nil) }
    }

    /// Runs pending deferred work once no capture has been requested for `delay`.
    func schedule(for output: CapturePhotoOutput, delegate: (any CapturePhotoCaptureDelegate)?) {
        let delay = state.withLock { state -> TimeInterval? in
            guard !state.isScheduled else { return nil }
            state.isScheduled = true
            return state.delay
        }
        guard let delay else { return }
        queue.asyncAfter(deadline: .now() + delay) { [weak self, weak output] in
            guard let self, let output else { return }
            self.runWhenIdle(for: output, delegate: delegate)
        }
    }

    private func runWhenIdle(for output: CapturePhotoOutput, delegate: (any CapturePhotoCaptureDelegate)?) {
        let (idleFor, delay, folders) = state.withLock { (Date().timeIntervalSince($0.lastRequest), $0.delay, $0.folders) }
        if idleFor < delay {
            queue.asyncAfter(deadline: .now() + (delay - idleFor)) { [weak self, weak output] in
                guard let self, let output else { return }
                self.runWhenIdle(for: output, delegate: delegate)
            }
            return
        }
        state.withLock { $0.isScheduled = false }
        for folder in folders {
            for (job, result) in finishPending(in: folder) {
                guard let delegate else { continue }
                delegateQueue.async {
                    switch result {
                    case .success(let photo): delegate.photoOutput(output, didFinishProcessingPhoto: photo, error: nil)
                    case .failure(let error):
                        // Work whose job cannot be read is for no capture's delegate: deferredPhotoHandler hears it.
                        guard let job else { return }
                        let failed = CapturePhoto(failed: CaptureResolvedPhotoSettings(unfinished: job, isDeferred: false), fileURL: job.fileURL)
                        delegate.photoOutput(output, didFinishProcessingPhoto: failed, error: error)
                    }
                }
            }
        }
    }

    /// Each pending photo's outcome, with its job when the job could be read.
    private func finishPending(in directory: URL) -> [(job: PhotoJob?, result: Result<CapturePhoto, CaptureError>)] {
        let handler = state.withLock { $0.handler }
        return DeferredPhotoStore.pendingJobs(in: directory).map { folder in
            var loadedJob: PhotoJob?
            let result = Result { () throws(CaptureError) -> CapturePhoto in
                let (job, frames) = try DeferredPhotoStore.load(folder)
                loadedJob = job
                let photo = try PhotoProcessor.makePhoto(job, file: job.fileURL.map(PhotoProcessor.FilePath.init), frames: frames, encoder: try encoder(),
                                                         quality: CapturePhotoOutput.QualityPrioritization.quality.jpegQuality,
                                                         requestStart: .now, isProxy: false, replacingProxy: true)
                DeferredPhotoStore.finish(folder)
                return photo
            }
            if let handler { delegateQueue.async { handler(result) } }
            return (loadedJob, result)
        }
    }

    /// Deferred work has an encoder of its own, so that it never holds up a capture's.
    private func encoder() throws(CaptureError) -> PhotoEncoder {
        try madeEncoder.madeOnFirstUse()
    }
}
