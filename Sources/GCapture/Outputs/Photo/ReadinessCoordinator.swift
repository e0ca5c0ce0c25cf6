import Foundation

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

/// Told of every readiness change, synchronously and in order, on the thread that caused it.
public protocol CapturePhotoOutputReadinessCoordinatorDelegate: AnyObject, Sendable {
    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness)
}

/// Follows a photo output's readiness so a shutter button can be enabled exactly when a press would be
/// taken at once (AVCapturePhotoOutputReadinessCoordinator).
public final class CapturePhotoOutputReadinessCoordinator: @unchecked Sendable {
    public weak var delegate: (any CapturePhotoOutputReadinessCoordinatorDelegate)?
    private weak var output: CapturePhotoOutput?
    private var tracked: Set<Int64> = []
    private var last: CapturePhotoOutput.CaptureReadiness?

    public init(photoOutput: CapturePhotoOutput) {
        output = photoOutput
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
    }

    public func stopTrackingCaptureRequest(using settingsID: Int64) {
        output?.withReadinessLock { base in
            tracked.remove(settingsID)
            publish(readiness(base: base))
        }
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

    private func publish(_ readiness: CapturePhotoOutput.CaptureReadiness) {
        guard readiness != last else { return }
        last = readiness
        delegate?.readinessCoordinator(self, captureReadinessDidChange: readiness)
    }
}
