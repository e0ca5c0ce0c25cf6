import Foundation
import XCTest

/// A plain HTTP/1.1 client on a socket, for the web page's tests: it sends exactly the bytes a test writes
/// (a traversal spelt as an attacker spells it, an oversized header), and every read has a deadline.
struct HTTPAnswer {
    var status: Int
    /// Header names in lower case.
    var headers: [String: String]
    var body: Data
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
}

final class HTTPTestConnection: Sendable {
    let socket: Int32

    init(port: Int, timeout: TimeInterval = 10) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw CheckFailed(description: "socket: \(errno)") }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(socket); throw CheckFailed(description: "cannot connect to port \(port): errno \(errno)") }
    }

    deinit { close(socket) }

    func send(_ text: String) { send(Data(text.utf8)) }

    func send(_ data: Data) {
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let sent = Glibc.send(socket, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if sent <= 0 { return }
                offset += sent
            }
        }
    }

    /// What arrives within `seconds` (or until the server closes the connection).
    func read(for seconds: TimeInterval, until done: (Data) -> Bool = { _ in false }) -> Data {
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, !done(received) {
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let left = max(1, Int32(deadline.timeIntervalSinceNow * 1000))
            guard poll(&poller, 1, min(left, 200)) >= 0 else { break }
            if poller.revents == 0 { continue }
            let count = recv(socket, &chunk, chunk.count, 0)
            if count <= 0 { break }
            received.append(contentsOf: chunk[0..<count])
        }
        return received
    }

    /// Whether the server has closed the connection (what it sent before has been read).
    var isClosedByServer: Bool {
        var byte: UInt8 = 0
        let peeked = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// What arrives on each of `connections` within `seconds`, read side by side (poll on them all).
    static func readAll(_ connections: [HTTPTestConnection], for seconds: TimeInterval) -> [Data] {
        var received = Array(repeating: Data(), count: connections.count)
        var open = Set(connections.indices)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, !open.isEmpty {
            let indices = open.sorted()
            var pollers = indices.map { pollfd(fd: connections[$0].socket, events: Int16(POLLIN), revents: 0) }
            guard poll(&pollers, nfds_t(pollers.count), 100) >= 0 else { break }
            for (slot, poller) in pollers.enumerated() where poller.revents != 0 {
                let count = recv(poller.fd, &chunk, chunk.count, 0)
                if count <= 0 { open.remove(indices[slot]) } else { received[indices[slot]].append(contentsOf: chunk[0..<count]) }
            }
        }
        return received
    }

    /// One whole answer: the head, then a body of Content-Length bytes, or chunked, or up to the close.
    func readAnswer(timeout: TimeInterval = 15) throws -> HTTPAnswer {
        let data = read(for: timeout) { Self.parse($0) != nil }
        guard let answer = Self.parse(data) ?? Self.parse(data, closed: true) else {
            throw CheckFailed(description: "no whole HTTP answer within \(timeout) s: \(String(decoding: data.prefix(300), as: UTF8.self))")
        }
        return answer
    }

    static func parse(_ data: Data, closed: Bool = false) -> HTTPAnswer? {
        guard let end = data.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        let headLines = String(decoding: data[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        guard let statusLine = headLines.first, statusLine.hasPrefix("HTTP/1."),
              let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else { return nil }
        var headers: [String: String] = [:]
        for line in headLines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let body = data[end.upperBound...]
        if let length = headers["content-length"].flatMap(Int.init) {
            guard body.count >= length else { return nil }
            return HTTPAnswer(status: status, headers: headers, body: Data(body.prefix(length)))
        }
        if headers["transfer-encoding"] == "chunked" {
            guard let (decoded, complete) = dechunk(Data(body)), complete || closed else { return nil }
            return HTTPAnswer(status: status, headers: headers, body: decoded)
        }
        return closed ? HTTPAnswer(status: status, headers: headers, body: Data(body)) : nil
    }

    /// A chunked body decoded as far as it has come; complete once the last (empty) chunk is there.
    static func dechunk(_ data: Data) -> (Data, Bool)? {
        var decoded = Data()
        var index = data.startIndex
        while let lineEnd = data[index...].range(of: Data("\r\n".utf8)) {
            let sizeText = String(decoding: data[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return nil }
            if size == 0 { return (decoded, true) }
            let start = lineEnd.upperBound
            guard data.distance(from: start, to: data.endIndex) >= size + 2 else {
                decoded.append(data[start..<min(data.endIndex, data.index(start, offsetBy: size))])
                return (decoded, false)
            }
            decoded.append(data[start..<data.index(start, offsetBy: size)])
            index = data.index(start, offsetBy: size + 2)
        }
        return (decoded, false)
    }
}

/// The JPEG parts of an MJPEG body (multipart/x-mixed-replace), in order.
func mjpegParts(_ body: Data) -> [Data] {
    var parts: [Data] = []
    var index = body.startIndex
    let marker = Data("Content-Length: ".utf8)
    while let found = body[index...].range(of: marker), let lineEnd = body[found.upperBound...].range(of: Data("\r\n\r\n".utf8)) {
        guard let length = Int(String(decoding: body[found.upperBound..<lineEnd.lowerBound], as: UTF8.self)),
              body.distance(from: lineEnd.upperBound, to: body.endIndex) >= length else { break }
        parts.append(Data(body[lineEnd.upperBound..<body.index(lineEnd.upperBound, offsetBy: length)]))
        index = body.index(lineEnd.upperBound, offsetBy: length)
    }
    return parts
}

extension XCTestCase {
    /// One request on a new connection, its answer.
    func http(_ port: Int, _ method: String = "GET", _ target: String, headers: [String: String] = [:], body: String? = nil,
              timeout: TimeInterval = 15) throws -> HTTPAnswer {
        let connection = try HTTPTestConnection(port: port)
        var request = "\(method) \(target) HTTP/1.1\r\nConnection: close\r\n"
        if !headers.keys.contains(where: { $0.lowercased() == "host" }) { request += "Host: 127.0.0.1:\(port)\r\n" }
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        if let body { request += "Content-Length: \(body.utf8.count)\r\n" }
        request += "\r\n" + (body ?? "")
        connection.send(request)
        return try connection.readAnswer(timeout: timeout)
    }

    func command(_ port: Int, _ json: String, headers: [String: String] = [:], timeout: TimeInterval = 60) throws -> HTTPAnswer {
        try http(port, "POST", "/api/command", headers: ["Content-Type": "application/json"].merging(headers) { $1 }, body: json,
                 timeout: timeout)
    }

    /// The mean luma of a frame of `camera`'s MJPEG live view (the last of 2 s, past any start-up frame), as
    /// ffmpeg decodes it; nil when no frame came.
    func liveFrameLuma(port: Int, camera: String) throws -> UInt8? {
        let viewer = try HTTPTestConnection(port: port)
        viewer.send("GET /live.mjpg?camera=\(camera) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        let data = HTTPTestConnection.readAll([viewer], for: 2)[0]
        guard let head = data.range(of: Data("\r\n\r\n".utf8)), let (body, _) = HTTPTestConnection.dechunk(Data(data[head.upperBound...])),
              let frame = mjpegParts(body).last else { return nil }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID()).jpg")
        defer { try? FileManager.default.removeItem(at: url) }
        try frame.write(to: url)
        return try frameLumas(url).first
    }
}
