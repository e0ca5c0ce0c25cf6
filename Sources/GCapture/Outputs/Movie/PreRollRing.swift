import GCaptureSupport
import GStreamerKit

/// The last seconds of a running session, kept for a recording that starts later and is to begin before its
/// start (CaptureMovieFileOutput.preRollDuration): the shared encoder's H.264, taken where it enters its tee,
/// and the session's audio as AAC, from an encoder of the ring's own (a tap on the audio tee). Buffers are
/// references, not copies: the ring costs the memory of what it keeps (encoded: about the bit rates × the
/// seconds), and nothing while no recording reads it.
///
///     video tee ─▶ H.264 encoder ─▶ ▣ encoded tee        ▣: the ring's probes
///     audio tee ─▶ queue ▶ AAC encoder ▶ aacparse ▶ ▣ fakesink
///
/// A recording attaches a feed (PreRollFeed: its branch's appsrcs): the ring hands it what it holds from the
/// newest key frame at least the pre-roll back, then every buffer as it arrives, all under one lock, so the
/// file gets each buffer once, in order, with no gap between the kept and the live ones.
final class PreRollRing: @unchecked Sendable {
    // @unchecked Sendable: `state` is Locked; the rest are lets of Sendable types, and the probe IDs are
    // written once on the session's queue before `remove(from:)` (also on that queue) reads them.
    private struct Entry {
        let buffer: RetainedBuffer
        /// Running time of the buffer's start, and of its end (audio).
        let runningTime: UInt64
        let end: UInt64
        /// Running time minus the buffer's own timestamp: what moves it into the appsrc's timeline.
        let offset: Int64
        let isKeyFrame: Bool
    }

    private struct State {
        var video: [Entry] = []
        var audio: [Entry] = []
        var bytes = 0
        var feed: PreRollFeed?
        var removed = false
        /// A recording asked for at this running time is on its way to `attach`: what it will begin with is
        /// kept meanwhile, whatever arrives (frames keep coming between the call and the attach, and
        /// trimming by them alone dropped the key frame the recording was to begin at). Until `pinExpiry`.
        var pinnedRequest: UInt64?
        var pinExpiry: ContinuousClock.Instant?
    }

    /// How long a pin holds at most: a recording that never attaches must not keep the ring from trimming.
    static let pinLifetime: Duration = .seconds(5)

    /// Nanoseconds kept before a recording's start.
    let duration: UInt64
    /// The encode the ring keeps, and the recordings it feeds are made of.
    let encoder: SharedVideoEncoder
    let encoding: MovieEncoding
    private let videoPad: Pad
    /// The ring's AAC encoder on the audio tee, and the pad its parsed AAC leaves by.
    private let audioTap: TeeBranch?
    private let audioPad: Pad?
    private var probes: [(Pad, UInt)] = []
    private let state = Locked(State())

    /// On the session's queue: starts keeping what passes `videoPad` (the encoded tee's input) and
    /// `audio.pad` (its AAC encoder's output, when the session has a microphone).
    init(duration: UInt64, encoder: SharedVideoEncoder, encoding: MovieEncoding, videoPad: Pad, audio: (tap: TeeBranch, pad: Pad)?) {
        self.duration = duration
        self.encoder = encoder
        self.encoding = encoding
        self.videoPad = videoPad
        (audioTap, audioPad) = (audio?.tap, audio?.pad)
        probes.append((videoPad, videoPad.addProbe(.buffer) { [weak self] info in
            self?.keepVideo(info)
            return .ok
        }))
        if let audioPad {
            probes.append((audioPad, audioPad.addProbe(.buffer) { [weak self] info in
                self?.keepAudio(info)
                return .ok
            }))
        }
    }

    var keepsAudio: Bool { audioPad != nil }
    /// The caps of what the ring keeps, for the appsrcs it feeds.
    var videoCaps: Caps? { videoPad.currentCaps }
    var audioCaps: Caps? { audioPad?.currentCaps }

    /// On the session's queue: stops keeping and lets go of everything kept; a feed attached ends. With the
    /// graph still running, the encoders the ring kept running are let go of (else they went with it).
    func remove(from graph: (any OutputGraph)?) {
        for (pad, id) in probes { pad.removeProbe(id) }
        if let graph {
            graph.releaseSharedEncoder(encoder)
            if let audioTap { graph.detachTap(audioTap) }
        }
        let feed = state.withLock { state -> PreRollFeed? in
            defer { state = State(removed: true) }
            return state.feed
        }
        feed?.end()
    }

    /// What the ring holds now.
    var holding: CaptureMovieFileOutput.PreRollHolding {
        state.withLock { state in
            let span = (state.video.last?.end ?? 0) - (state.video.first?.runningTime ?? 0)
            let audio = state.audio.reduce(0) { $0 + $1.buffer.byteCount }
            return .init(videoBytes: state.bytes - audio, audioBytes: audio, seconds: Double(span) / 1e9)
        }
    }

    // MARK: Keeping (streaming threads)

    private func keepVideo(_ info: Pad.ProbeInfo) {
        guard let entry = Self.entry(info, isKeyFrame: !info.isDeltaFrame) else { return }
        state.withLock { state in
            guard !state.removed else { return }
            state.video.append(entry)
            state.bytes += entry.buffer.byteCount
            state.feed?.pushVideo(entry.buffer, movedBy: entry.offset, isKeyFrame: entry.isKeyFrame)
            trim(&state, newest: entry.runningTime)
        }
    }

    private func keepAudio(_ info: Pad.ProbeInfo) {
        guard let entry = Self.entry(info, isKeyFrame: true) else { return }
        state.withLock { state in
            guard !state.removed else { return }
            state.audio.append(entry)
            state.bytes += entry.buffer.byteCount
            state.feed?.pushAudio(entry.buffer, movedBy: entry.offset)
            // Audio before the oldest frame kept is of no use; with no frame yet, the pre-roll's worth.
            let oldest = state.video.first?.runningTime ?? entry.end.subtractingClamped(duration)
            dropAudio(&state, endingBy: oldest)
        }
    }

    private static func entry(_ info: Pad.ProbeInfo, isKeyFrame: Bool) -> Entry? {
        guard let pts = info.bufferPTS, let running = info.bufferRunningTime, let buffer = info.retainBuffer() else { return nil }
        return Entry(buffer: buffer, runningTime: UInt64(running), end: UInt64(running) + UInt64(info.bufferDuration ?? 0),
                     offset: Int64(clamping: running) - Int64(clamping: pts), isKeyFrame: isKeyFrame)
    }

    /// Keeps the newest key frame at least `duration` before `newest` (or before a pinned request), and
    /// everything after it.
    private func trim(_ state: inout State, newest: UInt64) {
        var cutoff = newest.subtractingClamped(duration)
        if let pinned = state.pinnedRequest, let expiry = state.pinExpiry {
            if ContinuousClock.now < expiry {
                cutoff = min(cutoff, pinned.subtractingClamped(duration))
            } else {
                (state.pinnedRequest, state.pinExpiry) = (nil, nil)
            }
        }
        var keep = 0
        for (index, entry) in state.video.enumerated() {
            guard entry.runningTime <= cutoff else { break }
            if entry.isKeyFrame { keep = index }
        }
        guard keep > 0 else { return }
        state.bytes -= state.video[..<keep].reduce(0) { $0 + $1.buffer.byteCount }
        state.video.removeFirst(keep)
        dropAudio(&state, endingBy: state.video[0].runningTime)
    }

    private func dropAudio(_ state: inout State, endingBy time: UInt64) {
        let stale = state.audio.prefix { $0.end <= time }.count
        guard stale > 0 else { return }
        state.bytes -= state.audio[..<stale].reduce(0) { $0 + $1.buffer.byteCount }
        state.audio.removeFirst(stale)
    }

    // MARK: Feeding a recording

    /// Where a recording asked at `requestTime` (running time) begins: the newest key frame at least the
    /// pre-roll before it, or the oldest kept when the ring holds less.
    private static func startIndex(in video: [Entry], before cutoff: UInt64) -> Int? {
        var start: Int?
        for (index, entry) in video.enumerated() where entry.isKeyFrame {
            if entry.runningTime <= cutoff || start == nil { start = index }
            if entry.runningTime > cutoff { break }
        }
        return start
    }

    /// At the startRecording call (any thread): keeps what a recording asked for at `requestTime` will
    /// begin with until it attaches (at most `pinLifetime`).
    func pin(requestedAt requestTime: UInt64) {
        state.withLock { state in
            state.pinnedRequest = min(state.pinnedRequest ?? requestTime, requestTime)
            state.pinExpiry = ContinuousClock.now + Self.pinLifetime
        }
    }

    /// Gives `feed` what the ring holds from the newest key frame at least `duration` before `requestTime`
    /// (nil: nothing kept, from the next key frame on), then every buffer as it arrives until `detach`.
    /// Returns the running time the feed begins at, nil when it waits for the next key frame.
    @discardableResult
    func attach(_ feed: PreRollFeed, requestedAt requestTime: UInt64?) -> UInt64? {
        state.withLock { state -> UInt64? in
            guard !state.removed else {
                feed.end()
                return nil
            }
            state.feed?.end()
            state.feed = feed
            (state.pinnedRequest, state.pinExpiry) = (nil, nil)
            guard let requestTime, let start = Self.startIndex(in: state.video, before: requestTime.subtractingClamped(duration)) else {
                return nil
            }
            let begin = state.video[start].runningTime
            for entry in state.video[start...] { feed.pushVideo(entry.buffer, movedBy: entry.offset, isKeyFrame: entry.isKeyFrame) }
            for entry in state.audio where entry.end > begin { feed.pushAudio(entry.buffer, movedBy: entry.offset) }
            return begin
        }
    }

    /// Stops handing buffers to `feed` (if it is the one attached).
    func detach(_ feed: PreRollFeed) {
        state.withLock { state in
            if state.feed === feed { state.feed = nil }
        }
    }
}

/// A recording's inputs when it takes its media from a PreRollRing: the appsrcs at the head of its branch.
/// Frames are pushed from a key frame on; a recording that cannot keep up (more than `backlogLimit` bytes of
/// video waiting in its appsrc) loses whole groups of pictures, never frames their successors refer to.
final class PreRollFeed: @unchecked Sendable {
    // @unchecked Sendable: `waitingForKeyFrame` and `ended` are read and written only under the ring's lock
    // (every push comes through it) or once the ring no longer holds the feed (`end`).
    private let video: AppSource
    private let audio: AppSource?
    private let requestKeyFrame: @Sendable () -> Void
    private var waitingForKeyFrame = true
    private let ended = AtomicFlag()
    static let backlogLimit = 64 << 20

    init(video: AppSource, audio: AppSource?, requestKeyFrame: @escaping @Sendable () -> Void) {
        self.video = video
        self.audio = audio
        self.requestKeyFrame = requestKeyFrame
    }

    fileprivate func pushVideo(_ buffer: RetainedBuffer, movedBy offset: Int64, isKeyFrame: Bool) {
        if !waitingForKeyFrame, video.queuedBytes > Self.backlogLimit { waitingForKeyFrame = true }
        if waitingForKeyFrame {
            guard isKeyFrame else { return requestKeyFrame() }
            waitingForKeyFrame = false
        }
        video.push(buffer, movedBy: offset)
    }

    fileprivate func pushAudio(_ buffer: RetainedBuffer, movedBy offset: Int64) {
        audio?.push(buffer, movedBy: offset)
    }

    /// Ends both inputs (end-of-stream after what they hold), once: the branch can then be drained.
    func end() {
        guard ended.setFirstTime() else { return }
        video.endOfStream()
        audio?.endOfStream()
    }
}

extension UInt64 {
    fileprivate func subtractingClamped(_ other: UInt64) -> UInt64 { self > other ? self - other : 0 }
}

extension PreRollRing {
    /// On the session's queue: a ring over the encode `output`'s recordings would make (a running one that
    /// gives a key frame at least every second, or a new one), which it keeps running until `remove`.
    static func start(duration: UInt64, for output: CaptureMovieFileOutput, in graph: any OutputGraph,
                      settings: MovieOutputSettings) throws(CaptureError) -> PreRollRing {
        var (encoding, bitRateIsDefault) = try settings.encoding().completed(for: output, in: graph)
        let encoder = try graph.sharedVideoEncoder(for: VideoEncodeRequest(
            encode: encoding.videoEncode, acceptsAnyBitRate: bitRateIsDefault, longestKeyInterval: encoding.keyInterval,
            mayFallBackToSoftware: settings.videoEncoder == nil))
        guard let videoPad = encoder.tee.staticPad("sink") else {
            throw .configurationFailed(reason: "the shared encoder has no tee to keep a pre-roll from", underlying: nil)
        }
        (encoding.videoEncoder, encoding.videoBitRate) = (encoder.activeEncoder, encoder.encode.bitRate)
        let audio = graph.hasSource(.audio) ? try audioEncoder(for: output, in: graph) : nil
        graph.holdSharedEncoder(encoder)
        return PreRollRing(duration: duration, encoder: encoder, encoding: encoding, videoPad: videoPad, audio: audio)
    }

    /// The session's audio as AAC (what an MP4 holds, and Matroska takes), about 16 KB a second instead of
    /// the 192 KB of the raw samples; a queue in front so the audio tee never waits for the encoder.
    private static func audioEncoder(for output: CaptureMovieFileOutput, in graph: any OutputGraph) throws(CaptureError) -> (tap: TeeBranch, pad: Pad) {
        let bin = try graph.makeBin("queue leaky=downstream max-size-buffers=0 max-size-bytes=0 max-size-time=1000000000 ! "
                                    + "\(MovieEncoding.aacEncode()) ! fakesink name=pre_roll_aac sync=false async=false",
                                    for: output, ghostUnlinkedPads: true)
        guard let pad = bin.element(named: "pre_roll_aac")?.staticPad("sink") else {
            throw .configurationFailed(reason: "the pre-roll's audio encoder has no output", underlying: nil)
        }
        return (try graph.attachTap(bin, to: .audio), pad)
    }
}
