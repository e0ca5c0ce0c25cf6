import Foundation
import GCaptureControl
import NIOCore
import NIOHTTP1

/// A request as the application sees it: read whole (bodies are small and bounded).
struct WebRequest: Sendable {
    var method: HTTPMethod
    /// The target's path, still percent-encoded: each component is decoded once, where it is used.
    var path: Substring
    var query: [String: String]
    var headers: HTTPHeaders
    var body: Data
    var peerIsLoopback: Bool

    init(head: HTTPRequestHead, body: Data, peerIsLoopback: Bool) {
        method = head.method
        headers = head.headers
        self.body = body
        self.peerIsLoopback = peerIsLoopback
        let uri = head.uri[...]
        if let mark = uri.firstIndex(of: "?") {
            path = uri[..<mark]
            query = Self.formFields(uri[uri.index(after: mark)...])
        } else {
            path = uri
            query = [:]
        }
    }

    /// `a=1&b=two` (application/x-www-form-urlencoded), decoded; the first of a repeated name wins.
    static func formFields(_ text: Substring) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? { part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(parts[0]), fields[name] == nil else { continue }
            fields[name] = parts.count > 1 ? decode(parts[1]) ?? "" : ""
        }
        return fields
    }

    /// The value of a cookie the request carries.
    func cookie(_ name: String) -> String? {
        for header in headers["cookie"] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == name { return String(parts[1]) }
            }
        }
        return nil
    }

    var acceptsHTML: Bool { headers["accept"].contains { $0.contains("text/html") } }
}

/// What the application answers; the connection handler writes it.
enum WebResponse: Sendable {
    /// A whole response.
    case full(HTTPResponseStatus, HTTPHeaders, ByteBuffer)
    /// A file from the media folders, opened (off the event loop) with the byte range to send.
    case file(FileToSend)
    /// The MJPEG live view: one more viewer of it.
    case liveView(LiveView)
    /// Server-Sent Events: the console's events, as they come.
    case events(AsyncStream<ControlEvent>)

    /// Referrer-Policy same-origin: no other site learns the page's address, and the page's own form posts
    /// (the gallery's zip download) carry its Origin, which is how the server tells them from another site's
    /// (no-referrer would make that Origin "null", refused like a stranger's).
    static let securityHeaders: [(String, String)] = [
        ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "same-origin"), ("X-Frame-Options", "DENY"),
    ]

    static func bytes(_ status: HTTPResponseStatus, _ body: Data, type: String, extra: [(String, String)] = []) -> WebResponse {
        var headers = HTTPHeaders(securityHeaders)
        headers.add(name: "Content-Type", value: type)
        headers.add(contentsOf: extra)
        if !extra.contains(where: { $0.0.lowercased() == "cache-control" }) { headers.add(name: "Cache-Control", value: "no-store") }
        return .full(status, headers, ByteBuffer(bytes: body))
    }

    static func json(_ status: HTTPResponseStatus, _ object: Any) -> WebResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return bytes(status, data, type: "application/json")
    }

    /// An error a person or a program can read: what is wrong, never a path of the machine or a stack.
    static func error(_ status: HTTPResponseStatus, _ message: String) -> WebResponse {
        json(status, ["ok": false, "error": message])
    }

    static func redirect(to location: String, extra: [(String, String)] = []) -> WebResponse {
        bytes(.seeOther, Data(), type: "text/plain", extra: [("Location", location)] + extra)
    }
}

/// A media file to send: its descriptor (owned; closed once sent) and the bytes asked for.
struct FileToSend: Sendable {
    var handle: NIOFileHandle
    var range: ClosedRange<Int>?
    var size: Int
    var contentType: String
    var downloadName: String?
}
