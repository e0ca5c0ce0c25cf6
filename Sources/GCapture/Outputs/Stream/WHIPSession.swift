import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP half of WHIP (RFC 9725): the publisher POSTs its SDP offer to the endpoint and gets 201 with
/// the answer and, in Location, the session's resource, which it DELETEs to end the session. Blocking calls,
/// made on the stream output's work queue.
struct WHIPSession: Sendable {
    /// The session's resource (Location, resolved against the endpoint); nil when the server gave none.
    let resource: URL?
    let answer: String

    /// POSTs `offer` to `endpoint`; the answer, or an error that says what the server said.
    static func publish(offer: String, to endpoint: URL, timeout: Double) throws(CaptureError) -> WHIPSession {
        var request = URLRequest(url: endpoint, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.setValue("application/sdp", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(offer.utf8)
        let (data, response, failure) = exchange(request, timeout: timeout)
        let server = StreamDestination.redacted(endpoint.absoluteString)
        guard let response else {
            throw .outputFailed(output: "the WHIP stream", underlying: .init(kind: .gError, message: "\(server) did not answer: \(failure ?? "no response")"))
        }
        guard response.statusCode == 201, let answer = data.flatMap({ String(data: $0, encoding: .utf8) }), answer.hasPrefix("v=0") else {
            let said = data.flatMap { String(data: $0.prefix(300), encoding: .utf8) } ?? ""
            throw .outputFailed(output: "the WHIP stream",
                                underlying: .init(kind: .gError, message: "\(server) answered \(response.statusCode) to the offer\(said.isEmpty ? "" : ": \(said)")"))
        }
        let location = response.value(forHTTPHeaderField: "Location").flatMap { URL(string: $0, relativeTo: endpoint)?.absoluteURL }
        return WHIPSession(resource: location, answer: answer)
    }

    /// Ends the session on the server (DELETE of its resource); a server already gone is not an error.
    func end(timeout: Double = 2) {
        guard let resource else { return }
        var request = URLRequest(url: resource, timeoutInterval: timeout)
        request.httpMethod = "DELETE"
        _ = Self.exchange(request, timeout: timeout)
    }

    private static func exchange(_ request: URLRequest, timeout: Double) -> (Data?, HTTPURLResponse?, String?) {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<(Data?, HTTPURLResponse?, String?)>((nil, nil, nil))
        let task = URLSession.shared.dataTask(with: request) { data, response, error in
            result.withLock { $0 = (data, response as? HTTPURLResponse, error?.localizedDescription) }
            done.signal()
        }
        task.resume()
        if done.wait(timeout: .now() + timeout + 1) == .timedOut {
            task.cancel()
            return (nil, nil, "no answer within \(Int(timeout)) s")
        }
        return result.withLock { $0 }
    }
}
