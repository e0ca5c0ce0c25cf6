import Foundation
import GStreamerKit

/// One viewer's peer connection: a small pipeline of its own that takes the encoded frames every viewer
/// shares (no encode here), packs them into RTP with the payload types the viewer's offer gave, and sends
/// them through webrtcbin (ICE, DTLS, SRTP, RTCP):
///
///     appsrc video ─▶ rtph264pay ─┐
///     appsrc audio ─▶ rtpopuspay ─┴─▶ webrtcbin
///
/// Its own pipeline, not a branch of the session's: a viewer's negotiation, its ICE threads, its failure or
/// its teardown never touch the camera's graph or the session's queue. Buffers enter sharing their memory and
/// are stamped on arrival with this pipeline's running time.
final class WebRTCPeer: Sendable {
    let id: String
    let created = ContinuousClock.now
    private let pipeline: Pipeline
    private let webrtc: WebRTCBin
    private let videoSource: AppSource
    private let audioSource: AppSource?
    /// A new viewer's video begins at a key frame: until one passes, frames are not sent.
    private let waitingForKeyFrame = Locked(true)
    private let failure = Locked<String?>(nil)

    /// Builds the pipeline for what `offer` receives (not started). `onKeyFrameRequest` runs, on a
    /// streaming thread, when the viewer reports a lost picture (RTCP PLI or FIR).
    init(id: String, video: WebRTCOffer.VideoChoice, opusPayloadType: Int?,
         onKeyFrameRequest: @escaping @Sendable () -> Void) throws(CaptureError) {
        self.id = id
        // A viewer that cannot keep up loses the oldest frames (a second of video) rather than holding memory.
        // Each stream's SSRC fixed here and written into the answer (a=ssrc): a browser routes the packets of
        // a bundled connection to their receiver by it, and drops those it cannot place (Chromium does,
        // with no a=ssrc and no MID extension: connected, bytes arriving, never a frame).
        let videoSSRC = UInt32.random(in: 1...UInt32.max), audioSSRC = UInt32.random(in: 1...UInt32.max)
        let source = "is-live=true format=time do-timestamp=true max-bytes=0 max-time=0 max-buffers=30 leaky-type=downstream block=false"
        var description = "webrtcbin name=webrtc bundle-policy=max-bundle "
            + "appsrc name=video \(source) ! rtph264pay name=video_pay pt=\(video.payloadType) ssrc=\(videoSSRC) config-interval=-1 aggregate-mode=zero-latency mtu=1200"
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
            try webrtc.setRemoteDescription(offer, isOffer: true)
            try webrtc.createLocalDescription(offer: false)
        } catch let error as GStreamerError {
            throw .invalidSettings("the viewer's offer was refused: \(error.message)")
        } catch {
            throw .invalidSettings("the viewer's offer was refused")
        }
        let deadline = ContinuousClock.now + gatheringLimit
        while webrtc.gatheringState != .complete, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        guard let answer = webrtc.localDescription, answer.contains("a=candidate:") else {
            throw .timedOut("no network address to offer the viewer was found within \(gatheringLimit)")
        }
        return answer
    }

    var connectionState: WebRTCBin.ConnectionState { webrtc.connectionState }
    /// What failed inside the peer's pipeline, if anything.
    var failureReason: String? { failure.withLock { $0 } }

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
