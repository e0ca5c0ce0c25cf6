import CGst
import CGstShim

/// A webrtcbin element (gstreamer1.0-plugins-bad, with gstreamer1.0-nice for ICE): one WebRTC peer
/// connection. Negotiation is offer/answer in SDP text; the calls that negotiate wait on webrtcbin's own
/// thread and so block the caller: call them off any queue that must stay responsive, never on a
/// streaming thread.
public final class WebRTCBin: @unchecked Sendable {
    // @unchecked Sendable: a let of an Element; webrtcbin's signals and properties are thread-safe.
    public let element: Element

    /// RTCPeerConnectionState's values, in webrtcbin's order.
    public enum ConnectionState: Int, Sendable, CustomStringConvertible {
        case new, connecting, connected, disconnected, failed, closed
        public var description: String { ["new", "connecting", "connected", "disconnected", "failed", "closed"][rawValue] }
    }

    public enum GatheringState: Int, Sendable { case new, gathering, complete }

    /// Wraps a webrtcbin found inside a parsed bin.
    public init?(_ element: Element) {
        guard element.factoryName == "webrtcbin" else { return nil }
        self.element = element
    }

    public var connectionState: ConnectionState {
        element.intProperty("connection-state").flatMap(ConnectionState.init(rawValue:)) ?? .new
    }

    public var gatheringState: GatheringState {
        element.intProperty("ice-gathering-state").flatMap(GatheringState.init(rawValue:)) ?? .new
    }

    /// Adds a send-only media line fed by `upstream`'s src pad (a payloader), RTP as `caps` say: its media,
    /// encoding, payload type and format parameters, which the description then carries.
    public func addSender(from upstream: Element, caps: String) throws(GStreamerError) {
        try call { error in CGstShim_webrtc_add_sender(element.pointer, upstream.pointer, caps, &error) != 0 }
    }

    /// Takes the remote peer's offer (or its answer to ours).
    public func setRemoteDescription(_ sdp: String, isOffer: Bool) throws(GStreamerError) {
        try call { error in CGstShim_webrtc_set_remote_description(element.pointer, sdp, isOffer ? 1 : 0, &error) != 0 }
    }

    /// Makes an offer (or the answer to the remote offer) and sets it as the local description; blocks.
    /// Its SDP has no ICE candidates yet: `localDescription` has them once gathering is complete.
    @discardableResult
    public func createLocalDescription(offer: Bool) throws(GStreamerError) -> String {
        var text: String?
        try call { error in
            text = takeString(CGstShim_webrtc_create_local_description(element.pointer, offer ? 1 : 0, &error))
            return text != nil
        }
        return text ?? ""
    }

    /// The local description's SDP with the candidates gathered so far.
    public var localDescription: String? { takeString(CGstShim_webrtc_local_description_text(element.pointer)) }

    private func call(_ body: (inout UnsafeMutablePointer<CChar>?) -> Bool) throws(GStreamerError) {
        var error: UnsafeMutablePointer<CChar>?
        let done = body(&error)
        let reason = takeString(error)
        guard done else { throw GStreamerError(kind: .negotiation, message: reason ?? "webrtcbin refused") }
    }
}
