import Dispatch
import Foundation
import GStreamerKit

/// The session's picture (and sound, with a microphone) live over WebRTC, for any number of viewers up to
/// `maximumViewers`: browsers and other WebRTC peers that send an SDP offer (WHEP, RFC 9725, is how the
/// web server takes them). No AVFoundation counterpart.
///
/// One encode serves every viewer: H.264 constrained baseline (what browsers decode everywhere) from the
/// session's shared encoder, Opus for the sound. Each viewer has a peer connection of its own
/// (WebRTCPeer) that only packs and sends. With no viewer nothing is encoded: the branch is in the
/// session's graph only while someone watches. A new viewer starts at a key frame asked for at once, and
/// a viewer that reports a lost picture gets another. A viewer that fails, disconnects for
/// `disconnectLimit`, never connects within `connectLimit`, or sends nothing back for 12 s (killed, unplugged:
/// webrtcbin would call it connected for ever) is let go by itself.
public final class CaptureWebRTCOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: inherited from CaptureOutput; its state is behind `state`'s lock.
    /// A viewer's session: its id (for `removeViewer`) and this side's SDP answer, ICE candidates included.
    public struct Answer: Sendable {
        public let viewerID: String
        public let sdp: String
    }

    public struct Settings: Sendable, Equatable {
        /// Frames larger than this are scaled down into it (the aspect kept) before encoding.
        public var maximumWidth = 1280
        public var maximumHeight = 720
        /// Video bits per second; nil: 2 bits per pixel per second of the encoded size (1.8 Mbit/s at 720p).
        public var videoBitRate: Int?
        public var audioBitRate = 64_000
        /// Seconds between the key frames sent unasked (a new viewer or a lost picture asks for one at once).
        public var keyFrameInterval = 2.0
        public var maximumViewers = 10
        /// How long a viewer may take to connect after its answer.
        public var connectLimit: Duration = .seconds(15)
        /// How long a connected viewer may stay disconnected before it is let go.
        public var disconnectLimit: Duration = .seconds(5)

        public init() {}
    }

    private struct State {
        var settings = Settings()
        var context: OutputContext?
        var peers: [String: WebRTCPeer] = [:]
        /// Offers being answered: they hold a place among the viewers.
        var answering = 0
        /// The shared H.264 encode the branch takes from, while the branch is in the graph.
        var encoder: SharedVideoEncoder?
        /// While a viewer takes VP8.
        var vp8: WebRTCVP8Encode?
        var monitor: UUID?
        var disconnectedSince: [String: ContinuousClock.Instant] = [:]
        var connected: Set<String> = []
        var encodedFrames = 0
        var audioBuffers = 0
    }

    private let state = Locked(State())
    /// Where answers are made and peers closed: both block (webrtcbin's promises, a pipeline's stop).
    private let workQueue = DispatchQueue(label: "gcapture.webrtc", attributes: .concurrent)

    public override init() {}

    public var settings: Settings {
        get { state.withLock { $0.settings } }
        set { state.withLock { $0.settings = newValue } }
    }

    /// Viewers connected or connecting.
    public var viewerCount: Int { state.withLock { $0.peers.count } }
    /// Viewers whose connection is up.
    public var connectedViewerCount: Int { state.withLock { $0.connected.count } }
    /// Video frames encoded for the viewers since the output joined: one encode however many watch.
    public var encodedFrameCount: Int { state.withLock { $0.encodedFrames } }
    public var encodedAudioBufferCount: Int { state.withLock { $0.audioBuffers } }

    // MARK: Viewers

    /// Takes a viewer's SDP offer and returns the answer: H.264, else VP8 (and Opus when the session has a
    /// microphone and the offer takes audio) with the payload types the offer gave. Throws, naming the problem,
    /// for an offer that is not SDP, receives no video or neither codec, when the session is not running, or when
    /// `maximumViewers` watch already. Waits for the encoder to join the graph and for this side's ICE
    /// candidates (milliseconds on a LAN), not for the viewer to connect.
    public func addViewer(offer: String) async throws(CaptureError) -> Answer {
        for element in ["webrtcbin", "nicesrc", "rtph264pay", "rtpopuspay"] where !GStreamer.hasElement(element) {
            throw .missingPackage(element: element, package: ElementPackages.package(providing: element)!)
        }
        let parsed = try WebRTCOffer(offer)
        guard let video = try parsed.videoChoice() else { throw .invalidSettings("the offer receives no video (no m=video line that is recvonly or sendrecv)") }
        let context: OutputContext = try state.withLock { state throws(CaptureError) in
            guard let context = state.context else { throw .sessionNotRunning }
            guard state.peers.count + state.answering < state.settings.maximumViewers else {
                throw .tooManyViewers(limit: state.settings.maximumViewers)
            }
            state.answering += 1
            return context
        }
        let result: Result<Answer, CaptureError> = await withCheckedContinuation { continuation in
            context.onSessionQueue { graph in
                let requestKeyFrame: @Sendable () -> Void
                do throws(CaptureError) {
                    guard let graph else { throw .sessionNotRunning }
                    let encoder = try self.attachIfNeeded(to: graph)
                    if video.codec == .vp8 {
                        let vp8 = try self.attachVP8IfNeeded(to: graph)
                        requestKeyFrame = vp8.requestKeyFrame
                    } else {
                        requestKeyFrame = encoder.requestKeyFrame
                    }
                } catch {
                    return continuation.resume(returning: .failure(error))
                }
                let withAudio = graph?.hasSource(.audio) == true ? parsed.opusPayloadType : nil
                self.workQueue.async {
                    continuation.resume(returning: Result { () throws(CaptureError) in
                        try self.answer(offer, video: video, opusPayloadType: withAudio, requestKeyFrame: requestKeyFrame)
                    })
                }
            }
        }
        // An answered viewer took its place among the peers in the same step (answer(_:…)).
        if case .failure = result {
            state.withLock { $0.answering -= 1 }
            detachIfUnwatched()
        }
        return try result.get()
    }

    private func answer(_ offer: String, video: WebRTCOffer.VideoChoice, opusPayloadType: Int?,
                        requestKeyFrame: @escaping @Sendable () -> Void) throws(CaptureError) -> Answer {
        let id = UUID().uuidString.lowercased()
        let peer = try WebRTCPeer(id: id, video: video, opusPayloadType: opusPayloadType, onKeyFrameRequest: requestKeyFrame)
        let sdp: String
        do {
            sdp = try peer.answer(offer)
        } catch {
            peer.close()
            throw error
        }
        // From answering to watching in one step: counted once, always (ten offers at once get ten answers).
        state.withLock { state in
            state.peers[id] = peer
            state.answering -= 1
        }
        requestKeyFrame()
        startMonitor()
        Log.session.info("WebRTC viewer \(id) answered (\(video.codec.rawValue)\(opusPayloadType == nil ? "" : " and Opus"))")
        return Answer(viewerID: id, sdp: sdp)
    }

    /// Ends a viewer's connection. Returns whether there was such a viewer.
    @discardableResult
    public func removeViewer(_ id: String) -> Bool {
        guard let peer = state.withLock({ state -> WebRTCPeer? in
            state.connected.remove(id)
            state.disconnectedSince[id] = nil
            return state.peers.removeValue(forKey: id)
        }) else { return false }
        Log.session.info("WebRTC viewer \(id) left")
        workQueue.async { peer.close() }
        detachIfUnwatched()
        return true
    }

    // MARK: The branch (session queue)

    /// What every encode for the viewers shares: the size (the camera's within the maximum), rate, bit rate
    /// (nil: the default, which takes a running encode's), frames between key frames.
    private func encodeShape(in graph: any OutputGraph) -> (size: VideoEncode.Size, frameRate: Int, bitRate: Int?, keyInterval: Int) {
        let settings = self.settings
        let selection = graph.videoSelection
        let frameRate = Int((selection?.frameRate.doubleValue ?? 30).rounded())
        let size = Self.encodedSize(width: selection?.format.width ?? settings.maximumWidth, height: selection?.format.height ?? settings.maximumHeight,
                                    within: settings)
        return (size, frameRate, settings.videoBitRate, max(1, Int((Double(frameRate) * settings.keyFrameInterval).rounded())))
    }

    /// The default bit rate: 2 bits per pixel a second.
    private static func defaultBitRate(_ size: VideoEncode.Size) -> Int { max(300_000, size.width * size.height * 2) }

    private func attachVP8IfNeeded(to graph: any OutputGraph) throws(CaptureError) -> WebRTCVP8Encode {
        if let vp8 = state.withLock({ $0.vp8 }) { return vp8 }
        let shape = encodeShape(in: graph)
        let vp8 = try WebRTCVP8Encode(for: self, in: graph, size: shape.size, frameRate: shape.frameRate,
                                      bitRate: shape.bitRate ?? Self.defaultBitRate(shape.size), keyInterval: shape.keyInterval) { [weak self] sample in
            self?.deliver(video: sample, codec: .vp8)
        }
        state.withLock { $0.vp8 = vp8 }
        return vp8
    }

    private func attachIfNeeded(to graph: any OutputGraph) throws(CaptureError) -> SharedVideoEncoder {
        if let encoder = state.withLock({ $0.encoder }) { return encoder }
        let settings = self.settings
        let selection = graph.videoSelection
        let (size, frameRate, bitRate, keyInterval) = encodeShape(in: graph)
        let withAudio = graph.hasSource(.audio)
        var description = "\(VideoEncode.encodedInputQueue(frameRate: frameRate)) ! h264parse config-interval=-1 "
            + "! video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=video_sink sync=false max-buffers=1 drop=false enable-last-sample=false"
        if withAudio {
            description += "  queue name=audio_in leaky=downstream max-size-buffers=0 max-size-bytes=0 max-size-time=500000000 "
                + "! \(MovieEncoding.encoderInput) ! opusenc bitrate=\(settings.audioBitRate) frame-size=20 "
                + "! appsink name=audio_sink sync=false max-buffers=1 drop=false enable-last-sample=false"
        }
        let bin = try graph.makeBin(description, for: self, ghostUnlinkedPads: false)
        let inputs: EncodingInputs
        do {
            inputs = try EncodingInputs(exposedOn: bin)
            inputs.decoupleFromUpstream()
        } catch {
            throw .configurationFailed(reason: "cannot set up the WebRTC live view", underlying: error as? GStreamerError)
        }
        let h264 = try H264Encoder.choose()
        let encode = VideoEncode(encoder: h264, bitRate: bitRate ?? Self.defaultBitRate(size), keyInterval: keyInterval,
                                 profile: "constrained-baseline", frameRate: frameRate, frameSize: size,
                                 inputFormat: h264.inputFormat(forCameraFormat: selection?.format.pixelFormat))
        let encoder = try graph.sharedVideoEncoder(for: VideoEncodeRequest(encode: encode, acceptsAnyBitRate: bitRate == nil))
        let gate = KeyFrameGate(encoder: encoder, queue: bin.element(named: "video_in"))
        _ = inputs.pads.first?.addProbe(.buffer) { info in gate.admits(isDeltaFrame: info.isDeltaFrame) ? .ok : .drop }
        bin.element(named: "video_sink").flatMap(AppSink.init)?.setSampleHandler { [weak self] sample in self?.deliver(video: sample, codec: .h264) }
        bin.element(named: "audio_sink").flatMap(AppSink.init)?.setSampleHandler { [weak self] sample in self?.deliver(audio: sample) }
        try graph.attachBranch(bin, of: self, inputs: inputs.names, encodedVideo: encoder)
        state.withLock { $0.encoder = encoder }
        return encoder
    }

    /// The encoded size: the camera's, scaled into the maximum with its aspect kept, even.
    static func encodedSize(width: Int, height: Int, within settings: Settings) -> VideoEncode.Size {
        let scale = min(1, Double(settings.maximumWidth) / Double(width), Double(settings.maximumHeight) / Double(height))
        return VideoEncode.Size(width: max(16, Int(Double(width) * scale)) & ~1, height: max(16, Int(Double(height) * scale)) & ~1)
    }

    /// Takes the branch out of the graph once no viewer watches or is being answered, and the VP8 encode once
    /// no viewer takes VP8.
    private func detachIfUnwatched() {
        guard let context = state.withLock({ $0.encoder != nil || $0.vp8 != nil ? $0.context : nil }) else { return }
        context.onSessionQueue { graph in
            let (branch, vp8) = self.state.withLock { state -> (Bool, WebRTCVP8Encode?) in
                // A viewer being answered may be one of VP8: only answered viewers let it go.
                let anyVP8 = state.answering > 0 || state.peers.values.contains { $0.codec == .vp8 }
                let vp8 = anyVP8 ? nil : state.vp8
                if vp8 != nil { state.vp8 = nil }
                guard state.peers.isEmpty, state.answering == 0, state.encoder != nil else { return (false, vp8) }
                state.encoder = nil
                return (true, vp8)
            }
            if let vp8 { graph?.detachTap(vp8.tap) }
            if branch { graph?.detachBranch(of: self, drain: false) }
        }
    }

    private func deliver(video sample: Sample, codec: WebRTCOffer.VideoChoice.Codec) {
        let isKeyFrame = !sample.isDeltaFrame
        let peers = state.withLock { state -> [WebRTCPeer] in
            state.encodedFrames += 1
            return state.peers.values.filter { $0.codec == codec }
        }
        for peer in peers { peer.send(video: sample, isKeyFrame: isKeyFrame) }
    }

    private func deliver(audio sample: Sample) {
        let peers = state.withLock { state -> [WebRTCPeer] in
            state.audioBuffers += 1
            return Array(state.peers.values)
        }
        for peer in peers { peer.send(audio: sample) }
    }

    // MARK: Watching the viewers (on the session's shared tick)

    private func startMonitor() {
        state.withLock { state in
            guard state.monitor == nil else { return }
            state.monitor = SystemPressureMonitor.shared.add { [weak self] _ in self?.checkViewers() }
        }
    }

    private func stopMonitor() {
        if let monitor = state.withLock({ state -> UUID? in defer { state.monitor = nil }; return state.monitor }) {
            SystemPressureMonitor.shared.remove(monitor)
        }
    }

    /// Lets go of viewers that failed, left, or never came.
    private func checkViewers() {
        let now = ContinuousClock.now
        let (peers, settings) = state.withLock { ($0.peers, $0.settings) }
        var leaving: [(String, String)] = []
        for (id, peer) in peers {
            let connection = peer.connectionState
            let verdict: String? = peer.endReason(in: connection) ?? state.withLock { state in
                switch connection {
                case .connected:
                    state.connected.insert(id)
                    state.disconnectedSince[id] = nil
                case .failed, .closed:
                    break
                case .disconnected:
                    let since = state.disconnectedSince[id] ?? now
                    state.disconnectedSince[id] = since
                    if now - since > settings.disconnectLimit { return "disconnected for \(settings.disconnectLimit)" }
                case .new, .connecting:
                    if !state.connected.contains(id), now - peer.created > settings.connectLimit { return "it did not connect within \(settings.connectLimit)" }
                }
                return nil
            }
            if let verdict { leaving.append((id, verdict)) }
        }
        for (id, reason) in leaving where removeViewer(id) {
            Log.session.info("WebRTC viewer \(id) let go: \(reason)")
        }
        if state.withLock({ $0.peers.isEmpty && $0.answering == 0 }) { stopMonitor() }
    }

    // MARK: The session's hooks

    override var keepsFrames: Bool { true }
    override var yieldsFramesUnderPressure: Bool { false }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        state.withLock { $0.context = context }
    }

    /// The session stopped or the output was removed: every viewer's connection ends.
    override func didDetach() {
        state.withLock { $0.context = nil }
        letGoOfEveryViewer()
    }

    /// The branch failed (its encoder): the session detached it; the viewers' pictures ended with it.
    override func didFail(_ error: GStreamerError) {
        let count = letGoOfEveryViewer()
        Log.session.warning("the WebRTC live view failed: \(error.message); its \(count) viewers were let go")
    }

    /// Closes every viewer's connection, the branch already gone. Returns how many there were.
    @discardableResult
    private func letGoOfEveryViewer() -> Int {
        var vp8: WebRTCVP8Encode?
        let peers = state.withLock { state -> [WebRTCPeer] in
            let peers = Array(state.peers.values)
            state.peers = [:]
            state.connected = []
            state.disconnectedSince = [:]
            state.encoder = nil
            vp8 = state.vp8
            state.vp8 = nil
            return peers
        }
        // The session stopped (the tap went with its graph), or the branch failed (the tap goes now).
        if let vp8, let context = state.withLock({ $0.context }) { context.onSessionQueue { graph in graph?.detachTap(vp8.tap) } }
        stopMonitor()
        for peer in peers { workQueue.async { peer.close() } }
        return peers.count
    }
}
