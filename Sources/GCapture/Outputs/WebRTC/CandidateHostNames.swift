import Dispatch
import Foundation
import GCaptureSupport
#if canImport(Glibc)
import Glibc
#endif

/// ICE candidates that name their address by a host name rather than an IP address: what browsers send for
/// privacy (an mDNS name, "….local", Chromium's, Firefox's and Safari's default) and what a WHIP server may.
///
/// GStreamer 1.22's webrtcbin resolves such a name itself, but the task it resolves with keeps its ICE agent
/// alive for good: the agent's two threads and about 300 KB stay behind every connection that ends (measured:
/// 400 viewers of `gcapture serve`, 800 threads and +117 MB; a plain C program with webrtcbin alone leaks the
/// same, and none with IP addresses). So the other side's description reaches webrtcbin with every name
/// already resolved here, as webrtcbin would have resolved it (getaddrinfo, so mDNS where the system resolves
/// it), and the candidates whose names do not resolve in time left out: webrtcbin could not have used them
/// either, and the other side's connectivity checks still find this one (peer-reflexive candidates).
enum CandidateHostNames {
    /// `sdp` with each candidate's host name replaced by the address it resolves to (IPv4 first), or the
    /// candidate left out when it does not resolve within `limit` (or comes after `maximumNames` others); lines
    /// end in CRLF. Blocks up to `limit`.
    static func resolved(in sdp: String, within limit: Duration) -> String {
        // "\r\n" is one Character to Swift: lines are split at either ending and joined again as SDP writes them.
        let lines = sdp.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).map(String.init)
        var names: [String] = []
        for name in lines.compactMap(hostName) where !names.contains(name) && names.count < maximumNames { names.append(name) }
        guard !names.isEmpty else { return sdp }
        let addresses = resolve(names, within: limit)
        return lines.compactMap { line -> String? in
            guard let name = hostName(in: line) else { return line }
            guard let address = addresses[name] else { return nil }
            var fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            fields[Self.addressField] = address
            return fields.joined(separator: " ")
        }.joined(separator: "\r\n")
    }

    /// The most names one description has resolved (a browser sends one or two per network): each takes a
    /// thread for as long as its lookup lasts, and an offer could otherwise list hundreds. Further names'
    /// candidates are left out.
    static let maximumNames = 16

    /// In "a=candidate:foundation component transport priority ADDRESS port typ …" (RFC 8839), the fifth field.
    private static let addressField = 4

    /// The candidate's address when `line` is a candidate whose address is not an IP address.
    static func hostName(in line: String) -> String? {
        guard line.hasPrefix("a=candidate:") else { return nil }
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count > addressField else { return nil }
        let address = String(fields[addressField])
        return isIPAddress(address) ? nil : address
    }

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// Each name's address, those resolved within `limit` (at once: each on a thread of its own, since
    /// getaddrinfo cannot be cancelled; a late one finishes unheard).
    private static func resolve(_ names: [String], within limit: Duration) -> [String: String] {
        let found = Locked<[String: String]>([:])
        let group = DispatchGroup()
        for name in names {
            group.enter()
            DispatchQueue.global().async {
                if let address = address(of: name) { found.withLock { $0[name] = address } }
                group.leave()
            }
        }
        _ = group.wait(timeout: .now() + limit.dispatchInterval)
        return found.withLock { $0 }
    }

    /// The first IPv4 address `name` resolves to, else its first IPv6 address.
    static func address(of name: String) -> String? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0 else { return nil }
        defer { freeaddrinfo(list) }
        var addresses: [(family: Int32, text: String)] = []
        var cursor = list
        while let info = cursor {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(info.pointee.ai_addr, info.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let length = text.firstIndex(of: 0) ?? text.count
                addresses.append((info.pointee.ai_family, String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)))
            }
            cursor = info.pointee.ai_next
        }
        return (addresses.first { $0.family == AF_INET } ?? addresses.first)?.text
    }
}
