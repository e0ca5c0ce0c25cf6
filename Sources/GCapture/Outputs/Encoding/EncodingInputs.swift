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
}
