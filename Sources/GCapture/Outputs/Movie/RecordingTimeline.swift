import Foundation
import GStreamerKit

/// Where a recording is in time: decides which buffers enter the file and by how much their timestamps move
/// so the file starts at zero and pauses leave no gap. Video leads: the recording starts at the first video
/// frame and resumes at the first frame after resume; audio follows it, so the tracks stay in sync.
final class RecordingTimeline: @unchecked Sendable {
    struct Statistics: Sendable {
        var frames = 0
        /// Frames missing from the timeline (gaps in timestamps longer than a frame and a half).
        var droppedFrames = 0
        /// Recorded duration in nanoseconds, pauses excluded.
        var duration: UInt64 = 0
        var audioBuffers = 0
        /// First video and first audio timestamps in the file, nanoseconds.
        var firstVideoTime: UInt64?
        var firstAudioTime: UInt64?
    }

    private let lock = NSLock()
    private var start: UInt64?
    private var pausedTotal: UInt64 = 0
    private var pausedAt: UInt64?
    private var pauseRequested = false
    private var resumeRequested = false
    private var lastVideoTime: UInt64?
    private var frameInterval: UInt64?
    private var statistics = Statistics()

    init() {}

    var stats: Statistics { lock.withLock { statistics } }
    var isPaused: Bool { lock.withLock { pauseRequested } }

    func pause() { lock.withLock { pauseRequested = true; resumeRequested = false } }
    func resume() { lock.withLock { if pauseRequested { resumeRequested = true } } }

    /// For the video input's probe: nil when the frame stays out of the file, else how much earlier its
    /// timestamps must move.
    func admitVideo(_ pts: ClockTime?, duration: ClockTime?) -> ClockTime? {
        guard let pts else { return nil }
        let time = UInt64(pts)
        return lock.withLock { () -> ClockTime? in
            if let duration, duration > 0 { frameInterval = UInt64(duration) }
            if pauseRequested, !resumeRequested {
                if pausedAt == nil { pausedAt = time }
                return nil
            }
            if resumeRequested, let pausedAt {
                // The pause lasted from its first dropped frame to this one.
                pausedTotal += time - pausedAt
                self.pausedAt = nil
                pauseRequested = false
                resumeRequested = false
                lastVideoTime = nil
            }
            if start == nil { start = time }
            if let last = lastVideoTime, let interval = frameInterval, time > last + interval * 3 / 2 {
                statistics.droppedFrames += Int((time - last) / interval) - 1
            }
            lastVideoTime = time
            statistics.frames += 1
            let fileTime = time - (start ?? time) - pausedTotal
            if statistics.firstVideoTime == nil { statistics.firstVideoTime = fileTime }
            statistics.duration = fileTime + (frameInterval ?? 0)
            return ClockTime((start ?? time) + pausedTotal)
        }
    }

    /// For the audio input's probe: audio enters only while video is being recorded.
    func admitAudio(_ pts: ClockTime?) -> ClockTime? {
        guard let pts else { return nil }
        return lock.withLock { () -> ClockTime? in
            guard let start, !pauseRequested, UInt64(pts) >= start + pausedTotal else { return nil }
            statistics.audioBuffers += 1
            if statistics.firstAudioTime == nil { statistics.firstAudioTime = UInt64(pts) - start - pausedTotal }
            return ClockTime(start + pausedTotal)
        }
    }
}
