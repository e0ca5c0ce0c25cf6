import Foundation
import GCaptureSupport
@testable import GCaptureWeb
import GStreamerKit
import XCTest

/// `gcapture serve` on a kiosk's network, as an attacker on it (or a page in the kiosk's own browser) tries
/// it: another name for 127.0.0.1 (DNS rebinding), sockets that never finish a request, files the gallery
/// does not list, and slow work that must not hold the other requests. Against the built CLI, from a plain
/// socket; the rebinding also from headless Chromium.
final class ServeExposureTests: XCTestCase {
    static let browserScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/rebinding.py")

    func startServe(folder: URL, _ extra: [String] = []) throws -> (LaunchedCommand, Int) {
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", "320x240"] + extra)
        guard serve.waitForEvent("listening", timeout: 30), let port = serve.events("listening").first?["port"] as? Int else {
            throw CheckFailed(description: "gcapture serve did not start listening: \(serve.errorOutput)")
        }
        return (serve, port)
    }

    /// Host names that only begin like this machine's, as a rebinding page's browser sends them.
    static func impostorHosts(port: Int) -> [String] {
        ["127.0.0.1.evil.example", "127.0.0.1.evil.example:\(port)", "127.0.0.1evil.example", "[::1].evil", "[::1].evil:\(port)",
         "[::1]evil", "localhost.evil.example", "localhost.", "localhostx", "127.0.0.1:\(port).evil.example", "127.0.0.1:\(port)x",
         "127.0.0.1:", "127.1", "0177.0.0.1", "127.0.0.256", "127.0.0.1.", "2130706433", "[::ffff:127.0.0.1]", "evil.example",
         "127.0.0.1@evil.example", "127.0.0.1 evil.example"]
    }

    func testWithoutATokenOnlyExactLoopbackNamesAndOriginsAreAnswered() throws {
        let folder = try temporaryFolder()
        try makeJPEG(at: folder.appendingPathComponent("shot.jpg"))
        let (serve, port) = try startServe(folder: folder)

        for host in Self.impostorHosts(port: port) {
            for target in ["/api/status", "/api/gallery", "/media/0/shot.jpg", "/thumbs/0/shot.jpg", "/"] {
                let answer = try http(port, "GET", target, headers: ["Host": host])
                // 400 where NIO's parser refuses the header itself (a blank in it).
                XCTAssertTrue([403, 400].contains(answer.status), "Host: \(host) \(target) was answered: \(answer.text.prefix(200))")
            }
            let live = try HTTPTestConnection(port: port)
            live.send("GET /live.mjpg HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            XCTAssertTrue([403, 400].contains(try live.readAnswer(timeout: 5).status), "Host: \(host) /live.mjpg")
            let photo = try command(port, #"{"command": "photo"}"#, headers: ["Host": host])
            XCTAssertTrue([403, 400].contains(photo.status), "Host: \(host) took a photo")
        }
        let twoHosts = try HTTPTestConnection(port: port)
        twoHosts.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        XCTAssertNotEqual(try twoHosts.readAnswer(timeout: 5).status, 200, "two Host headers")

        // A page elsewhere asking (its Origin) is refused even when the Host is right.
        for origin in ["http://127.0.0.1.evil.example:\(port)", "http://evil.example", "null", "http://[::1].evil",
                       "file://", "http://localhost.evil.example:\(port)"] {
            let status = try http(port, "GET", "/api/status", headers: ["Origin": origin])
            XCTAssertEqual(status.status, 403, "Origin: \(origin)")
            XCTAssertEqual(try command(port, #"{"command": "help"}"#, headers: ["Origin": origin]).status, 403, "Origin: \(origin)")
        }

        // This machine's own names, with and without the port, in any case.
        for host in ["127.0.0.1", "127.0.0.1:\(port)", "127.0.0.2:\(port)", "127.255.255.254", "localhost", "LocalHost:\(port)",
                     "[::1]", "[::1]:\(port)"] {
            XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Host": host]).status, 200, "Host: \(host)")
        }
        let own = try command(port, #"{"command": "help"}"#, headers: ["Host": "localhost:\(port)", "Origin": "http://localhost:\(port)"])
        XCTAssertEqual(own.status, 200, own.text)
        XCTAssertEqual(serve.events("photo").count, 0, "no photo was taken by a refused request")
    }

    func testNamesOfThisMachineAreMatchedExactly() {
        for name in ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "LOCALHOST"] {
            XCTAssertTrue(LoopbackName.isLoopbackAddress(name), name)
        }
        for name in ["127.0.0.1.evil", "127.0.0.1evil", "[::1].evil", "127.", "127.0.0", "128.0.0.1", "0.0.0.0", "::", "127.0.0.01", ""] {
            XCTAssertFalse(LoopbackName.isLoopbackAddress(name), name)
            XCTAssertFalse(WebServerConfiguration(host: name, folders: []).requiresToken == false, "\(name) needs a token")
        }
        for origin in ["http://localhost", "https://127.0.0.1:8443", "http://[::1]:80"] { XCTAssertTrue(LoopbackName.isLoopbackOrigin(origin), origin) }
        for origin in ["http://localhost/", "ftp://localhost", "http://localhost:99999", "http://localhost:80:80", "localhost"] {
            XCTAssertFalse(LoopbackName.isLoopbackOrigin(origin), origin)
        }
    }

    /// Forty sockets that trickle a request's head a byte at a time (a slow-loris) take every slot of the
    /// old server; a real request is answered within a second all the same, and each trickler is closed.
    func testSocketsThatNeverFinishARequestLockNobodyOut() throws {
        let (serve, port) = try startServe(folder: try temporaryFolder())
        let tricklers = try (0..<40).map { _ in try HTTPTestConnection(port: port, timeout: 5) }
        let trickling = DispatchGroup()
        let stop = Locked(false)
        DispatchQueue.global().async(group: trickling) {
            let head = Array("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
            var index = 0
            while !stop.withLock({ $0 }) {
                for trickler in tricklers { trickler.send(Data([head[min(index, head.count - 1)]])) }
                index += 1
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
        defer { stop.withLock { $0 = true }; _ = trickling.wait(timeout: .now() + 5) }
        Thread.sleep(forTimeInterval: 1)
        for round in 0..<4 {
            let started = Date()
            let answer = try http(port, "GET", "/api/status", timeout: 5)
            let took = Date().timeIntervalSince(started)
            XCTAssertEqual(answer.status, 200, "round \(round): \(answer.text.prefix(200))")
            XCTAssertLessThan(took, 1, "round \(round): a real request waited \(took) s behind the tricklers")
            Thread.sleep(forTimeInterval: 0.7)
        }
        XCTAssertTrue(serve.process.isRunning)

        // A lone trickler, with no newcomer to push it out, is closed once its request deadline (10 s) passes.
        stop.withLock { $0 = true }
        _ = trickling.wait(timeout: .now() + 5)
        let lone = try HTTPTestConnection(port: port, timeout: 20)
        let opened = Date()
        var closedAfter: TimeInterval?
        for byte in "GET / HTTP/1.1\r\nX-Slow: ".utf8.cycled(upTo: 30) {
            lone.send(Data([byte]))
            if lone.read(for: 0.5).isEmpty, lone.isClosedByServer { closedAfter = Date().timeIntervalSince(opened); break }
        }
        let after = try XCTUnwrap(closedAfter, "a socket that never finished its request was still open after 15 s")
        XCTAssertGreaterThan(after, 8, "closed before its deadline")
        XCTAssertLessThan(after, 13)
    }

    func testThumbnailsAreMadeOnlyForWhatTheGalleryLists() throws {
        let folder = try temporaryFolder()
        try makeJPEG(at: folder.appendingPathComponent("real.jpg"))
        try makeJPEG(at: folder.appendingPathComponent("picture.png"))
        try Data("not a picture".utf8).write(to: folder.appendingPathComponent("notes.txt"))
        try makeJPEG(at: folder.appendingPathComponent("noextension"))
        let (_, port) = try startServe(folder: folder)

        let listed = try XCTUnwrap(try http(port, "GET", "/api/gallery").json?["items"] as? [[String: Any]])
        XCTAssertEqual(listed.compactMap { $0["name"] as? String }, ["real.jpg"])
        XCTAssertEqual(try http(port, "GET", "/thumbs/0/real.jpg").status, 200)
        for name in ["picture.png", "notes.txt", "noextension", "missing.jpg", "missing.mp4"] {
            let thumbnail = try http(port, "GET", "/thumbs/0/\(name)")
            let media = try http(port, "GET", "/media/0/\(name)")
            XCTAssertEqual(thumbnail.status, 404, "/thumbs/0/\(name) answered \(thumbnail.status) (\(thumbnail.headers["content-type"] ?? ""))")
            XCTAssertEqual(media.status, 404, name)
            XCTAssertEqual(thumbnail.text, media.text, "\(name): the thumbnail's answer tells what the file's does not")
        }
    }

    /// Decoding thumbnails of large photos takes a core for a while each (a progressive 33-megapixel JPEG of
    /// noise: about 0.9 s here); the page's other requests are answered meanwhile (they would wait behind
    /// them on Swift's two-thread cooperative pool).
    func testSlowThumbnailsDoNotHoldTheOtherRequests() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/jpegtran") else {
            throw TestEnvironment.missing("jpegtran is not installed (apt install libjpeg-turbo-progs, or bash scripts/install-deps.sh)")
        }
        let folder = try temporaryFolder()
        let baseline = folder.appendingPathComponent(".baseline.jpg"), big = folder.appendingPathComponent("big-0.jpg")
        try makeJPEG(at: baseline, width: 7680, height: 4320, pattern: "snow", quality: 100)
        let progressive = try runTool("/usr/bin/jpegtran", ["-progressive", "-outfile", big.path, baseline.path], timeout: 60)
        XCTAssertEqual(progressive.status, 0, progressive.stderr)
        try FileManager.default.removeItem(at: baseline)
        for index in 1..<8 { try FileManager.default.linkItem(at: big, to: folder.appendingPathComponent("big-\(index).jpg")) }
        let (_, port) = try startServe(folder: folder)
        XCTAssertEqual(try http(port, "GET", "/api/status").status, 200)

        let thumbnails = DispatchGroup()
        let statuses = Locked<[Int]>([])
        for index in 0..<8 {
            DispatchQueue.global().async(group: thumbnails) {
                let connection = try? HTTPTestConnection(port: port, timeout: 60)
                connection?.send("GET /thumbs/0/big-\(index).jpg HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                let status = (try? connection?.readAnswer(timeout: 60).status) ?? 0
                statuses.withLock { $0.append(status) }
            }
        }
        Thread.sleep(forTimeInterval: 0.3)
        var slowest: TimeInterval = 0
        for _ in 0..<5 {
            let started = Date()
            XCTAssertEqual(try http(port, "GET", "/api/status", timeout: 30).status, 200)
            slowest = max(slowest, Date().timeIntervalSince(started))
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertEqual(thumbnails.wait(timeout: .now() + 90), .success, "the thumbnails were not all made within 90 s")
        XCTAssertEqual(statuses.withLock { $0 }, Array(repeating: 200, count: 8))
        XCTAssertLessThan(slowest, 0.5, "a status request waited \(slowest) s behind thumbnail decoding")
    }

    /// A page served under another name than 127.0.0.1's own (the browser resolves it to 127.0.0.1, as a
    /// rebinding attacker's DNS would) gets nothing from the server; the same browser at localhost does.
    func testABrowserThatReachesTheServerUnderAnotherNameGetsNothing() throws {
        for part in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: part) {
            throw TestEnvironment.missing("\(part) is not installed (apt install chromium chromium-driver, or bash scripts/install-deps.sh)")
        }
        guard (try? runTool("/usr/bin/python3", ["-c", "import selenium"]).status) == 0 else {
            throw TestEnvironment.missing("Selenium is not installed for /usr/bin/python3 (apt install python3-selenium)")
        }
        let (serve, port) = try startServe(folder: try temporaryFolder())
        let browser = try runTool("/usr/bin/python3", [Self.browserScript.path, String(port)], timeout: 120)
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        let findings = browser.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(findings.compactMap { $0["check"] as? String }, ["refused under 127.0.0.1.rebind.example", "refused under 127.0.0.1rebind.example",
                                                                         "served at localhost"])
        XCTAssertEqual(serve.events("photo").count, 0, "the rebinding page took a photo")
    }
}

extension XCTestCase {
    /// A real JPEG made by GStreamer's jpegenc at `url`.
    func makeJPEG(at url: URL, width: Int = 64, height: Int = 48, pattern: String = "smpte", quality: Int = 85) throws {
        let made = try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=1", "pattern=\(pattern)", "!",
                                                           "video/x-raw,width=\(width),height=\(height)", "!", "jpegenc", "quality=\(quality)",
                                                           "!", "filesink", "location=\(url.path)"], timeout: 60)
        guard made.status == 0 else { throw CheckFailed(description: "gst-launch-1.0 made no JPEG: \(made.stderr)") }
    }
}

private extension Sequence {
    /// The elements over and over, `count` of them in all.
    func cycled(upTo count: Int) -> [Element] {
        let all = Array(self)
        return (0..<count).map { all[$0 % all.count] }
    }
}
