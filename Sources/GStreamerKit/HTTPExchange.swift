import CGst
import CGstShim

/// One HTTP/1.1 request and its answer, over GIO (GLib's sockets and TLS, which GStreamer links already):
/// for the few exchanges a WebRTC peer's signalling needs (WHIP's POST and DELETE). Blocks the caller.
public struct HTTPExchange: Sendable {
    public let status: Int
    /// The Location header, as sent.
    public let location: String?
    public let body: String

    /// Sends `method` to `url` (http:// or https://) and reads the answer to the end; throws with the
    /// reason when no answer comes (refused, unreachable, TLS, timeout).
    public static func send(_ method: String, to url: String, contentType: String? = nil, body: String? = nil,
                            timeoutSeconds: Int) throws(GStreamerError) -> HTTPExchange {
        var status: Int32 = 0
        var location: UnsafeMutablePointer<CChar>?, answer: UnsafeMutablePointer<CChar>?, error: UnsafeMutablePointer<CChar>?
        let done = CGstShim_http_exchange(method, url, contentType, body, guint(max(1, timeoutSeconds)), &status, &location, &answer, &error) != 0
        let (said, reason) = (takeString(answer), takeString(error))
        let header = takeString(location)
        guard done else { throw GStreamerError(kind: .gError, message: reason ?? "no answer") }
        return HTTPExchange(status: Int(status), location: header, body: said ?? "")
    }
}
