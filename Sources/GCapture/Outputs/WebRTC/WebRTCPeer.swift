import Foundation
import GStreamerKit

/// One WebRTC connection that sends the session's encoded frames: a viewer's (it offers, this answers) or a
/// WHIP publication's (this offers, the server answers). A small pipeline of its own that takes encoded
/// frames shared with others (no encode here), packs them into RTP with the payload types agreed, and sends
/// them through webrtcbin (ICE, DTLS, SRTP, RTCP):
///
///     appsrc video ─▶ rtph264pay ─┐      (rtpvp8pay for VP8)
///     appsrc audio ─▶ rtpopuspay ─┴─▶ webrtcbin
///
/// Its own pipeline, not a branch of the session's: a viewer's negotiation, its ICE threads, its failure or
/// its teardown never touch the camera's graph or the session's queue. Buffers enter sharing their memory and
/// are stamped on arrival with this pipeline's running time.
final class WebRTCPeer: Sendable {
    let id: String
    let codec: WebRTCOffer.VideoChoice.Codec
    let created = ContinuousClock.now
    private let pipeline: Pipeline
    private let webrtc: WebRTCBin
    private let videoSource: AppSource
    private let audioSource: AppSource?
    /// A new viewer's video begins at a key frame: until one passes, frames are not sent.
    private let waitingForKeyFrame = Locked(true)
    private let failure = Locked<String?>(nil)
    /// When a packet last came from the other side (STUN, RTCP reports): how a peer that vanished without a
    /// word (killed, unplugged) is told from one that only receives.
    private let lastIncoming = Locked<ContinuousClock.Instant?>(nil)
    /// A peer that sends nothing back for this long (no RTCP report, no ICE check: killed, unplugged) is
    /// gone: webrtcbin keeps such a connection "connected" (no consent checks), and WebRTC's own would take
    /// 30 s. RTCP's reports come every 5 s at the most (GStreamer's default minimum interval, randomised up
    /// to 7.5 s; browsers report far more often): 12 s never mistakes a quiet peer for a lost one.
    static let silenceLimit: Duration = .seconds(12)
    /// How long the other side's candidate host names may take to resolve (see `CandidateHostNames`): an mDNS
    /// name on the same network answers in milliseconds, one that is not there only after seconds.
    static let nameResolutionLimit: Duration = .seconds(1)

    /// Builds the pipeline for what `offer` receives (not started). `onKeyFrameRequest` runs, on a
    /// streaming thread, when the viewer reports a lost picture (RTCP PLI or FIR).
    init(id: String, video: WebRTCOffer.VideoChoice, opusPayloadType: Int?,
         onKeyFrameRequest: @escaping @Sendable () -> Void) throws(CaptureError) {
        self.id = id
        codec = video.codec
        // Each stream's SSRC fixed here and written into the answer (a=ssrc): a browser routes the packets of
        // a bundled connection to their receiver by it, and drops those it cannot place (Chromium does,
        // with no a=ssrc and no MID extension: connected, bytes arriving, never a frame).
        let videoSSRC = UInt32.random(in: 1...UInt32.max), audioSSRC = UInt32.random(in: 1...UInt32.max)
        // A viewer that cannot keep up loses the oldest frames (a second of video) rather than holding memory.
        let source = "is-live=true format=time do-timestamp=true max-bytes=0 max-time=0 max-buffers=30 leaky-type=downstream block=false"
        var description = "webrtcbin name=webrtc bundle-policy=max-bundle "
            + "appsrc name=video \(source) ! " + (video.codec == .h264
                ? "rtph264pay name=video_pay pt=\(video.payloadType) ssrc=\(videoSSRC) config-interval=-1 aggregate-mode=zero-latency mtu=1200"
                : "rtpvp8pay name=video_pay pt=\(video.payloadType) ssrc=\(videoSSRC) picture-id-mode=15-bit mtu=1200")
        if let opus = opusPayloadType {
            description += " appsrc name=audio \(source) ! rtpopuspay name=audio_pay pt=\(opus) ssrc=\(audioSSRC)"
        }
        do {
            pipeline = try Pipeline.launch(description)
            guard let webrtc = pipeline.element(named: "webrtc").flatMap(WebRTCBin.init),
                  let videoSource = pipeline.element(named: "video").flatMap(AppSource.init),
                  let videoPay = pipeline.element(named: "video_pay") else {
                throw GStreamerError(kind: .link, message: "the peer's pipeline lacks its parts")
            }
            try webrtc.addSender(from: videoPay, caps: video.rtpCaps + ",ssrc=(uint)\(videoSSRC)")
            if let opus = opusPayloadType, let audioPay = pipeline.element(named: "audio_pay") {
                try webrtc.addSender(from: audioPay, caps: "application/x-rtp,media=audio,encoding-name=OPUS,payload=\(opus),clock-rate=48000,ssrc=(uint)\(audioSSRC)")
                audioSource = pipeline.element(named: "audio").flatMap(AppSource.init)
            } else {
                audioSource = nil
            }
            (self.webrtc, self.videoSource) = (webrtc, videoSource)
            _ = videoSource.element.staticPad("src")?.addProbe(.upstreamEvent) { info in
                if info.isKeyFrameRequest { onKeyFrameRequest() }
                return .ok
            }
        } catch let error as GStreamerError {
            throw .configurationFailed(reason: "cannot set up a WebRTC viewer", underlying: error)
        } catch {
            throw .configurationFailed(reason: "cannot set up a WebRTC viewer", underlying: nil)
        }
        let failure = self.failure
        pipeline.bus.setHandler(for: .error) { message in
            if case .error(let error) = message.kind { failure.withLock { $0 = $0 ?? error.message } }
        }
    }

    /// Starts the pipeline, takes the offer, and returns the answer with this side's ICE candidates (it waits
    /// up to `gatheringLimit` for them: host candidates take milliseconds). Blocks.
    func answer(_ offer: String, gatheringLimit: Duration = .seconds(3)) throws(CaptureError) -> String {
        do {
            _ = try pipeline.setState(.playing)
            try webrtc.setRemoteDescription(CandidateHostNames.resolved(in: offer, within: Self.nameResolutionLimit), isOffer: true)
            try webrtc.createLocalDescription(offer: false)
        } catch let error as GStreamerError {
            throw .invalidSettings("the viewer's offer was refused: \(error.message)")
        } catch {
            throw .invalidSettings("the viewer's offer was refused")
        }
        let answer = try localDescriptionWithCandidates(within: gatheringLimit)
        watchIncoming()
        return answer
    }

    /// Starts the pipeline and returns this side's offer, ICE candidates included. Blocks.
    func offer(gatheringLimit: Duration = .seconds(3)) throws(CaptureError) -> String {
        do {
            _ = try pipeline.setState(.playing)
            try webrtc.createLocalDescription(offer: true)
        } catch let error as GStreamerError {
            throw .configurationFailed(reason: "cannot make a WebRTC offer", underlying: error)
        } catch {
            throw .configurationFailed(reason: "cannot make a WebRTC offer", underlying: nil)
        }
        return try localDescriptionWithCandidates(within: gatheringLimit)
    }

    /// Takes the other side's answer to `offer()`. Blocks.
    func accept(answer: String) throws(CaptureError) {
        do {
            try webrtc.setRemoteDescription(CandidateHostNames.resolved(in: answer, within: Self.nameResolutionLimit), isOffer: false)
        } catch {
            throw .invalidSettings("the server's answer was refused: \(error.message)")
        }
        watchIncoming()
    }

    private func localDescriptionWithCandidates(within limit: Duration) throws(CaptureError) -> String {
        let deadline = ContinuousClock.now + limit
        while webrtc.gatheringState != .complete, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        guard let description = webrtc.localDescription, description.contains("a=candidate:") else {
            throw .timedOut("no network address for WebRTC was found within \(limit)")
        }
        return description
    }

    /// Notes every packet that arrives from the other side, at the ICE transport's sources (webrtcbin makes
    /// them with the transport, once the descriptions are set).
    private func watchIncoming() {
        let lastIncoming = self.lastIncoming
        lastIncoming.withLock { $0 = .now }
        for source in pipeline.elements(madeBy: "nicesrc") {
            _ = source.staticPad("src")?.addProbe(.buffer) { _ in
                lastIncoming.withLock { $0 = .now }
                return .ok
            }
        }
    }

    var connectionState: WebRTCBin.ConnectionState { webrtc.connectionState }

    /// Why the connection is over, when it is, `state` being its state as just read: a failure inside the
    /// pipeline, webrtcbin's failed or closed, or a connected peer silent for longer than `silenceLimit`.
    /// A viewer and a WHIP publication both end by it; each adds its own limits (connecting, disconnected).
    func endReason(in state: WebRTCBin.ConnectionState) -> String? {
        if let failure = failure.withLock({ $0 }) { return "failed: \(failure)" }
        switch state {
        case .failed, .closed: return "its connection \(state)"
        case .connected:
            guard let silence = lastIncoming.withLock({ $0.map { ContinuousClock.now - $0 } }), silence > Self.silenceLimit else { return nil }
            return "nothing came back from it for \(silence.components.seconds) s"
        case .new, .connecting, .disconnected: return nil
        }
    }

    /// One encoded video frame for this viewer; delta frames wait for the first key frame. Streaming thread.
    func send(video sample: Sample, isKeyFrame: Bool) {
        let waiting = waitingForKeyFrame.withLock { waiting in
            if waiting, isKeyFrame { waiting = false }
            return waiting
        }
        if !waiting { videoSource.pushForRestamping(sample) }
    }

    func send(audio sample: Sample) {
        audioSource?.pushForRestamping(sample)
    }

    /// Ends the connection (webrtcbin closes it) and frees the pipeline. Blocks.
    func close() {
        pipeline.shutDown()
    }
}
