import Foundation

/// What a viewer's SDP offer (RFC 8866) says about the media it will receive: for each media line its kind,
/// whether it wants to receive, and the codecs it takes with their payload types. Enough to pick the
/// payload types the answer must use; webrtcbin reads the rest of the offer itself.
struct WebRTCOffer: Sendable, Equatable {
    struct Codec: Sendable, Equatable {
        var payloadType: Int
        /// As in rtpmap, upper-cased: "H264", "VP8", "OPUS".
        var name: String
        var clockRate: Int
        /// The fmtp parameters, keys lower-cased.
        var parameters: [String: String] = [:]
    }

    struct Media: Sendable, Equatable {
        var kind: String
        /// The direction attribute as written (sendrecv when there is none).
        var direction: String
        var codecs: [Codec]
        var receives: Bool { direction == "sendrecv" || direction == "recvonly" }
    }

    /// How the answer sends video: its codec, the payload type the offer gave it, and the RTP caps for webrtcbin.
    struct VideoChoice: Sendable, Equatable {
        enum Codec: String, Sendable { case h264 = "H264", vp8 = "VP8" }
        var codec = Codec.h264
        var payloadType: Int
        /// H.264's profile-level-id as the offer gave it for that payload type.
        var profileLevelID: String?

        var rtpCaps: String {
            let caps = "application/x-rtp,media=video,encoding-name=\(codec.rawValue),payload=\(payloadType),clock-rate=90000"
            guard codec == .h264 else { return caps }
            return caps + ",packetization-mode=(string)1,profile-level-id=(string)\(profileLevelID ?? "42e01f"),level-asymmetry-allowed=(string)1"
        }
    }

    let media: [Media]

    /// Offers far larger than any browser's (Chromium's is ~6 KB) are not read.
    static let maximumLength = 64 * 1024

    /// Reads the media lines of `text`; throws, naming the problem, for what is not an SDP offer with media.
    init(_ text: String) throws(CaptureError) {
        guard text.utf8.count <= Self.maximumLength else {
            throw .invalidSettings("the offer is \(text.utf8.count) bytes; an SDP offer is at most \(Self.maximumLength)")
        }
        let lines = text.split(whereSeparator: \.isNewline).map(String.init)
        guard lines.first == "v=0" else { throw .invalidSettings("the offer is not SDP: it does not begin with \"v=0\"") }
        var media: [Media] = []
        var sessionDirection = "sendrecv"
        for line in lines {
            if line.hasPrefix("m=") {
                let fields = line.dropFirst(2).split(separator: " ")
                guard fields.count >= 4 else { throw .invalidSettings("the offer's media line \"\(line)\" has fewer than four fields") }
                let codecs = fields.dropFirst(3).compactMap { Int($0) }.map { Codec(payloadType: $0, name: "", clockRate: 0) }
                media.append(Media(kind: String(fields[0]), direction: sessionDirection, codecs: codecs))
            } else if ["a=sendrecv", "a=sendonly", "a=recvonly", "a=inactive"].contains(line) {
                let direction = String(line.dropFirst(2))
                if media.isEmpty { sessionDirection = direction } else { media[media.count - 1].direction = direction }
            } else if let last = media.indices.last, line.hasPrefix("a=rtpmap:") || line.hasPrefix("a=fmtp:") {
                Self.read(attribute: line, into: &media[last])
            }
        }
        guard !media.isEmpty else { throw .invalidSettings("the offer has no media line (m=)") }
        self.media = media
    }

    private static func read(attribute line: String, into media: inout Media) {
        let isMap = line.hasPrefix("a=rtpmap:")
        let body = line.dropFirst(isMap ? 9 : 7)
        guard let space = body.firstIndex(of: " "), let payloadType = Int(body[..<space]),
              let index = media.codecs.firstIndex(where: { $0.payloadType == payloadType }) else { return }
        let value = body[body.index(after: space)...]
        if isMap {
            let parts = value.split(separator: "/")
            media.codecs[index].name = parts.first.map { $0.uppercased() } ?? ""
            media.codecs[index].clockRate = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        } else {
            for pair in value.split(separator: ";") {
                let keyValue = pair.split(separator: "=", maxSplits: 1)
                guard keyValue.count == 2 else { continue }
                media.codecs[index].parameters[keyValue[0].trimmingCharacters(in: .whitespaces).lowercased()] =
                    keyValue[1].trimmingCharacters(in: .whitespaces)
            }
        }
    }

    /// The first media line of `kind` that receives.
    func receiving(_ kind: String) -> Media? { media.first { $0.kind == kind && $0.receives } }

    /// H.264 in packetization mode 1, constrained baseline first (what every browser decodes in hardware
    /// and the encoder is pinned to), else VP8 (a Firefox without the OpenH264 plugin offers no H.264); nil
    /// when the offer receives no video. Throws when it receives video only in other codecs.
    func videoChoice() throws(CaptureError) -> VideoChoice? {
        guard let video = receiving("video") else { return nil }
        let h264 = video.codecs.filter { $0.name == "H264" && $0.parameters["packetization-mode"] == "1" }
        let baseline = h264.first { ($0.parameters["profile-level-id"]?.lowercased()).map(Self.isConstrainedBaseline) ?? false }
        if let pick = baseline ?? h264.first {
            return VideoChoice(payloadType: pick.payloadType, profileLevelID: pick.parameters["profile-level-id"])
        }
        if let vp8 = video.codecs.first(where: { $0.name == "VP8" && $0.clockRate == 90000 }) {
            return VideoChoice(codec: .vp8, payloadType: vp8.payloadType)
        }
        let offered = Set(video.codecs.map(\.name).filter { !$0.isEmpty && $0 != "RTX" && $0 != "RED" && $0 != "ULPFEC" })
        throw .invalidSettings("the offer takes video only as \(offered.sorted().joined(separator: ", ")); the live view sends H.264 (packetization-mode 1) or VP8")
    }

    /// Opus's payload type, when the offer receives audio in Opus.
    var opusPayloadType: Int? {
        receiving("audio")?.codecs.first { $0.name == "OPUS" && $0.clockRate == 48000 }?.payloadType
    }

    /// profile_idc 66 (baseline) with constraint_set1 (0x40) set: "42e01f", "42c01f"; not plain baseline, "42001f".
    static func isConstrainedBaseline(_ profileLevelID: String) -> Bool {
        guard profileLevelID.count == 6, let value = Int(profileLevelID, radix: 16) else { return false }
        return value >> 16 == 0x42 && (value >> 8) & 0x40 != 0
    }
}
