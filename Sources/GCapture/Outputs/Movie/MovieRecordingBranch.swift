import Foundation
import GStreamerKit

/// One file's branch of the session graph: the bin that encodes the file and muxes it (with its crash
/// sidecar), and the probes through which the file's timeline admits, shifts and counts its buffers.
struct MovieRecordingBranch {
    let bin: Bin
    let timeline: RecordingTimeline
    /// The encoder the file's video comes from when it is shared (else it is in `bin`).
    let sharedEncoder: SharedVideoEncoder?
    /// The encoding as built: the camera's format, the encoder that opened, a shared encode's rate.
    let encoding: MovieEncoding
    /// The bin's input for each medium, for the graph to link to its tees.
    let inputs: [MediaType: String]

    /// On the session queue: builds the branch that records `url` for `output`, not yet attached.
    /// `sidecarLocked` hears the sidecar's lock as soon as it is held, so that a failure after that can
    /// remove the sidecar it created; `onLimit` hears the timeline reach a limit.
    init(recording url: URL, for output: CaptureMovieFileOutput, in graph: any OutputGraph, encoding requested: MovieEncoding,
         settings: MovieOutputSettings, dropsFillerFrames: Bool, paused: Bool, preRoll: PreRollRing?,
         sidecarLocked: (SidecarLock) -> Void, onLimit: @escaping @Sendable (CaptureError) -> Void) throws(CaptureError) {
        var encoding: MovieEncoding
        let bitRateIsDefault: Bool
        if let preRoll {
            // The ring's encode is the file's video; the file's own settings are its container's.
            encoding = preRoll.encoding
            (encoding.container, encoding.fragmentInterval) = (requested.container, requested.fragmentInterval)
            encoding.withAudio = preRoll.keepsAudio
            encoding.fedByPreRoll = true
            bitRateIsDefault = false
        } else {
            (encoding, bitRateIsDefault) = requested.completed(for: output, in: graph)
            encoding.sharesEncoder = encoding.canShareEncoder(dropsFillerFrames: dropsFillerFrames)
        }
        let mayFallBackToSoftware = settings.videoEncoder == nil
        try MovieFiles.checkCreatable(url)
        let bin = try Self.makeBin(&encoding, for: output, in: graph, mayFallBackToSoftware: mayFallBackToSoftware)
        var inputs: [MediaType: String] = [:]
        var pads: [Pad] = []
        do {
            try bin.element(named: "file")?.set("location", url.path)
            if let sidecar = bin.element(named: "sidecar_file") {
                let sidecarURL = MovieRecovery.sidecarURL(for: url)
                let lock: SidecarLock
                do throws(SidecarLock.Failure) { lock = try SidecarLock(on: sidecarURL) } catch {
                    switch error {
                    case .held: throw CaptureError.recordingFailed(reason: "\(url.path) is being recorded already", underlying: nil)
                    case .cannotCreate(let code): throw MovieFiles.cannotWrite(url, code)
                    }
                }
                sidecarLocked(lock)
                try sidecar.set("location", sidecarURL.path)
            }
            if let file = bin.element(named: "file")?.staticPad("sink") {
                MP4DisplayMatrix.apply(rotation: encoding.displayRotation, toMoviesPassing: file)
            }
            if preRoll != nil {
                pads = [MovieEncoding.videoSource, MovieEncoding.audioSource].compactMap { bin.element(named: $0)?.staticPad("src") }
            } else {
                let exposed = try EncodingInputs(exposedOn: bin)
                exposed.decoupleFromUpstream()
                (pads, inputs) = (exposed.pads, exposed.names)
            }
        } catch let error as CaptureError {
            throw error
        } catch {
            throw .configurationFailed(reason: "cannot set up the recording", underlying: error as? GStreamerError)
        }
        let timeline = RecordingTimeline(
            limits: .init(maxDuration: settings.maxDuration.map { UInt64(($0 * 1e9).rounded()) }, maxFileSize: settings.maxFileSize),
            size: MovieSizeEstimate(fragmentDuration: encoding.muxFragmentDuration, withAudio: encoding.withAudio),
            dropsFillerFrames: dropsFillerFrames, timelapse: encoding.timelapse,
            onLimit: onLimit)
        if paused { timeline.pause() }
        // Frames from a shared encoder arrive as H.264 in the encoder's time: the file starts (and resumes)
        // at a key frame, and their running time is what the audio's is compared with.
        var encoder = preRoll?.encoder
        if encoder == nil, encoding.sharesEncoder {
            encoder = try graph.sharedVideoEncoder(for: VideoEncodeRequest(encode: encoding.videoEncode, acceptsAnyBitRate: bitRateIsDefault,
                                                                           longestKeyInterval: encoding.longestSharedKeyInterval,
                                                                           mayFallBackToSoftware: mayFallBackToSoftware))
        }
        if let encoder {
            // A running encode joined (a stream's) may have another rate and key interval than this file's own.
            encoding.videoEncoder = encoder.activeEncoder
            encoding.videoBitRate = encoder.encode.bitRate
        }
        Self.addProbes(to: bin, inputs: pads, timeline: timeline, sharedEncoder: encoder, fedByPreRoll: preRoll != nil)
        (self.bin, self.timeline, self.sharedEncoder, self.encoding, self.inputs) = (bin, timeline, encoder, encoding, inputs)
        feed = try preRoll.map { ring throws(CaptureError) in
            guard let video = bin.element(named: MovieEncoding.videoSource).flatMap(AppSource.init) else {
                throw .configurationFailed(reason: "the recording's branch has no input for its pre-roll", underlying: nil)
            }
            let audio = bin.element(named: MovieEncoding.audioSource).flatMap(AppSource.init)
            if let caps = ring.videoCaps { video.setCaps(caps) }
            if let audio, let caps = ring.audioCaps { audio.setCaps(caps) }
            return (ring, PreRollFeed(video: video, audio: audio, requestKeyFrame: { [encoder] in encoder?.requestKeyFrame() }))
        }
    }

    /// The ring the file's media come from and the branch's end of it, when it records with a pre-roll.
    let feed: (ring: PreRollRing, feed: PreRollFeed)?

    /// Once the branch is attached: a file with a pre-roll takes what its ring kept from the pre-roll before
    /// `requestTime` (running time; nil: from the next key frame), then the live media.
    func startFeed(requestedAt requestTime: UInt64?) {
        guard let feed else { return }
        // Where the file begins is known here, before its first frame reaches the timeline on the appsrc's
        // thread: the statistics (the pre-roll a started clip's record states) have it at once.
        if let begin = feed.ring.attach(feed.feed, requestedAt: requestTime) { timeline.expectFirstFrame(at: begin) }
    }

    /// Before the branch is drained (or cut off): its inputs end after what they hold.
    func endFeed() {
        guard let feed else { return }
        feed.ring.detach(feed.feed)
        feed.feed.end()
    }

    /// The recording's bin, with its encoder configured when it has its own.
    private static func makeBin(_ encoding: inout MovieEncoding, for output: CaptureMovieFileOutput, in graph: any OutputGraph,
                                mayFallBackToSoftware: Bool) throws(CaptureError) -> Bin {
        let asked = encoding
        let (bin, encoder) = try asked.videoEncoder.withSoftwareFallback(mayFallBackToSoftware) { encoder in
            var attempt = asked
            attempt.videoEncoder = encoder
            let bin = try graph.makeBin(try attempt.description(), for: output, ghostUnlinkedPads: false)
            try attempt.videoEncode.configureEncoder(in: bin)
            return bin
        }
        encoding.videoEncoder = encoder
        return bin
    }

    /// The timeline's probes: on the bin's inputs (video first, then audio), and on the muxer's side.
    /// Encoded frames from a shared encoder pass a KeyFrameGate, unless `fedByPreRoll` (the feed gates them
    /// itself); a pre-roll's audio comes encoded (AAC): admitted whole or not at all.
    private static func addProbes(to bin: Bin, inputs pads: [Pad], timeline: RecordingTimeline, sharedEncoder encoder: SharedVideoEncoder?,
                                  fedByPreRoll: Bool) {
        if let encoder {
            let gate = !fedByPreRoll ? KeyFrameGate(encoder: encoder, queue: bin.element(named: "video_in")) : nil
            pads.first?.addProbe(.buffer) { info in
                guard gate?.admits(isDeltaFrame: info.isDeltaFrame) ?? true else { return .drop }
                guard let admitted = timeline.admitEncodedVideo(info.bufferRunningTime, duration: info.bufferDuration,
                                                                isKeyFrame: !info.isDeltaFrame) else {
                    if timeline.isResuming { encoder.requestKeyFrame() }
                    return .drop
                }
                info.shiftBufferTimestamps(earlierBy: admitted.shift, later: admitted.later)
                return .ok
            }
        } else if timeline.isTimelapse {
            // Frames a timelapse does not keep are dropped here, before the input queue and the encoder.
            pads.first?.addProbe(.buffer) { info in
                guard let placed = timeline.admitTimelapseFrame(info.bufferPTS, duration: info.bufferDuration, isFiller: info.isGapBuffer) else {
                    return .drop
                }
                // Copied here if a camera's bounded pool lent it (what DeviceFrameCopy's probe would do after this
                // one): retiming makes the buffer writable, and the shallow copy that takes no longer says
                // whose pool the memory is, so the later probe would let the driver's memory into the encoder.
                if info.replaceBufferWithCopyIfLentByBoundedPool() { DeviceFrameCopy.copiedFrames.add(1, ordering: .relaxed) }
                info.setBufferTimestamps(pts: placed.pts, duration: placed.duration)
                return .ok
            }
        } else {
            pads.first?.addProbe(.buffer) { info in
                guard let shift = timeline.admitVideo(info.bufferPTS, duration: info.bufferDuration, isFiller: info.isGapBuffer) else {
                    return .drop
                }
                info.shiftBufferTimestamps(earlierBy: shift)
                return .ok
            }
        }
        if pads.count > 1 {
            pads[1].addProbe(.buffer) { info in
                guard let admitted = timeline.admitAudio(info.bufferPTS, duration: info.bufferDuration, encoded: fedByPreRoll) else { return .drop }
                info.trimBufferStart(by: admitted.trim, frameBytes: SourceBuilder.audioFrameBytes)
                info.extendBufferStartWithSilence(by: admitted.silence, frameBytes: SourceBuilder.audioFrameBytes)
                info.shiftBufferTimestamps(earlierBy: admitted.shift)
                return .ok
            }
        }
        // Past the leaky input queue and the encoders: what is counted and sized here is what the files get.
        bin.element(named: MovieEncoding.encodedVideo)?.staticPad("sink")?.addProbe(.buffer) { info in
            timeline.muxVideo(info.bufferPTS, duration: info.bufferDuration, bytes: info.bufferSize ?? 0,
                              isKeyFrame: !info.isDeltaFrame) ? .ok : .drop
        }
        bin.element(named: MovieEncoding.encodedAudio)?.staticPad("sink")?.addProbe(.buffer) { info in
            timeline.muxAudio(duration: info.bufferDuration, bytes: info.bufferSize ?? 0) ? .ok : .drop
        }
    }
}
