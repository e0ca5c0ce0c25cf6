/// What counts as this machine's own name for a server without a token: exactly `localhost`, a literal IPv4
/// address in 127.0.0.0/8 or `::1` (`[::1]` in a URL), each with or without a port. Nothing that merely
/// begins like one: a DNS-rebinding page reaches 127.0.0.1 under a name of its own, and the browser then
/// sends that name (`127.0.0.1.evil.example`, `127.0.0.1evil.example`, `[::1].evil`) as the Host.
enum LoopbackName {
    /// An address to listen on, or a peer's: `localhost`, `127.x.y.z`, `::1` or `[::1]`.
    static func isLoopbackAddress(_ host: String) -> Bool {
        let lowered = host.lowercased()
        return lowered == "localhost" || lowered == "::1" || lowered == "[::1]" || isLoopbackIPv4(lowered)
    }

    /// A Host header: a loopback name (`[::1]` in brackets), then nothing or `:PORT`.
    static func isLoopbackAuthority(_ authority: String) -> Bool {
        let lowered = authority.lowercased()
        let name: Substring, rest: Substring
        if lowered.hasPrefix("[") {
            guard let close = lowered.firstIndex(of: "]") else { return false }
            name = lowered[...close]
            rest = lowered[lowered.index(after: close)...]
        } else if let colon = lowered.firstIndex(of: ":") {
            name = lowered[..<colon]
            rest = lowered[colon...]
        } else {
            name = lowered[...]
            rest = ""
        }
        guard name == "localhost" || name == "[::1]" || isLoopbackIPv4(name) else { return false }
        return rest.isEmpty || isPort(rest.dropFirst()) && rest.first == ":"
    }

    /// An Origin header: `http://` or `https://`, a loopback authority, and nothing after it.
    static func isLoopbackOrigin(_ origin: String) -> Bool {
        let lowered = origin.lowercased()
        for scheme in ["http://", "https://"] where lowered.hasPrefix(scheme) {
            return isLoopbackAuthority(String(lowered.dropFirst(scheme.count)))
        }
        return false
    }

    /// Four decimal numbers from 0 to 255 without leading zeros (which some resolvers read as octal), the first 127.
    private static func isLoopbackIPv4<S: StringProtocol>(_ text: S) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && (part == "0" || part.first != "0")
                && Int(part)! <= 255
        }
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy(\.isASCIIDigit) && Int(text)! <= 65_535
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
