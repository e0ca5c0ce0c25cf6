import Foundation
import GCapture
import GCaptureSupport

/// A value set once, awaited with a deadline: the controller must not wait for ever on a delegate call
/// that an errored branch may never make.
public final class OneShot<Value: Sendable>: Sendable {
    private struct Waiter {
        let continuation: CheckedContinuation<Value?, Never>
        /// Resumes the waiter with nil at its deadline; cancelled when the value comes first, so that a
        /// burst of photos does not leave a sleeping task behind each.
        var timer: Task<Void, Never>?
    }
    private struct State {
        var value: Value?
        var waiters: [UInt64: Waiter] = [:]
        var next: UInt64 = 0
    }
    private let state = Locked(State())

    public init() {}

    public var value: Value? { state.withLock { $0.value } }

    public func set(_ value: Value) {
        let waiters = state.withLock { state -> [Waiter] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters {
            waiter.timer?.cancel()
            waiter.continuation.resume(returning: value)
        }
    }

    /// The value, or nil when `seconds` passed first (nil `seconds`: no deadline).
    public func wait(seconds: Double?) async -> Value? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
            let (ready, id) = state.withLock { state -> (Value?, UInt64) in
                if let value = state.value { return (value, 0) }
                state.next += 1
                state.waiters[state.next] = Waiter(continuation: continuation)
                return (nil, state.next)
            }
            if let ready { return continuation.resume(returning: ready) }
            guard let seconds else { return }
            let timer = Task {
                try? await Task.sleep(for: .seconds(seconds))
                guard !Task.isCancelled else { return }
                state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: nil)
            }
            // The value may have come (and found no timer to cancel) while the timer was being made.
            let waiting = state.withLock { state -> Bool in
                guard state.waiters[id] != nil else { return false }
                state.waiters[id]?.timer = timer
                return true
            }
            if !waiting { timer.cancel() }
        }
    }
}

/// How a recording ended: nil when it was stopped, else why it ended (a limit, a failure).
struct RecordingFinish: Sendable {
    let error: CaptureError?
}

/// One recording's delegate: when it started (or why it could not), and when it finished.
final class RecordingWatcher: CaptureFileOutputRecordingDelegate, Sendable {
    let url: URL
    let started = OneShot<Result<URL, CaptureError>>()
    let finished = OneShot<RecordingFinish>()
    private let onFinish: @Sendable (RecordingWatcher, CaptureError?) -> Void

    init(url: URL, onFinish: @escaping @Sendable (RecordingWatcher, CaptureError?) -> Void) {
        self.url = url
        self.onFinish = onFinish
    }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        started.set(.success(fileURL))
    }

    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        let failure = error.map { $0 as? CaptureError ?? .recordingFailed(reason: "\($0)", underlying: nil) }
        // A recording that never started finishes at once with the reason.
        started.set(.failure(failure ?? .recordingFailed(reason: "the recording ended before it started", underlying: nil)))
        // The finished event first, then whoever waits for the finish (to reply to `record stop`).
        onFinish(self, failure)
        finished.set(RecordingFinish(error: failure))
    }
}

/// One photo's delegate: the photo, or why there is none.
final class PhotoWatcher: CapturePhotoCaptureDelegate, Sendable {
    let result = OneShot<Result<CapturePhoto, ControlFailure>>()

    func photoOutput(_ output: CapturePhotoOutput, didFinishProcessingPhoto photo: CapturePhoto, error: (any Error)?) {
        if let error {
            result.set(.failure(ControlFailure("\(error)")))
        } else {
            result.set(.success(photo))
        }
    }

    func photoOutput(_ output: CapturePhotoOutput, didFinishCaptureFor resolvedSettings: CaptureResolvedPhotoSettings, error: (any Error)?) {
        // Only reached without a photo when the capture failed before processing; said once either way.
        result.set(.failure(ControlFailure(error.map { "\($0)" } ?? "the capture ended without a photo")))
    }
}
