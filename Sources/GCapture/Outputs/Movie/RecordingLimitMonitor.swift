import Dispatch
import Foundation

/// Stops a recording at the limits its timeline cannot keep frame by frame: the free space left on the
/// file's disk, and the duration when no frame comes to reach it.
struct RecordingLimitMonitor {
    /// What a check compares, read afresh each time: the limits as set now and the recording's progress.
    struct Reading {
        var maxDuration: TimeInterval?
        var minFreeDisk: Int64
        var encoding: MovieEncoding
        /// Seconds recorded so far, pauses excluded.
        var recordedDuration: TimeInterval
    }

    private let timer: DispatchSourceTimer

    /// Checks every 0.2 s on `queue` once started. `read` returns nil when there is no recording to check;
    /// `reached` hears every check that finds a limit reached (the recording stops once).
    init(folder: URL, queue: DispatchQueue, read: @escaping @Sendable () -> Reading?,
         reached: @escaping @Sendable (CaptureError) -> Void) {
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + 0.2, repeating: 0.2)
        timer.setEventHandler {
            guard let reading = read(), let limit = Self.limitReached(reading, folder: folder) else { return }
            reached(limit)
        }
    }

    func start() { timer.resume() }
    func cancel() { timer.cancel() }

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
