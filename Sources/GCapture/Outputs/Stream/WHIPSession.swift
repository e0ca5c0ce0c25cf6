import Foundation
import GStreamerKit

/// The HTTP half of WHIP (RFC 9725): the publisher POSTs its SDP offer to the endpoint and gets 201 with
/// the answer and, in Location, the session's resource, which it DELETEs to end the session. Blocking calls,
/// made on the stream output's work queue.
struct WHIPSession: Sendable {
    /// The session's resource (Location, resolved against the endpoint); nil when the server gave none.
    let resource: URL?
    let answer: String

    /// POSTs `offer` to `endpoint`; the answer, or an error that says what the server said.
    static func publish(offer: String, to endpoint: URL, timeout: Double) throws(CaptureError) -> WHIPSession {
        let server = StreamDestination.redacted(endpoint.absoluteString)
        let exchange: HTTPExchange
        do {
            exchange = try HTTPExchange.send("POST", to: endpoint.absoluteString, contentType: "application/sdp", body: offer,
                                             timeoutSeconds: Int(timeout.rounded(.up)))
        } catch {
            throw .outputFailed(output: "the WHIP stream", underlying: .init(kind: .gError, message: "\(server) did not answer: \(error.message)"))
        }
        guard exchange.status == 201, exchange.body.hasPrefix("v=0") else {
            let said = String(exchange.body.prefix(300))
            throw .outputFailed(output: "the WHIP stream",
                                underlying: .init(kind: .gError, message: "\(server) answered \(exchange.status) to the offer\(said.isEmpty ? "" : ": \(said)")"))
        }
        return WHIPSession(resource: exchange.location.flatMap { URL(string: $0, relativeTo: endpoint)?.absoluteURL }, answer: exchange.body)
    }

    /// Ends the session on the server (DELETE of its resource); a server already gone is not an error.
    func end(timeout: Int = 2) {
        guard let resource else { return }
        _ = try? HTTPExchange.send("DELETE", to: resource.absoluteString, timeoutSeconds: timeout)
    }
}
