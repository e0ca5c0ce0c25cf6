import Foundation
import GCapture
import NIOHTTP1

/// WHEP (RFC 9725): a viewer POSTs its SDP offer to /whep and gets 201 with the answer and, in Location,
/// the resource that stands for its session, which it DELETEs to leave. Behind the same token, Host and
/// Origin rules as the rest of the page (WebApplication checks them first). Every viewer shares one encode
/// (CaptureWebRTCOutput); how many may watch at once is bounded, and a viewer that never connects is let
/// go by itself, so a flood of offers holds nothing for long.
struct WHEPEndpoint: Sendable {
    static let path = "/whep"
    let output: CaptureWebRTCOutput

    func offer(_ request: WebRequest) async -> WebResponse {
        let type = request.headers["content-type"].first?.lowercased() ?? ""
        guard type.hasPrefix("application/sdp") else {
            return .error(.unsupportedMediaType, "a WHEP offer is sent as application/sdp, not \(type.isEmpty ? "without a type" : type)")
        }
        guard let sdp = String(data: request.body, encoding: .utf8) else { return .error(.badRequest, "the offer is not UTF-8 text") }
        do {
            let answer = try await output.addViewer(offer: sdp)
            return .bytes(.created, Data(answer.sdp.utf8), type: "application/sdp",
                          extra: [("Location", "\(Self.path)/\(answer.viewerID)"), ("Cache-Control", "no-store")])
        } catch {
            switch error {
            case .invalidSettings(let reason): return .error(.badRequest, reason)
            case .tooManyViewers, .sessionNotRunning:
                return .bytes(.serviceUnavailable, Data("\(error.description)\n".utf8), type: "text/plain; charset=utf-8",
                              extra: [("Retry-After", "5")])
            case .missingPackage, .missingPlugin: return .error(.notImplemented, error.description)
            default: return .error(.internalServerError, error.description)
            }
        }
    }

    /// DELETE of a viewer's resource: its connection ends, whichever camera's output it watches (viewer ids
    /// are unique across outputs).
    static func end(viewer id: Substring, among outputs: [CaptureWebRTCOutput]) -> WebResponse {
        outputs.contains { $0.removeViewer(String(id)) } ? .bytes(.ok, Data(), type: "text/plain") : .error(.notFound, "no viewer \(id) watches")
    }
}
