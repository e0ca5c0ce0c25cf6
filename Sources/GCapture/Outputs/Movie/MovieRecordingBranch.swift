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
         settings: MovieOutputSettings, dropsFillerFrames: Bool, paused: Bool,
         sidecarLocked: (SidecarLock) -> Void, onLimit: @escaping @Sendable (CaptureError) -> Void) throws(CaptureError) {
        var encoding = requested
        let selection = graph.videoSelection
        encoding.withAudio = graph.hasSource(.audio)
        encoding.frameRate = Int((selection?.frameRate.doubleValue ?? 30).rounded())
        encoding.rotation = Int(output.connection.videoRotationAngle)
        encoding.mirrored = output.connection.mirrorsCapturedFrames
        encoding.cameraPixelFormat = selection?.format.pixelFormat
        encoding.frameSize = selection.map { ($0.format.width, $0.format.height) }
        let bitRateIsDefault = encoding.videoBitRate == 0
        if bitRateIsDefault {
            encoding.videoBitRate = MovieEncoding.defaultBitRate(width: selection?.format.width ?? 1280, height: selection?.format.height ?? 720)
        }
        let mayFallBackToSoftware = settings.videoEncoder == nil
        encoding.sharesEncoder = encoding.canShareEncoder(dropsFillerFrames: dropsFillerFrames)
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
            let exposed = try EncodingInputs(exposedOn: bin)
            exposed.decoupleFromUpstream()
            (pads, inputs) = (exposed.pads, exposed.names)
        } catch let error as CaptureError {
            throw error
        } catch {
            throw .configurationFailed(reason: "cannot set up the recording", underlying: error as? GStreamerError)
        }
        let timeline = RecordingTimeline(
            limits: .init(maxDuration: settings.maxDuration.map { UInt64(($0 * 1e9).rounded()) }, maxFileSize: settings.maxFileSize),
            size: MovieSizeEstimate(fragmentDuration: UInt64(encoding.fragmentInterval * 1e9), withAudio: encoding.withAudio),
            dropsFillerFrames: dropsFillerFrames,
            onLimit: onLimit)
        if paused { timeline.pause() }
        // Frames from a shared encoder arrive as H.264 in the encoder's time: the file starts (and resumes)
        // at a key frame, and their running time is what the audio's is compared with.
        let encoder = encoding.sharesEncoder
            ? try graph.sharedVideoEncoder(for: VideoEncodeRequest(encode: encoding.videoEncode, acceptsAnyBitRate: bitRateIsDefault,
                                                                   longestKeyInterval: encoding.longestSharedKeyInterval,
                                                                   mayFallBackToSoftware: mayFallBackToSoftware))
            : nil
        if let encoder {
            // A running encode joined (a stream's) may have another rate and key interval than this file's own.
            encoding.videoEncoder = encoder.activeEncoder
            encoding.videoBitRate = encoder.encode.bitRate
        }
        Self.addProbes(to: bin, inputs: pads, timeline: timeline, sharedEncoder: encoder)
        (self.bin, self.timeline, self.sharedEncoder, self.encoding, self.inputs) = (bin, timeline, encoder, encoding, inputs)
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
    private static func addProbes(to bin: Bin, inputs pads: [Pad], timeline: RecordingTimeline, sharedEncoder encoder: SharedVideoEncoder?) {
        if let encoder {
            let gate = KeyFrameGate(encoder: encoder, queue: bin.element(named: "video_in"))
            pads.first?.addProbe(.buffer) { info in
                guard gate.admits(isDeltaFrame: info.isDeltaFrame) else { return .drop }
                guard let shift = timeline.admitVideo(info.bufferRunningTime, duration: info.bufferDuration,
                                                      isKeyFrame: !info.isDeltaFrame) else {
                    if timeline.isResuming { encoder.requestKeyFrame() }
                    return .drop
                }
                info.shiftBufferTimestamps(earlierBy: shift)
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
                guard let admitted = timeline.admitAudio(info.bufferPTS, duration: info.bufferDuration) else { return .drop }
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
