import Foundation

/// Where the web page listens, who may use it and how much it accepts.
public struct WebServerConfiguration: Sendable {
    /// The address to listen on: a loopback address unless the operator says otherwise.
    public var host: String
    public var port: Int
    /// The access token. Required for any address other than loopback (`requiresToken`): without one, anyone
    /// on the network could watch and command the camera.
    public var token: String?
    /// The certificate and key to serve HTTPS with; nil: plain HTTP, where the token and the pictures
    /// cross the network readable by anyone on it.
    public var tls: WebTLSIdentity?
    /// The folders whose photos and movies the gallery shows and serves; nothing outside them is served.
    public var folders: [URL]
    /// Whether a movie (its name, its folder) is a timelapse, marked so in the gallery.
    public var isTimelapse: @Sendable (_ name: String, _ folder: URL) -> Bool = { _, _ in false }
    /// Connections open at once. When all are taken, a newcomer pushes out the connection that has waited
    /// longest without a whole request; only while every one is being answered is it answered 503 and
    /// closed, so that a flood cannot starve the capture and slow senders cannot lock the page.
    public var maxConnections = 32
    /// Live-view and event-stream watchers at once.
    public var maxViewers = 16
    /// The largest request body (commands are a few dozen bytes).
    public var maxBodyBytes = 16_384
    /// The longest request target.
    public var maxTargetBytes = 4_096
    /// How long a connection may take to send a whole request (head and body), counted from its opening or
    /// from its previous answer; then it is closed (nginx's client_header_timeout). Streams are not timed.
    public var requestTimeout: Duration = .seconds(10)

    public init(host: String = "127.0.0.1", port: Int = 8080, token: String? = nil, folders: [URL]) {
        self.host = host
        self.port = port
        self.token = token
        self.folders = folders
    }

    /// "https" with a certificate, else "http".
    public var scheme: String { tls == nil ? "http" : "https" }

    /// True for an address other machines can reach: the server then refuses to start without a token.
    public var requiresToken: Bool { !Self.isLoopback(host) }

    /// Exactly `localhost`, a literal 127.x.y.z, `::1` or `[::1]` (see `LoopbackName`).
    public static func isLoopback(_ host: String) -> Bool { LoopbackName.isLoopbackAddress(host) }

    /// A new random token: 128 bits as 32 hexadecimal digits.
    public static func makeToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// "ADDR:PORT", "[v6]:PORT" or ":PORT" (every address) as a host and a port; nil with the reason.
    public static func parseListenAddress(_ text: String) -> Result<(host: String, port: Int), ListenAddressError> {
        guard let colon = text.lastIndex(of: ":") else {
            return .failure(ListenAddressError("\(text) has no port: write ADDR:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080"))
        }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        guard let port = Int(portText), (0...65_535).contains(port) else {
            return .failure(ListenAddressError("\(text): the port \"\(portText)\" is not a number from 0 to 65535 (0: any free port)"))
        }
        if host.hasPrefix("[") {
            guard host.hasSuffix("]") else { return .failure(ListenAddressError("\(text): the IPv6 address has no closing ]")) }
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            return .failure(ListenAddressError("\(text): write an IPv6 address in brackets, e.g. [::1]:8080"))
        }
        if host.isEmpty { host = "0.0.0.0" }
        return .success((host, port))
    }

    public struct ListenAddressError: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
