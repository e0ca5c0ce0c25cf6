import GStreamerKit
import Foundation
import Synchronization

extension CapturePhotoOutput {
    /// Whether a new capture would start at once (AVCapturePhotoOutput.CaptureReadiness).
    public enum CaptureReadiness: String, Sendable, Codable {
        case sessionNotRunning
        case ready
        /// A request was just accepted and has not begun yet.
        case notReadyMomentarily
        /// A capture waits for its frame(s) to be exposed (zero shutter lag off, or no frame yet).
        case notReadyWaitingForCapture
        /// As many captures are being processed as the output allows at once.
        case notReadyWaitingForProcessing
    }
}

/// Told of every readiness change, in order, on the photo output's `delegateQueue` (AVFoundation calls it on
/// the main queue), never with the output's lock held: it may call back into the output or the coordinator.
/// startTrackingCaptureRequest and stopTrackingCaptureRequest called on that queue tell it before they return.
public protocol CapturePhotoOutputReadinessCoordinatorDelegate: AnyObject, Sendable {
    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness)
}

/// Follows a photo output's readiness so a shutter button can be enabled exactly when a press would be
/// taken at once (AVCapturePhotoOutputReadinessCoordinator). `captureReadiness` changes at once; the
/// delegate hears of each change on the output's delegate queue.
public final class CapturePhotoOutputReadinessCoordinator: @unchecked Sendable {
    // @unchecked: `tracked` and `last` are touched only under the capture queue's lock, the rest is Locked or let.
    /// Held weakly, as AVFoundation's.
    public var delegate: (any CapturePhotoOutputReadinessCoordinatorDelegate)? {
        get { delivery.withLock { $0.delegate } }
        set { delivery.withLock { $0.delegate = newValue } }
    }

    private weak var output: CapturePhotoOutput?
    private let queue: DispatchQueue
    private let outputID: ObjectIdentifier
    // Under the output's capture queue's lock (withReadinessLock, outputReadinessChanged).
    private var tracked: Set<Int64> = []
    private var last: CapturePhotoOutput.CaptureReadiness?

    /// Changes not yet told, oldest first; the delegate is called outside every lock.
    private struct Delivery {
        weak var delegate: (any CapturePhotoOutputReadinessCoordinatorDelegate)?
        var pending: [CapturePhotoOutput.CaptureReadiness] = []
        var isDelivering = false
    }
    private let delivery = Locked(Delivery())

    public init(photoOutput: CapturePhotoOutput) {
        output = photoOutput
        queue = photoOutput.delegateQueue
        outputID = ObjectIdentifier(photoOutput)
        photoOutput.addReadinessObserver(self)
    }

    public var captureReadiness: CapturePhotoOutput.CaptureReadiness {
        output?.withReadinessLock { readiness(base: $0) } ?? .sessionNotRunning
    }

    /// Call just before capturePhoto: readiness turns notReadyMomentarily at once, before the output
    /// has even seen the request.
    public func startTrackingCaptureRequest(using settings: CapturePhotoSettings) {
        output?.withReadinessLock { base in
            tracked.insert(settings.uniqueID)
            publish(readiness(base: base))
        }
        deliverIfOnQueue()
    }

    public func stopTrackingCaptureRequest(using settingsID: Int64) {
        output?.withReadinessLock { base in
            tracked.remove(settingsID)
            publish(readiness(base: base))
        }
        deliverIfOnQueue()
    }

    /// Called by the output with its readiness lock held.
    func outputReadinessChanged(_ base: CapturePhotoOutput.CaptureReadiness, begunCapture settingsID: Int64?) {
        if let settingsID { tracked.remove(settingsID) }
        publish(readiness(base: base))
    }

    private func readiness(base: CapturePhotoOutput.CaptureReadiness) -> CapturePhotoOutput.CaptureReadiness {
        if base == .ready, !tracked.isEmpty { return .notReadyMomentarily }
        return base
    }

    /// With the output's lock held: queues the change (changes reach the queue in the order they happened).
    private func publish(_ readiness: CapturePhotoOutput.CaptureReadiness) {
        guard readiness != last else { return }
        last = readiness
        delivery.withLock { $0.pending.append(readiness) }
        queue.async { self.deliverPending() }
    }

    /// A caller on the delegate queue hears of the change it made before it returns, as on AVFoundation's
    /// main queue; others hear of it on the queue shortly after.
    private func deliverIfOnQueue() {
        if DispatchQueue.getSpecific(key: CapturePhotoOutput.delegateQueueKey) == outputID { deliverPending() }
    }

    /// On the delegate queue: tells the delegate every pending change, oldest first. A delegate that
    /// tracks a request from inside its callback is told of that change when the callback returns.
    private func deliverPending() {
        let starts = delivery.withLock { state -> Bool in
            guard !state.isDelivering else { return false }
            state.isDelivering = true
            return true
        }
        guard starts else { return }
        while let (changes, delegate) = delivery.withLock({ state -> ([CapturePhotoOutput.CaptureReadiness], (any CapturePhotoOutputReadinessCoordinatorDelegate)?)? in
            guard !state.pending.isEmpty else {
                state.isDelivering = false
                return nil
            }
            defer { state.pending = [] }
            return (state.pending, state.delegate)
        }) {
            for change in changes { delegate?.readinessCoordinator(self, captureReadinessDidChange: change) }
        }
    }
}
