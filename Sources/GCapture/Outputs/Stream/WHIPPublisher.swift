import Foundation
import GStreamerKit

/// One connection of a stream published over WHIP: the peer that sends the branch's encoded frames (a
/// pipeline of its own, WebRTCPeer) and the server's session for it. Made per connection; the stream
/// output's supervisor makes the next after a loss.
final class WHIPPublisher: Sendable {
    /// The payload types this side offers: any in the dynamic range do, these are the common ones.
    static let videoPayloadType = 96, audioPayloadType = 111

    private let peer: WebRTCPeer
    private let session = Locked<WHIPSession?>(nil)

    /// `profile`: the encode's H.264 profile, which the offer names (level 3.1; receivers take higher levels
    /// with level-asymmetry-allowed).
    init(withAudio: Bool, profile: CaptureStreamOutput.Profile, encoder: SharedVideoEncoder) throws(CaptureError) {
        let profileLevelID = profile == .main ? "4d001f" : "42e01f"
        peer = try WebRTCPeer(id: UUID().uuidString, video: .init(payloadType: Self.videoPayloadType, profileLevelID: profileLevelID),
                              opusPayloadType: withAudio ? Self.audioPayloadType : nil) { encoder.requestKeyFrame() }
    }

    /// The branch's appsinks hand their frames to the peer.
    func takeFrames(from bin: Bin) {
        let peer = self.peer
        bin.element(named: StreamDestination.whipVideoSink).flatMap(AppSink.init)?.setSampleHandler { sample in
            peer.send(video: sample, isKeyFrame: !sample.isDeltaFrame)
        }
        bin.element(named: StreamDestination.whipAudioSink).flatMap(AppSink.init)?.setSampleHandler { sample in
            peer.send(audio: sample)
        }
    }

    /// Offers, POSTs the offer to `endpoint`, takes the answer. Blocks (ICE gathering, the HTTP exchange).
    func connect(to endpoint: URL, timeout: Double) throws(CaptureError) {
        let offer = try peer.offer()
        let session = try WHIPSession.publish(offer: offer, to: endpoint, timeout: timeout)
        self.session.withLock { $0 = session }
        try peer.accept(answer: session.answer)
    }

    var isConnected: Bool { peer.connectionState == .connected }

    /// Why the connection is lost, when it is (WebRTCPeer.endReason).
    var lostReason: String? { peer.endReason(in: peer.connectionState) }

    /// Ends the server's session (DELETE) and the connection. Blocks.
    func close() {
        session.withLock { $0 }?.end()
        peer.close()
    }
}
