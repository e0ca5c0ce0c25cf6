import Foundation
import GStreamerKit

/// Where a recording is in time: decides which buffers enter the file and by how much their timestamps move
/// so the file starts at zero and pauses leave no gap. Video leads: the recording starts at the first video
/// frame and resumes at the first frame after resume; audio follows it, so the tracks stay in sync.
///
/// It also enforces the limits where they can be exact: the duration on the raw frames entering the branch
/// (no frame that would end past the limit is admitted), the file size on the encoded buffers entering the
/// muxer (no buffer that would take the finished file past the limit is admitted). Statistics are counted
/// there too, after the leaky input queue and the encoder, so they describe what is in the file.
final class RecordingTimeline: Sendable {
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
        /// The first frame's running time, on the session's clock (what a pre-roll is measured on).
        var firstFrameRunningTime: UInt64?
    }

    struct Limits: Sendable {
        var maxDuration: UInt64?
        var maxFileSize: Int64?
    }

    /// Everything the probes of both tracks read and write, each buffer's decision taken whole under one lock.
    fileprivate struct State {
        let limits: Limits
        /// Whether frames marked as filler (GST_BUFFER_FLAG_GAP: the session's black frames while the camera is
        /// interrupted) stay out of the file: a file that ends at an interruption and one that begins after it.
        let dropsFillerFrames: Bool
        /// Set when the file ends at an interruption: no frame enters any more, and no audio past the last frame.
        var ended = false
        /// Set by a stop: the running time it was asked at. Frames captured until then still enter (however long
        /// the encoder and the queues before the file take to bring them), the first one after it ends the file.
        var endAfter: UInt64?
        /// Where the last admitted frame ends, in the frames' own time.
        var lastVideoEnd: UInt64?
        /// The time of the last frame seen (admitted or not, filler or not).
        var lastVideoTime: UInt64?
        /// The audio has been let in up to the end of the file's video (see waitForAudioToReachVideoEnd).
        var audioReachedEnd = false
        var start: UInt64?
        var pausedTotal: UInt64 = 0
        var pausedAt: UInt64?
        var pauseRequested = false
        var resumeRequested = false
        var frameInterval: UInt64?
        /// Set when a limit is reached: no more frames enter the branch.
        var closed = false
        /// Set when the size limit is reached: nothing more enters the muxer either.
        var full = false
        var limitReported = false
        /// The finished file's size with the samples admitted to the muxer so far.
        var size: MovieSizeEstimate
        var lastMuxedVideo: UInt64?
        /// The first encoded frame's timestamp: encoders may offset theirs (x264enc by 1000 hours).
        var firstMuxedVideo: UInt64?
        var statistics = Statistics()
        /// A timelapse's choice of frames (its duration limit counts capture time, as any recording's does).
        var timelapse: TimelapseSelection?
    }

    private let state: Locked<State>
    private let onLimit: @Sendable (CaptureError) -> Void

    init(limits: Limits = Limits(), size: MovieSizeEstimate = MovieSizeEstimate(fragmentDuration: 1_000_000_000, withAudio: false),
         dropsFillerFrames: Bool = false, timelapse: Timelapse? = nil, onLimit: @escaping @Sendable (CaptureError) -> Void = { _ in }) {
        state = Locked(State(limits: limits, dropsFillerFrames: dropsFillerFrames, size: size, timelapse: timelapse.map(TimelapseSelection.init)))
        self.onLimit = onLimit
    }

    var stats: Statistics { state.withLock { $0.statistics } }
    var isPaused: Bool { state.withLock { $0.pauseRequested } }
    var isTimelapse: Bool { state.withLock { $0.timelapse != nil } }
    /// A resume is asked for and waits for its first frame (with encoded frames: a key frame).
    var isResuming: Bool { state.withLock { $0.resumeRequested } }

    func pause() { state.withLock { $0.pauseRequested = true; $0.resumeRequested = false } }
    func resume() { state.withLock { if $0.pauseRequested { $0.resumeRequested = true } } }

    /// Ends the file where it is, before its branch is drained: frames from now on (the session's filler
    /// for an interrupted camera) stay out, and so does audio past the last frame, so the tracks end together.
    func end() { state.withLock { $0.ended = true } }

    /// Ends the file at `time`, the running time stopRecording was called at: what the camera saw until the
    /// user stopped is in the movie. Ending it where the frames had got to left out the frames still in the
    /// camera's and the encoder's queues (a second of them in the VM's emulated CPU, where x264 lags).
    func end(after time: UInt64) { state.withLock { if !$0.ended { $0.endAfter = time } } }

    /// After `end(after:)`, before the audio wait and the drain: waits until a frame captured after the end time
    /// came (every frame before it is in), while frames keep coming; a camera silent for `idle` (or a wait past
    /// `timeout`) ends the file where it is. Blocks: call it off the streaming and session threads.
    func waitForVideoToReachEnd(idle: Duration, timeout: Duration) {
        var seen = state.withLock { $0.lastVideoTime }, seenAt = ContinuousClock.now
        Self.poll(for: timeout) {
            let (done, last) = state.withLock { ($0.ended || $0.closed || $0.endAfter == nil, $0.lastVideoTime) }
            if last != seen { (seen, seenAt) = (last, .now) }
            return done || ContinuousClock.now - seenAt >= idle
        }
        // Given up (a silent camera, or too late): the file ends where it is. After a frame past the stop time, or a
        // limit, this changes nothing: those ended the file already.
        end()
    }

    /// Checks `condition` every 5 ms until it holds, at most `timeout`.
    private static func poll(for timeout: Duration, until condition: () -> Bool) {
        let deadline = ContinuousClock.now + timeout
        while !condition(), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.005) }
    }

    /// Told outside the lock, so that the output may stop the recording from there.
    private func report(_ reason: CaptureError, if first: Bool) {
        if first { onLimit(reason) }
    }

    /// For the raw video input's probe: nil when the frame stays out of the file, else how much earlier its
    /// timestamps must move.
    func admitVideo(_ pts: ClockTime?, duration: ClockTime?, isFiller: Bool = false) -> ClockTime? {
        admit(pts, duration: duration, isFiller: isFiller, keyFrame: nil)?.shift
    }

    /// For the input of frames a shared encoder encoded: nil when the frame stays out of the file, else how its
    /// timestamps move. The file and every resume begin at a key frame: the frames before it could not be
    /// decoded. A frame of the same moment as the one before goes in a moment after it (`VideoAdmission.later`)
    /// rather than out: the frames after it need it to decode.
    func admitEncodedVideo(_ pts: ClockTime?, duration: ClockTime?, isKeyFrame: Bool) -> VideoAdmission? {
        admit(pts, duration: duration, isFiller: false, keyFrame: isKeyFrame)
    }

    struct VideoAdmission: Equatable {
        /// How much earlier the frame's timestamps move.
        var shift: ClockTime
        /// How much later they move first: an encoded frame of the same moment as the one before.
        var later: ClockTime = 0
    }

    private func admit(_ pts: ClockTime?, duration: ClockTime?, isFiller: Bool, keyFrame: Bool?) -> VideoAdmission? {
        guard let pts else { return nil }
        var reached = false
        defer { report(.maximumDurationReached, if: reached) }
        return state.withLock {
            $0.admitVideo(at: UInt64(pts), duration: duration, isFiller: isFiller, keyFrame: keyFrame, reachedLimit: &reached)
        }
    }

    /// For a timelapse's video input probe: nil when the frame stays out of the file (paused, filler kept
    /// out, not the first of its slot, past the limit), else the timestamps it takes in the movie. Pauses,
    /// the file's start and the duration limit are any recording's: they count capture time.
    func admitTimelapseFrame(_ pts: ClockTime?, duration: ClockTime?, isFiller: Bool) -> (pts: ClockTime, duration: ClockTime)? {
        guard let pts else { return nil }
        var reached = false
        defer { report(.maximumDurationReached, if: reached) }
        return state.withLock {
            $0.admitTimelapseFrame(at: UInt64(pts), duration: duration, isFiller: isFiller, reachedLimit: &reached)
        }.map { (ClockTime($0.pts), ClockTime($0.duration)) }
    }

    /// For the audio input's probe: audio enters only while video is being recorded; nil keeps the buffer
    /// out, else how much earlier its timestamps move and how much of its start to cut first.
    ///
    /// The tracks end together: a buffer that starts before the video's end (or the duration limit) enters
    /// whole, so the audio ends within a buffer of the video rather than up to one (plus the encoder's last
    /// partial frame) before it. And they start together, at the first frame: the file's first audio buffer
    /// has its part before that frame cut (`trim`), or silence put before it up to that frame (`silence`).
    /// The audio arrives some ~20-40 ms after the video of the same moment, and the first buffer after the
    /// first frame used to start the audio track: the fragmented MP4 muxer drops such a gap before a track,
    /// so the audio played that much early and ended that much (with the drain, ~0.1 s) before the video.
    /// `encoded` audio (a pre-roll ring's AAC) cannot be cut nor padded: a frame that starts before the first
    /// frame stays out, and the track starts with the next (at most a frame, 21 ms, after the video).
    func admitAudio(_ pts: ClockTime?, duration: ClockTime?, encoded: Bool = false) -> AudioAdmission? {
        guard let pts else { return nil }
        return state.withLock { $0.admitAudio(at: UInt64(pts), duration: UInt64(duration ?? 0), encoded: encoded) }
    }

    /// The running time the file's first frame will have, known before it arrives (a pre-roll feed's key frame).
    func expectFirstFrame(at time: UInt64) {
        state.withLock { state in
            if state.statistics.firstFrameRunningTime == nil { state.statistics.firstFrameRunningTime = time }
        }
    }

    struct AudioAdmission {
        /// How much earlier the buffer's timestamps move.
        var shift: ClockTime
        /// How much of its start to cut first, or of silence to put before it.
        var trim: ClockTime = 0
        var silence: ClockTime = 0
    }

    static let longestAudioLag: UInt64 = 3_000_000_000

    /// After `end()` (or a limit), before the branch is drained: waits until the audio has entered up to the
    /// video's end, at most `timeout`. Audio lags the video by the microphone's latency (a buffer or more),
    /// and a drain at once ended the AAC track ~0.1 s before the video. Returns at once when no audio can
    /// come (paused, nothing recorded yet). Blocks: call it off the streaming and session threads.
    func waitForAudioToReachVideoEnd(timeout: Duration) {
        Self.poll(for: timeout) { state.withLock { $0.audioReachedEnd || $0.pauseRequested || $0.start == nil } }
    }

    /// For the muxer's video input (encoded frames, file timestamps): whether the frame enters the file.
    func muxVideo(_ pts: ClockTime?, duration: ClockTime?, bytes: Int, isKeyFrame: Bool) -> Bool {
        var reached = false
        defer { report(.maximumFileSizeReached, if: reached) }
        return state.withLock {
            $0.muxVideo(pts.map(UInt64.init), duration: duration.map(UInt64.init), bytes: bytes, isKeyFrame: isKeyFrame,
                        reachedLimit: &reached)
        }
    }

    /// For the muxer's audio input: whether the buffer enters the file.
    func muxAudio(duration: ClockTime?, bytes: Int) -> Bool {
        var reached = false
        defer { report(.maximumFileSizeReached, if: reached) }
        return state.withLock { $0.muxAudio(duration: duration.map(UInt64.init), bytes: bytes, reachedLimit: &reached) }
    }
}

extension RecordingTimeline.State {
    /// See RecordingTimeline.admitVideo and admitEncodedVideo. `keyFrame`: whether an encoded frame is a key
    /// frame, nil for a raw frame.
    mutating func admitVideo(at captured: UInt64, duration: ClockTime?, isFiller: Bool, keyFrame: Bool?,
                             reachedLimit reached: inout Bool) -> RecordingTimeline.VideoAdmission? {
        if isFiller, dropsFillerFrames {
            // The camera is gone: the file ends with its last frame, the audio too (the session may
            // say why only later). Filler before the first frame is only skipped.
            if start != nil { ended = true }
            return nil
        }
        if let duration, duration > 0 { frameInterval = UInt64(duration) }
        guard !closed, !ended else { return nil }
        if let endAfter, captured > endAfter {
            ended = true
            return nil
        }
        // A frame not a moment after the one before (SourceCut keeps a camera switch from making one): two samples
        // of one moment make a movie mp4mux cannot copy, and an earlier one would come before the file's start.
        var time = captured
        if let last = lastVideoTime, !SourceCut.isNewMoment(ClockTime(time), after: ClockTime(last), frameDuration: duration) {
            // A raw frame stays out, before the encoder: no other frame needs it. An encoded one is needed by the
            // frames after it, a key frame by all of them up to the next (in the VM, one dropped here left twelve
            // frames ffmpeg could not decode), so it goes in a moment after the one before instead.
            guard keyFrame != nil else { return nil }
            time = last + UInt64(SourceCut.oneMoment(frameDuration: duration)) + 1
        }
        lastVideoTime = time
        let isKeyFrame = keyFrame ?? true
        if pauseRequested, !resumeRequested {
            if pausedAt == nil { pausedAt = time }
            return nil
        }
        if !isKeyFrame, start == nil || resumeRequested {
            if start != nil, pausedAt == nil { pausedAt = time }
            return nil
        }
        if resumeRequested {
            // The pause lasted from its first dropped frame to this one; one that began before the
            // file's first frame (a file begun paused), or that no frame fell into, took nothing out of
            // the file's time.
            if let pausedAt, start != nil { pausedTotal += time - pausedAt }
            pausedAt = nil
            pauseRequested = false
            resumeRequested = false
        }
        if start == nil {
            start = time
            statistics.firstFrameRunningTime = time
        }
        let fileTime = time - (start ?? time) - pausedTotal
        // The frame would end past the limit (by more than timestamp jitter): the movie ends before it.
        let interval = frameInterval ?? 0
        if let maxDuration = limits.maxDuration, fileTime + interval > maxDuration + interval / 2 {
            reached = reachLimit()
            return nil
        }
        lastVideoEnd = time + interval
        return .init(shift: ClockTime((start ?? time) + pausedTotal), later: ClockTime(time - captured))
    }

    /// See RecordingTimeline.admitTimelapseFrame.
    mutating func admitTimelapseFrame(at time: UInt64, duration: ClockTime?, isFiller: Bool,
                                      reachedLimit reached: inout Bool) -> (pts: UInt64, duration: UInt64)? {
        guard timelapse != nil,
              let shift = admitVideo(at: time, duration: duration, isFiller: isFiller, keyFrame: nil, reachedLimit: &reached)?.shift,
              let placement = timelapse?.placement(at: time - UInt64(shift)) else { return nil }
        timelapse?.keep(at: time - UInt64(shift))
        return placement
    }

    /// See RecordingTimeline.admitAudio.
    mutating func admitAudio(at pts: UInt64, duration: UInt64, encoded: Bool) -> RecordingTimeline.AudioAdmission? {
        guard let start, !pauseRequested else { return nil }
        var trim: UInt64 = 0
        if pts < start + pausedTotal {
            guard !encoded, statistics.firstAudioTime == nil, pts + duration > start + pausedTotal else { return nil }
            trim = start + pausedTotal - pts
        }
        let fileTime = pts + trim - start - pausedTotal
        if ended || closed, pts >= lastVideoEnd ?? 0 {
            audioReachedEnd = true
            return nil
        }
        if full { return nil }
        // A stop waits for the video up to its time: audio from then on (and a frame's length more, where the last
        // frame may end) stays out already.
        if !ended, let endAfter, pts >= endAfter + (frameInterval ?? 0) {
            audioReachedEnd = true
            return nil
        }
        if let maxDuration = limits.maxDuration, fileTime >= maxDuration {
            audioReachedEnd = true
            return nil
        }
        if ended || closed, pts + duration >= lastVideoEnd ?? 0 { audioReachedEnd = true }
        // Silence up to the first frame, never more than the longest a fresh audio server keeps its first
        // buffer (a later start is no lag to hide).
        let silence = !encoded && statistics.firstAudioTime == nil && fileTime < RecordingTimeline.longestAudioLag ? fileTime : 0
        if statistics.firstAudioTime == nil { statistics.firstAudioTime = fileTime - silence }
        return .init(shift: ClockTime(start + pausedTotal), trim: ClockTime(trim), silence: ClockTime(silence))
    }

    /// See RecordingTimeline.muxVideo.
    mutating func muxVideo(_ pts: UInt64?, duration: UInt64?, bytes: Int, isKeyFrame: Bool, reachedLimit reached: inout Bool) -> Bool {
        let sample = MovieSizeEstimate.Sample(bytes: bytes, duration: duration, isKeyFrame: isKeyFrame)
        guard fits(sample, toVideo: true) else {
            full = true
            reached = reachLimit()
            return false
        }
        statistics.frames += 1
        guard let time = pts else { return true }
        let interval = duration ?? frameInterval ?? 0
        if let last = lastMuxedVideo { statistics.droppedFrames += MissingFrames.between(last, and: time, interval: interval) }
        lastMuxedVideo = time
        if firstMuxedVideo == nil {
            firstMuxedVideo = time
            statistics.firstVideoTime = 0
        }
        statistics.duration = max(statistics.duration, time - min(time, firstMuxedVideo ?? time) + interval)
        return true
    }

    /// See RecordingTimeline.muxAudio.
    mutating func muxAudio(duration: UInt64?, bytes: Int, reachedLimit reached: inout Bool) -> Bool {
        guard fits(MovieSizeEstimate.Sample(bytes: bytes, duration: duration), toVideo: false) else {
            full = true
            reached = reachLimit()
            return false
        }
        statistics.audioBuffers += 1
        return true
    }

    /// Closes the timeline; true the first time a limit is reached, so the output hears it once (outside
    /// the lock).
    private mutating func reachLimit() -> Bool {
        closed = true
        defer { limitReported = true }
        return !limitReported
    }

    /// Whether the sample keeps the finished file within the size limit, and if so counts it.
    private mutating func fits(_ sample: MovieSizeEstimate.Sample, toVideo: Bool) -> Bool {
        let next = size.adding(sample, toVideo: toVideo)
        if let maxSize = limits.maxFileSize, full || next.bytes > maxSize { return false }
        size = next
        return true
    }
}
