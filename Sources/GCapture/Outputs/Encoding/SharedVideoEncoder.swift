import GStreamerKit
import Synchronization

/// One H.264 encode of the camera that several outputs take their video from (a recording and a stream:
/// encoding is most of what either costs, so they share it):
///
///     video tee ─▶ queue ▶ videoconvert ▶ scale ▶ encoder ▶ h264parse ─▶ encoded tee ─┬─▶ recording
///                                                                                  └─▶ stream
///
/// It lives in the session's graph while an output uses it. An output that joins it while it runs begins
/// at a key frame it asks for (KeyFrameGate). The graph's methods drive it, on the session's queue.
final class SharedVideoEncoder: @unchecked Sendable {
    // @unchecked Sendable: `users` changes only on the session's queue (the graph's attach and detach); the
    // rest is lets of Sendable types and `Locked`.
    let encode: VideoEncode
    /// The encoder element used: the hardware one asked for may have given way to software.
    let activeEncoder: H264Encoder
    /// Where the outputs' branches take the encoded video from.
    let tee: Element
    let branch: TeeBranch
    var path: String { branch.bin.path }
    /// Outputs whose branches take from it now (session queue only).
    var users = 0
    /// The encoder element (for tests that make it misbehave).
    let encoderElement: Element?
    private let keyFrameRequests: KeyFrameRequests

    /// Builds the encoder behind `videoTee` and starts it. Blocks briefly (state change); session queue.
    init(_ request: VideoEncodeRequest, fedBy videoTee: Element, in pipeline: Bin, name: String) throws(CaptureError) {
        encode = request.encode
        let asked = request.encode
        let (bin, active) = try asked.encoder.withSoftwareFallback(request.mayFallBackToSoftware) { encoder in
            var attempt = asked
            attempt.encoder = encoder
            let bin = try Bin.parse(attempt.description(), ghostUnlinkedPads: false)
            try bin.set("name", name)
            try attempt.configureEncoder(in: bin)
            return bin
        }
        activeEncoder = active
        encoderElement = bin.element(named: VideoEncode.encoderName)
        keyFrameRequests = KeyFrameRequests(to: encoderElement)
        let tee: Element
        do {
            tee = try Element.make("tee", name: "\(name)-tee")
            try tee.set("allow-not-linked", true)
            try pipeline.add(tee)
        } catch {
            throw .missingPlugin("tee")
        }
        self.tee = tee
        do {
            try tee.syncStateWithParent()
            guard let input = bin.element(named: "video_in")?.staticPad("sink"),
                  let output = bin.element(named: "video_parse")?.staticPad("src") else {
                throw GStreamerError(kind: .link, message: "the encoder's bin has no input or output")
            }
            let sink = try bin.addGhostPad(named: "sink", target: input)
            let source = try bin.addGhostPad(named: "src", target: output)
            // A source that dies pushes end-of-stream through the video tee: the encoder would end for good,
            // while the session's filler and the camera after recovery have more to encode. It is never
            // drained: the outputs' branches are, behind it.
            sink.dropEndOfStreamFromUpstream()
            // Its queue and the encoder keep frames: the camera's are copied as they enter (DeviceFrameCopy).
            DeviceFrameCopy.copyLentFrames(enteringThrough: sink)
            branch = try TeeBranch(attaching: bin, inputs: [(videoTee, "sink")], in: pipeline) { bin in
                guard let teeInput = tee.staticPad("sink") else {
                    throw GStreamerError(kind: .link, message: "a tee without its sink pad")
                }
                try source.link(to: teeInput)
            }
        } catch {
            _ = try? tee.setState(.null)
            pipeline.remove(tee)
            throw .configurationFailed(reason: "cannot start the H.264 encoder", underlying: error as? GStreamerError)
        }
    }

    /// Asks the encoder for a key frame now (KeyFrameRequests): a branch that joins (or fell behind) waits
    /// for one. Any thread.
    func requestKeyFrame() { keyFrameRequests.request() }

    /// How full the raw input queue is (0...1): the encoder falling behind.
    var inputQueueFill: Double? { branch.bin.element(named: "video_in")?.queueTimeFill }

    /// Takes it out of the graph once no output uses it. Blocks briefly; session queue.
    func remove(from pipeline: Bin) {
        branch.detach(drain: false)
        _ = try? tee.setState(.null)
        pipeline.remove(tee)
    }
}

/// Lets encoded video into a branch that shares an encoder from a key frame on: when it joins, and again
/// after it fell behind (its input queue half full: what it dropped would leave the frames after it
/// without their references). Never blocks the encoder: what a branch cannot take is dropped a whole
/// group of pictures at a time, in front of its queue. Runs on the encoded tee's streaming thread.
final class KeyFrameGate: Sendable {
    private let waiting = Atomic<Bool>(true)
    private let encoder: SharedVideoEncoder
    /// The branch's input queue and its max-size-buffers, when it has a limit in buffers.
    private let queue: (element: Element, limit: Int)?

    /// `queue`: the branch's input queue, whose fill is watched (its max-size-buffers the limit). The key
    /// frame is asked for when the first frame that is not one arrives: asked before the branch is linked,
    /// it could pass before it, and the next request would wait out the 200 ms between requests.
    init(encoder: SharedVideoEncoder, queue: Element?) {
        self.encoder = encoder
        self.queue = queue.flatMap { queue in queue.intProperty("max-size-buffers").flatMap { $0 > 0 ? (queue, $0) : nil } }
    }

    /// Whether the frame enters the branch.
    func admits(isDeltaFrame: Bool) -> Bool {
        if let queue, let level = queue.element.intProperty("current-level-buffers"), level * 2 > queue.limit {
            waiting.store(true, ordering: .relaxed)
        }
        if waiting.load(ordering: .relaxed) {
            guard !isDeltaFrame else {
                encoder.requestKeyFrame()
                return false
            }
            waiting.store(false, ordering: .relaxed)
        }
        return true
    }
}
