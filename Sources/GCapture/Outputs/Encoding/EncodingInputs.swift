import GStreamerKit

/// Where an encoding branch (a recording's, a stream's) takes the session's raw media: the sink pads of its
/// `video_in` and `audio_in` queues, exposed as the branch's own pads for the graph to link to its tees.
struct EncodingInputs {
    /// The video pad first, then the audio pad, for those the branch has.
    let pads: [Pad]
    /// The pad's name per medium, as SessionGraph.attachBranch takes them.
    let names: [MediaType: String]

    init(exposedOn bin: Bin) throws {
        var pads: [Pad] = []
        var names: [MediaType: String] = [:]
        for (media, queue, padName) in [(MediaType.video, "video_in", "sink"), (.audio, "audio_in", "audio_sink")] {
            guard let target = bin.element(named: queue)?.staticPad("sink") else { continue }
            pads.append(try bin.addGhostPad(named: padName, target: target))
            names[media] = padName
        }
        self.pads = pads
        self.names = names
    }

    /// Makes the branch independent of the tees that feed it, both ways. A source that dies pushes
    /// end-of-stream through the tee: in the file or stream it would end that track for good, while the
    /// session's filler (black frames, silence) and the device after recovery have more to give; only the
    /// end the output's own detach sends (into the input once it is unlinked from the tee) passes. And a
    /// serialized query from upstream is answered at once: one that waited for a sink held back by the
    /// outside world (an RTMP server that never answers) stalled the shared encoder and the camera with it.
    func decoupleFromUpstream() {
        for pad in pads {
            pad.dropEndOfStreamFromUpstream(unlessSentDirectly: true)
            pad.answerSerializedQueriesFromUpstreamAtOnce()
        }
    }
}
