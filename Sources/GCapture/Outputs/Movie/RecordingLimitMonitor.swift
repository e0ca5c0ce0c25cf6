import Dispatch
import Foundation

/// Stops a recording at the limits its timeline cannot keep frame by frame: the free space left on the
/// file's disk, and the duration when no frame comes to reach it. Checked on the tick a running session already
/// has (SystemPressureMonitor's, every 250 ms), not on a timer of its own: one periodic wake-up per process.
final class RecordingLimitMonitor: Sendable {
    /// What a check compares, read afresh each time: the limits as set now and the recording's progress.
    struct Reading {
        var maxDuration: TimeInterval?
        var minFreeDisk: Int64
        var encoding: MovieEncoding
        /// Seconds recorded so far, pauses excluded.
        var recordedDuration: TimeInterval
    }

    private let folder: URL
    private let queue: DispatchQueue
    private let read: @Sendable () -> Reading?
    private let reached: @Sendable (CaptureError) -> Void
    /// The listener's key on the shared tick, between start and cancel (nil once cancelled, for good).
    private let listener = Locked<(key: UUID?, cancelled: Bool)>((nil, false))

    /// `read` returns nil when there is no recording to check; `reached` hears, on `queue`, every check that
    /// finds a limit reached (the recording stops once). The checks themselves run on the tick's thread: a
    /// statvfs and a read of the recording's state, without waking `queue` when nothing is reached.
    init(folder: URL, queue: DispatchQueue, read: @escaping @Sendable () -> Reading?,
         reached: @escaping @Sendable (CaptureError) -> Void) {
        self.folder = folder
        self.queue = queue
        self.read = read
        self.reached = reached
    }

    func start() {
        listener.withLock { listener in
            guard listener.key == nil, !listener.cancelled else { return }
            listener.key = SystemPressureMonitor.shared.add { [weak self] _ in self?.check() }
        }
    }

    /// A monitor let go of without `cancel` leaves the tick too (the tick holds it weakly).
    deinit { cancel() }

    func cancel() {
        let key = listener.withLock { listener -> UUID? in
            defer { listener = (nil, true) }
            return listener.key
        }
        if let key { SystemPressureMonitor.shared.remove(key) }
    }

    private func check() {
        guard let reading = read(), let limit = Self.limitReached(reading, folder: folder) else { return }
        let reached = reached
        queue.async { reached(limit) }
    }

    /// The limit `reading` has reached, nil for none. The disk must keep room for the fragment being written.
    static func limitReached(_ reading: Reading, folder: URL) -> CaptureError? {
        // The duration and size limits are kept frame by frame by the recording's timeline, which stops
        // the recording at the first frame past them; this covers a camera that stops delivering frames
        // right at the limit.
        if let maxDuration = reading.maxDuration, reading.recordedDuration >= maxDuration {
            return .maximumDurationReached
        }
        let encoding = reading.encoding
        let bytesPerFragment = Int64(Double(encoding.videoBitRate + (encoding.withAudio ? 128_000 : 0)) / 8 * encoding.fragmentInterval)
        if reading.minFreeDisk > 0 {
            var info = statvfs()
            if statvfs(folder.path, &info) == 0,
               Int64(info.f_bavail) * Int64(info.f_frsize) < reading.minFreeDisk + bytesPerFragment {
                return .diskSpaceLimitReached
            }
        }
        return nil
    }
}
