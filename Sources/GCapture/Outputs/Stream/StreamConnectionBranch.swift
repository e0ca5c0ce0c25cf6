import GStreamerKit

/// One connection's branch of the session graph: the bin that encodes the stream (H.264 from a shared
/// encoder, which it begins at a key frame) and sends it, with the counters the stream output's monitor
/// reads. Built on the session queue, not yet attached; the output attaches it (`inputs`, `sharedEncoder`).
struct StreamConnectionBranch {
    let bin: Bin
    /// The encoding as built: the shared encoder's own encoder and bit rate where they differ from the ask.
    let encoding: StreamEncoding
    let counters: CaptureStreamOutput.ConnectionCounters
    /// The bin's input for each medium, for the graph to link to its tees.
    let inputs: [MediaType: String]
    /// The H.264 encode the branch takes its video from.
    let sharedEncoder: SharedVideoEncoder
    /// The element that sends (its statistics say what left).
    let sink: Element?

    init(encoding requested: StreamEncoding, for output: CaptureStreamOutput, in graph: any OutputGraph) throws(CaptureError) {
        var encoding = requested
        let bin = try graph.makeBin(try encoding.description(), for: output, ghostUnlinkedPads: false)
        let counters = CaptureStreamOutput.ConnectionCounters()
        var inputs: [MediaType: String] = [:]
        var pads: [Pad] = []
        do {
            let exposed = try EncodingInputs(exposedOn: bin)
            exposed.decoupleFromUpstream()
            (pads, inputs) = (exposed.pads, exposed.names)
        } catch {
            throw .configurationFailed(reason: "cannot set up the stream", underlying: error as? GStreamerError)
        }
        let encoder = try graph.sharedVideoEncoder(for: encoding.videoEncodeRequest)
        encoding.videoEncoder = encoder.activeEncoder
        encoding.videoBitRate = encoder.encode.bitRate
        // A connection begins at a key frame (asked for now), and one that falls behind skips to the next.
        let gate = KeyFrameGate(encoder: encoder, queue: bin.element(named: "video_in"))
        pads.first?.addProbe(.buffer) { info in
            counters.frameIn(time: info.bufferPTS.map(UInt64.init), duration: info.bufferDuration.map(UInt64.init))
            return gate.admits(isDeltaFrame: info.isDeltaFrame) ? .ok : .drop
        }
        for (name, video) in [(StreamEncoding.encodedVideo, true), (StreamEncoding.encodedAudio, false)] {
            bin.element(named: name)?.staticPad("src")?.addProbe(.buffer) { info in
                counters.encoded(video: video, bytes: info.bufferSize ?? 0)
                return .ok
            }
        }
        (self.bin, self.encoding, self.counters, self.inputs, self.sharedEncoder, self.sink)
            = (bin, encoding, counters, inputs, encoder, bin.element(named: "sink"))
    }
}

extension CaptureStreamOutput {
    /// Counted on streaming threads, read by the monitor.
    final class ConnectionCounters: Sendable {
        private struct Counts {
            var framesIn = 0, videoFrames = 0, audioBuffers = 0, encodedBytes = UInt64(0)
            var lastFrameTime: UInt64?
        }
        private let counts = Locked(Counts())
        /// A frame reached the branch; one that comes more than a frame and a half after the last stands
        /// for the frames between, which the shared encoder dropped (behind a busy CPU) before any output.
        func frameIn(time: UInt64?, duration: UInt64?) {
            counts.withLock { counts in
                counts.framesIn += 1
                if let time, let last = counts.lastFrameTime, let duration {
                    counts.framesIn += MissingFrames.between(last, and: time, interval: duration)
                }
                if let time { counts.lastFrameTime = time }
            }
        }
        func encoded(video: Bool, bytes: Int) {
            counts.withLock { counts in
                if video { counts.videoFrames += 1 } else { counts.audioBuffers += 1 }
                counts.encodedBytes += UInt64(bytes)
            }
        }
        var snapshot: (framesIn: Int, videoFrames: Int, audioBuffers: Int, encodedBytes: UInt64) {
            counts.withLock { ($0.framesIn, $0.videoFrames, $0.audioBuffers, $0.encodedBytes) }
        }
    }
}
