import Foundation
import XCTest

/// `gcapture serve` as a browser and an attacker use it, through a plain socket client: the commands, the
/// gallery, the live view, the events, and everything it must refuse without disturbing the capture.
final class ServeCommandTests: XCTestCase {
    /// A running `gcapture serve` on a free port of 127.0.0.1, with the test camera, saving into `folder`.
    func startServe(_ extra: [String] = [], folder: URL, listen: String = "127.0.0.1:0", liveSize: String = "640x360") throws -> (LaunchedCommand, Int) {
        let serve = try launch("gcapture", ["serve", "--listen", listen, "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", liveSize] + extra)
        guard serve.waitForEvent("listening", timeout: 30), let port = serve.events("listening").first?["port"] as? Int else {
            throw CheckFailed(description: "gcapture serve did not start listening: \(serve.errorOutput)")
        }
        return (serve, port)
    }

    func testAPhotoAndARecordingFromTheAPIAreInTheGalleryNewestFirstAndPlay() throws {
        let folder = try temporaryFolder()
        let (_, port) = try startServe(folder: folder)

        let photo = try command(port, #"{"command": "photo"}"#)
        XCTAssertEqual(photo.status, 200, photo.text)
        let photoPath = try XCTUnwrap(photo.json?["path"] as? String)
        XCTAssertEqual(URL(fileURLWithPath: photoPath).deletingLastPathComponent().standardizedFileURL.path, folder.standardizedFileURL.path)

        let start = try command(port, #"{"id": 7, "command": "record", "action": "start"}"#)
        XCTAssertEqual(start.status, 200, start.text)
        XCTAssertEqual(start.json?["id"] as? Int, 7, "the reply carries the request's id")
        Thread.sleep(forTimeInterval: 2)
        let stop = try command(port, #"{"command": "record", "action": "stop"}"#)
        XCTAssertEqual(stop.status, 200, stop.text)
        let moviePath = try XCTUnwrap(stop.json?["path"] as? String)

        let gallery = try http(port, "GET", "/api/gallery")
        XCTAssertEqual(gallery.status, 200)
        let items = try XCTUnwrap(gallery.json?["items"] as? [[String: Any]])
        XCTAssertEqual(items.map { $0["name"] as? String }, [moviePath, photoPath].map { URL(fileURLWithPath: $0).lastPathComponent },
                       "newest first")
        XCTAssertEqual(items.map { $0["kind"] as? String }, ["movie", "photo"])

        // The thumbnail is small; the photo itself comes whole.
        let thumbnail = try http(port, "GET", try XCTUnwrap(items[1]["thumbnail"] as? String))
        XCTAssertEqual(thumbnail.status, 200)
        XCTAssertEqual(thumbnail.headers["content-type"], "image/jpeg")
        let thumbnailFile = folder.appendingPathComponent(".thumbnail-check.jpg")
        try thumbnail.body.write(to: thumbnailFile)
        let size = try XCTUnwrap(try probe(thumbnailFile, countFrames: false).videoSize)
        XCTAssertLessThanOrEqual(max(size.width, size.height), 240, "a thumbnail, not the photo")
        XCTAssertLessThan(thumbnail.body.count, 40_000)
        XCTAssertGreaterThan(size.width, size.height, "the test camera's landscape photo")

        // A photo whose EXIF says it is shown turned a quarter gets an upright (portrait) thumbnail.
        let turned = folder.appendingPathComponent("turned.jpg")
        try FileManager.default.copyItem(atPath: photoPath, toPath: turned.path)
        XCTAssertEqual(try runTool("/usr/bin/exiftool", ["-q", "-overwrite_original", "-Orientation#=6", turned.path]).status, 0)
        let turnedThumbnail = try http(port, "GET", "/thumbs/0/turned.jpg")
        XCTAssertEqual(turnedThumbnail.status, 200)
        try turnedThumbnail.body.write(to: thumbnailFile)
        let turnedSize = try XCTUnwrap(try probe(thumbnailFile, countFrames: false).videoSize)
        XCTAssertLessThan(turnedSize.width, turnedSize.height, "turned as the EXIF says")
        let full = try http(port, "GET", try XCTUnwrap(items[1]["url"] as? String))
        XCTAssertEqual(full.body, try Data(contentsOf: URL(fileURLWithPath: photoPath)))

        let movieThumbnail = try http(port, "GET", try XCTUnwrap(items[0]["thumbnail"] as? String))
        XCTAssertEqual(movieThumbnail.headers["content-type"], "image/jpeg", "the movie's first frame, not an icon")
        try movieThumbnail.body.write(to: thumbnailFile)
        XCTAssertEqual(try probe(thumbnailFile, countFrames: false).videoSize?.width, 240)

        // The movie downloads whole (and by ranges, as a <video> element asks) and plays.
        let movieURL = try XCTUnwrap(items[0]["url"] as? String)
        let download = try http(port, "GET", movieURL + "?download=1")
        XCTAssertEqual(download.status, 200)
        XCTAssertTrue(download.headers["content-disposition"]?.hasPrefix("attachment") ?? false)
        let downloaded = folder.appendingPathComponent(".downloaded.mp4")
        try download.body.write(to: downloaded)
        let movie = try probe(downloaded)
        XCTAssertGreaterThan(movie.duration, 1.5)
        XCTAssertGreaterThan(movie.videoFrames ?? 0, 30)
        let range = try http(port, "GET", movieURL, headers: ["Range": "bytes=100-199"])
        XCTAssertEqual(range.status, 206)
        XCTAssertEqual(range.body, download.body[100..<200])
    }

    func testWhatABrowserMayNotAskIsRefusedWithAReason() throws {
        let folder = try temporaryFolder()
        let (serve, port) = try startServe(folder: folder)
        let elsewhere = try temporaryFolder().appendingPathComponent("x.jpg").path
        let withPath = try command(port, #"{"command": "photo", "path": "\#(elsewhere)"}"#)
        XCTAssertEqual(withPath.status, 422)
        XCTAssertTrue((withPath.json?["error"] as? String ?? "").contains("naming rule"), withPath.text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: elsewhere), "a browser must not write files anywhere")
        let quit = try command(port, #"{"command": "quit"}"#)
        XCTAssertEqual(quit.status, 422, quit.text)
        XCTAssertTrue(serve.process.isRunning, "quit over HTTP does not stop gcapture")
        let typo = try command(port, #"{"command": "phot"}"#)
        XCTAssertEqual(typo.status, 422)
        XCTAssertTrue((typo.json?["error"] as? String ?? "").contains("did you mean \"photo\""), typo.text)
        // Another site's form (text/plain needs no preflight) or script (its Origin) cannot command.
        let form = try http(port, "POST", "/api/command", headers: ["Content-Type": "text/plain"], body: #"{"command": "photo"}"#)
        XCTAssertEqual(form.status, 415)
        let otherSite = try command(port, #"{"command": "photo"}"#, headers: ["Origin": "http://evil.example"])
        XCTAssertEqual(otherSite.status, 403)
        // Nor by pointing its own name at 127.0.0.1 (DNS rebinding): without a token only loopback names answer.
        let rebound = try http(port, "GET", "/api/status", headers: ["Host": "evil.example:\(port)"])
        XCTAssertEqual(rebound.status, 403)
        XCTAssertEqual(try http(port, "GET", "/api/command").status, 405)
        XCTAssertEqual(try http(port, "GET", "/nothing").status, 404)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".jpg") }, [],
                       "no refused command took a photo")
    }

    func testTheLiveViewIsEncodedOnceHoweverManyWatch() throws {
        let (_, port) = try startServe(["--live-rate", "10"], folder: try temporaryFolder())
        func encoded() throws -> Int {
            let status = try http(port, "GET", "/api/status")
            return try XCTUnwrap((status.json?["liveView"] as? [String: Any])?["encodedFrames"] as? Int)
        }
        let viewers = try (0..<4).map { _ in try HTTPTestConnection(port: port) }
        for viewer in viewers { viewer.send("GET /live.mjpg HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n") }
        let before = try encoded()
        let bodies = HTTPTestConnection.readAll(viewers, for: 3)
        let after = try encoded()
        let parts = bodies.map { data -> [Data] in
            guard let head = data.range(of: Data("\r\n\r\n".utf8)), let (body, _) = HTTPTestConnection.dechunk(Data(data[head.upperBound...])) else { return [] }
            return mjpegParts(body)
        }
        for viewerParts in parts {
            XCTAssertGreaterThanOrEqual(viewerParts.count, 15, "about 10 frames a second for 3 s reach every viewer")
            XCTAssertTrue(viewerParts.allSatisfy { $0.starts(with: [0xFF, 0xD8]) && $0.suffix(2) == Data([0xFF, 0xD9]) }, "whole JPEGs")
        }
        let most = parts.map(\.count).max() ?? 0
        XCTAssertLessThan(after - before, most + most / 2, "\(after - before) frames encoded for 4 viewers of \(most): one encode per frame, not per viewer")
        // From the outside: the viewers got the same frames, byte for byte (the test camera's snow makes every
        // frame's JPEG different, so equal bytes are the same frame). The encoder is deterministic, so this alone
        // cannot tell one encode from four: testFourViewersCostTheServerTheCPUOfAboutOne measures that.
        let middle = Array(parts[0].dropFirst(3).dropLast(3))
        XCTAssertGreaterThan(Set(middle).count, middle.count * 9 / 10, "the frames differ, so equal bytes mean the same frame")
        for (index, viewerParts) in parts.enumerated().dropFirst() {
            let received = Set(viewerParts)
            let missing = middle.filter { !received.contains($0) }.count
            XCTAssertEqual(missing, 0, "viewer \(index) lacks \(missing) of the \(middle.count) frames viewer 0 got mid-stream")
        }
        let frame = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID()).jpg")
        defer { try? FileManager.default.removeItem(at: frame) }
        try XCTUnwrap(parts.first?.last).write(to: frame)
        let size = try XCTUnwrap(try probe(frame, countFrames: false).videoSize)
        XCTAssertEqual(size.width, 640)
        XCTAssertEqual(size.height, 360)
    }

    /// One encode however many watch, measured from outside the server: the serve process's CPU time
    /// (/proc/PID/stat utime+stime) per frame a viewer gets, with one viewer and with four, above what it
    /// costs with none (nothing is encoded then). Encoding for each viewer would make four viewers' extra cost
    /// per frame about four times one viewer's; one shared encode leaves it about the same (each viewer only
    /// adds the sending of bytes already made). A large, fast live view makes the encoding the bulk of it.
    func testFourViewersCostTheServerTheCPUOfAboutOne() throws {
        let (serve, port) = try startServe(["--live-rate", "30"], folder: try temporaryFolder(), liveSize: "1280x720")
        let pid = serve.process.processIdentifier
        Thread.sleep(forTimeInterval: 1)
        /// CPU seconds the serve process used while `work` ran, and for how long it ran.
        func cpu(during work: () -> Void) throws -> (cpu: Double, seconds: Double) {
            let (cpu0, start) = (try cpuSeconds(of: pid), Date())
            work()
            return (try cpuSeconds(of: pid) - cpu0, Date().timeIntervalSince(start))
        }
        /// The extra CPU seconds per frame `count` viewers cost, above `idle` CPU seconds a second, and the frames.
        func perFrame(viewers count: Int, above idle: Double) throws -> (cost: Double, frames: Int) {
            let viewers = try (0..<count).map { _ in try HTTPTestConnection(port: port) }
            for viewer in viewers { viewer.send("GET /live.mjpg HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n") }
            _ = HTTPTestConnection.readAll(viewers, for: 1)
            var bodies: [Data] = []
            let used = try cpu { bodies = HTTPTestConnection.readAll(viewers, for: 4) }
            // Whole JPEGs the viewers got in the window (Content-Length lines; the chunked framing cut anywhere).
            let marker = Data("Content-Type: image/jpeg".utf8)
            let frames = bodies.map { body in
                var count = 0, index = body.startIndex
                while let found = body[index...].range(of: marker) { count += 1; index = found.upperBound }
                return count
            }
            XCTAssertTrue(frames.allSatisfy { $0 >= 30 }, "every viewer gets frames (30 a second asked): \(frames) in \(used.seconds) s")
            return ((used.cpu - idle * used.seconds) / Double(max(frames.max() ?? 1, 1)), frames.max() ?? 0)
        }
        let idle = try cpu { Thread.sleep(forTimeInterval: 4) }
        let idleRate = idle.cpu / idle.seconds
        let one = try perFrame(viewers: 1, above: idleRate)
        let four = try perFrame(viewers: 4, above: idleRate)
        print("serve CPU: \(String(format: "%.0f", idleRate * 1000)) ms/s with no viewer; above that, "
              + "\(String(format: "%.2f", one.cost * 1000)) ms a frame with one viewer (\(one.frames) frames), "
              + "\(String(format: "%.2f", four.cost * 1000)) ms a frame with four (\(four.frames) frames)")
        XCTAssertGreaterThan(one.cost, 0, "one viewer costs something (the encode): the measurement sees it")
        XCTAssertLessThan(four.cost, one.cost * 2, "four viewers cost \(four.cost / one.cost)x one viewer's CPU a frame: encoded per viewer?")
    }

    /// utime + stime of a process, seconds, from /proc/PID/stat (fields 14 and 15, after the name's closing parenthesis).
    private func cpuSeconds(of pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        guard let close = stat.lastIndex(of: ")") else { throw CheckFailed(description: "/proc/\(pid)/stat: \(stat)") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3): utime is field 14, stime 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw CheckFailed(description: "/proc/\(pid)/stat: \(stat)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func testEventsReachThePageAsTheyHappen() throws {
        let (_, port) = try startServe(folder: try temporaryFolder())
        let events = try HTTPTestConnection(port: port)
        events.send("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n")
        let opened = events.read(for: 5) { String(decoding: $0, as: UTF8.self).contains("retry:") }
        XCTAssertTrue(String(decoding: opened, as: UTF8.self).contains("text/event-stream"))
        XCTAssertEqual(try command(port, #"{"command": "photo"}"#).status, 200)
        let received = events.read(for: 10) { String(decoding: $0, as: UTF8.self).contains("\"event\":\"photo\"") }
        let text = String(decoding: received, as: UTF8.self)
        XCTAssertTrue(text.contains("data: {"), text)
        XCTAssertTrue(text.contains("\"trigger\":\"web\""), text)
    }

    func testATokenGuardsEverythingButTheLoginPage() throws {
        let token = "correct-horse-battery"
        let (_, port) = try startServe(["--token", token], folder: try temporaryFolder())
        XCTAssertEqual(try http(port, "GET", "/api/status").status, 401)
        XCTAssertEqual(try http(port, "GET", "/live.mjpg").status, 401)
        XCTAssertEqual(try command(port, #"{"command": "photo"}"#).status, 401)
        let asked = Date()
        XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Authorization": "Bearer wrong-token-here"]).status, 401)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(asked), 0.9, "a wrong token is answered a second late: guessing is slow")
        XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Cookie": "gcapture_token=\(token)x"]).status, 401)
        let page = try http(port, "GET", "/", headers: ["Accept": "text/html"])
        XCTAssertEqual(page.status, 303)
        XCTAssertEqual(page.headers["location"], "/login")
        XCTAssertEqual(try http(port, "GET", "/login").status, 200)
        let wrong = try http(port, "POST", "/login", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=nope")
        XCTAssertEqual(wrong.status, 401)
        XCTAssertNil(wrong.headers["set-cookie"])
        let login = try http(port, "POST", "/login", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=\(token)")
        XCTAssertEqual(login.status, 303)
        let cookie = try XCTUnwrap(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        XCTAssertTrue(login.headers["set-cookie"]?.contains("HttpOnly") ?? false)
        XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Cookie": cookie]).status, 200)
        XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Authorization": "Bearer \(token)"]).status, 200)
        let link = try http(port, "GET", "/?token=\(token)")
        XCTAssertEqual(link.status, 303, "the printed link logs in and drops the token from the address")
        XCTAssertNotNil(link.headers["set-cookie"])
        XCTAssertEqual(try command(port, #"{"command": "photo"}"#, headers: ["Authorization": "Bearer \(token)"]).status, 200)
    }

    func testAnAddressOtherMachinesReachGetsATokenMadeAndPrinted() throws {
        let (serve, port) = try startServe(folder: try temporaryFolder(), listen: "0.0.0.0:0")
        XCTAssertEqual(serve.events("listening").first?["token"] as? Bool, true)
        let printed = try XCTUnwrap(serve.errorOutput.range(of: "access token is ").map { serve.errorOutput[$0.upperBound...].prefix(32) },
                                    serve.errorOutput)
        XCTAssertEqual(try http(port, "GET", "/api/status").status, 401)
        XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Authorization": "Bearer \(printed)"]).status, 200)
    }

    func testTraversalLinksOutAndOversizedRequestsAreRefusedAndTheCaptureGoesOn() throws {
        let folder = try temporaryFolder()
        let outside = try temporaryFolder()
        let secret = outside.appendingPathComponent("secret.jpg")
        try Data("not for the web".utf8).write(to: secret)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("link-out.jpg").path, withDestinationPath: secret.path)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("passwd.jpg").path, withDestinationPath: "/etc/passwd")
        let (serve, port) = try startServe(folder: folder)
        XCTAssertEqual(try command(port, #"{"command": "record", "action": "start"}"#).status, 200)

        let attempts = [
            "/media/0/../../etc/passwd", "/media/0/..%2F..%2Fetc%2Fpasswd", "/media/0/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
            "/media/0/%2E%2E/%2E%2E/etc/passwd", "/media/0/..%5c..%5cetc%5cpasswd", "/media/0/%252e%252e%252fetc%252fpasswd",
            "/media/0/..%c0%af..%c0%afetc%c0%afpasswd", "/media/0/%2e%2e", "/media/0/passwd%00.jpg", "/media/0/.%2e/secret.jpg",
            "/thumbs/0/..%2F..%2Fetc%2Fpasswd", "/media/0/link-out.jpg", "/thumbs/0/link-out.jpg", "/media/0/passwd.jpg",
            "/media/1/secret.jpg", "/media/-1/secret.jpg", "/media/0x0/secret.jpg", "/media//secret.jpg",
        ]
        for target in attempts {
            let answer = try http(port, "GET", target)
            XCTAssertTrue([400, 404].contains(answer.status), "\(target): \(answer.status)")
            XCTAssertFalse(answer.text.contains("root:") || answer.text.contains("not for the web"), "\(target) leaked a file")
            XCTAssertFalse(answer.text.contains(folder.path) || answer.text.contains("/etc") || answer.text.contains(outside.path),
                           "\(target): an error names a path: \(answer.text)")
        }

        let big = String(repeating: "x", count: 1_000_000)
        XCTAssertEqual(try http(port, "POST", "/api/command", headers: ["Content-Type": "application/json"], body: big).status, 413)
        XCTAssertEqual(try http(port, "GET", "/api/status?" + String(repeating: "a", count: 10_000)).status, 414)
        let hugeHeader = try http(port, "GET", "/api/status", headers: ["X-Filler": String(repeating: "h", count: 200_000)])
        XCTAssertEqual(hugeHeader.status, 400, "a 200 KB header")
        let garbage = try HTTPTestConnection(port: port)
        garbage.send("\u{01}\u{02} not http at all\r\n\r\n")
        XCTAssertEqual(try garbage.readAnswer().status, 400)

        // The capture went on through all of it.
        Thread.sleep(forTimeInterval: 1)
        let stop = try command(port, #"{"command": "record", "action": "stop"}"#)
        XCTAssertEqual(stop.status, 200, stop.text)
        let movie = try probe(URL(fileURLWithPath: try XCTUnwrap(stop.json?["path"] as? String)))
        XCTAssertGreaterThan(movie.duration, 1)
        XCTAssertTrue(serve.process.isRunning)
        XCTAssertEqual(serve.events("runtimeError").count, 0, serve.output)
    }

    func testFiftyConnectionsAtOnceAreBoundedAndTheCaptureGoesOn() throws {
        let (serve, port) = try startServe(folder: try temporaryFolder())
        XCTAssertEqual(try command(port, #"{"command": "record", "action": "start"}"#).status, 200)
        let flood = try (0..<50).map { _ in try HTTPTestConnection(port: port, timeout: 5) }
        // The server keeps 32: each newcomer over the limit pushes out the one that has waited longest
        // without a request, closed unanswered.
        let replies = HTTPTestConnection.readAll(flood, for: 1.5)
        XCTAssertEqual(replies.filter { !$0.isEmpty }.count, 0, "nothing is said unasked")
        let closed = flood.indices.filter { flood[$0].isClosedByServer }
        XCTAssertEqual(closed.count, 50 - 32, "connections over the limit of 32 are closed")
        XCTAssertTrue(closed.allSatisfy { $0 < 25 }, "the oldest went first: \(closed)")
        // Those kept still work.
        let kept = try XCTUnwrap(flood.last)
        kept.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        XCTAssertEqual(try kept.readAnswer().status, 200)
        // Once the flood ends a new visitor is served.
        flood.forEach { shutdown($0.socket, Int32(SHUT_RDWR)) }
        let deadline = Date().addingTimeInterval(5)
        var status = 0
        repeat {
            status = (try? http(port, "GET", "/api/status").status) ?? 0
        } while status != 200 && Date() < deadline
        XCTAssertEqual(status, 200)
        Thread.sleep(forTimeInterval: 1)
        let stop = try command(port, #"{"command": "record", "action": "stop"}"#)
        XCTAssertEqual(stop.status, 200, stop.text)
        let movie = try probe(URL(fileURLWithPath: try XCTUnwrap(stop.json?["path"] as? String)))
        XCTAssertGreaterThan(movie.duration, 1.5)
        XCTAssertEqual(serve.events("runtimeError").count, 0, serve.output)
    }

    /// While every one of the 32 slots is being answered (here: a wrong token, answered a second late), a
    /// newcomer is told at once that there are too many, and served once they are done.
    func testANewcomerIsRefusedOnlyWhileEverySlotIsAnswering() throws {
        let (_, port) = try startServe(["--token", "abcdefgh12"], folder: try temporaryFolder())
        let busy = try (0..<32).map { _ in try HTTPTestConnection(port: port, timeout: 5) }
        for connection in busy {
            connection.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrongwrong\r\n\r\n")
        }
        Thread.sleep(forTimeInterval: 0.3)
        let newcomer = try HTTPTestConnection(port: port)
        let refused = try newcomer.readAnswer(timeout: 2)
        XCTAssertEqual(refused.status, 503)
        XCTAssertTrue(refused.text.contains("too many connections"), refused.text)
        XCTAssertEqual(HTTPTestConnection.readAll(busy, for: 3).filter { $0.starts(with: Data("HTTP/1.1 401".utf8)) }.count, 32,
                       "every busy slot got its answer")
        XCTAssertEqual(try http(port, "GET", "/api/status", headers: ["Authorization": "Bearer abcdefgh12"]).status, 200)
    }
}

/// The same page beside a description file's set-up: `gcapture run FILE --http ADDR:PORT`.
final class RunHTTPTests: XCTestCase {
    /// `gcapture run` of a description in `folder` (the test camera at 640x480, no microphone, these
    /// `outputs`), its page on a free port of 127.0.0.1, once it listens.
    private func runDescribed(_ name: String, outputs: String, in folder: URL) throws -> (run: LaunchedCommand, description: URL, port: Int) {
        let description = folder.appendingPathComponent(name)
        try """
            version: 1
            camera:
              id: test
              preset: vga640x480
            microphone: none
            outputs:

            """.appending(outputs).write(to: description, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", description.path, "--http", "127.0.0.1:0", "--json", "--live-size", "320x240"],
                             writesStdin: true)
        XCTAssertTrue(run.waitForEvent("listening", timeout: 30), run.errorOutput)
        return (run, description, try XCTUnwrap(run.events("listening").first?["port"] as? Int))
    }

    func testADescribedSetUpServesThePageAndItsGalleryShowsBothFolders() throws {
        let (_, description, port) = try runDescribed("booth.yaml", outputs: """
              photo:
                folder: shots
              movie:
                folder: clips
                audio: false
            """, in: try temporaryFolder())
        XCTAssertEqual(try command(port, #"{"command": "photo"}"#).status, 200)
        XCTAssertEqual(try command(port, #"{"command": "record", "action": "start"}"#).status, 200)
        Thread.sleep(forTimeInterval: 1.5)
        let stop = try command(port, #"{"command": "record", "action": "stop"}"#)
        XCTAssertEqual(stop.status, 200, stop.text)
        XCTAssertTrue((stop.json?["path"] as? String ?? "").contains("/clips/"), stop.text)
        let items = try XCTUnwrap(try http(port, "GET", "/api/gallery").json?["items"] as? [[String: Any]])
        XCTAssertEqual(items.compactMap { $0["kind"] as? String }, ["movie", "photo"])
        XCTAssertEqual(Set(items.compactMap { ($0["url"] as? String)?.split(separator: "/")[1] }), ["1", "0"],
                       "the photo folder and the movie folder both reach the gallery")
        // The library's pages merge the two folders' libraries, newest first, a page at a time.
        let library = try XCTUnwrap(try http(port, "GET", "/api/library").json)
        XCTAssertEqual((library["items"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }, ["movie", "photo"], "\(library)")
        let second = try XCTUnwrap(try http(port, "GET", "/api/library?offset=1&limit=1").json)
        XCTAssertEqual((second["items"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }, ["photo"], "\(second)")
        XCTAssertEqual(second["total"] as? Int, 2)
        XCTAssertTrue(second["next"] is NSNull, "\(second)")
        // Without --http the options of the page make no sense, and say so.
        let lone = try runGCapture(["run", description.path, "--token", "abcdefgh12"], timeout: 10)
        XCTAssertEqual(lone.status, 64)
        XCTAssertTrue(lone.stderr.contains("--http"), lone.stderr)
    }
}

extension RunHTTPTests {
    /// A description's timelapse in `run`: told as recordingStarted/recordingFinished with `timelapse: true`
    /// (the movie that `record` makes without it), and listed in the gallery, from its own folder, marked so.
    func testTheTimelapseIsToldInTheEventsAndMarkedInTheGallery() throws {
        let folder = try temporaryFolder()
        let (run, _, port) = try runDescribed("sky.yaml", outputs: """
              movie:
                folder: clips
                audio: false
              timelapse:
                interval: 0.2
                folder: lapses
            """, in: folder)
        XCTAssertTrue(run.waitForEvent("recordingStarted"), "the timelapse was not told: \(run.output) \(run.errorOutput)")
        let lapse = folder.appendingPathComponent("lapses/timelapse-0001.mp4")
        let lapseStarted = try XCTUnwrap(run.events("recordingStarted").first)
        XCTAssertEqual(lapseStarted["path"] as? String, lapse.path)
        XCTAssertEqual(lapseStarted["timelapse"] as? Bool, true, "\(lapseStarted)")

        XCTAssertEqual(try command(port, #"{"command": "record", "action": "start"}"#).status, 200)
        Thread.sleep(forTimeInterval: 1.5)
        let stop = try command(port, #"{"command": "record", "action": "stop"}"#)
        XCTAssertEqual(stop.status, 200, stop.text)
        let clip = try XCTUnwrap(stop.json?["path"] as? String)
        let items = try XCTUnwrap(try http(port, "GET", "/api/gallery").json?["items"] as? [[String: Any]])
        let marked = Dictionary(uniqueKeysWithValues: items.compactMap { item in
            (item["name"] as? String).map { ($0, item["timelapse"] as? Bool) }
        })
        XCTAssertEqual(marked, [lapse.lastPathComponent: true, URL(fileURLWithPath: clip).lastPathComponent: false], "\(items)")

        run.send("quit")
        XCTAssertTrue(run.waitForExit(timeout: 30), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)
        let started = run.events("recordingStarted"), finished = run.events("recordingFinished")
        XCTAssertEqual(started.map { $0["timelapse"] as? Bool }, [true, nil], "only the timelapse's is marked: \(started)")
        let lapseFinished = try XCTUnwrap(finished.first { $0["path"] as? String == lapse.path }, run.output)
        XCTAssertEqual(lapseFinished["timelapse"] as? Bool, true)
        XCTAssertEqual(lapseFinished["complete"] as? Bool, true, "\(lapseFinished)")
        XCTAssertNil(finished.first { $0["path"] as? String == clip }?["timelapse"], "\(finished)")
        let names = run.events.compactMap { $0["event"] as? String }
        XCTAssertLessThan(try XCTUnwrap(names.lastIndex(of: "recordingFinished")), try XCTUnwrap(names.firstIndex(of: "stopped")),
                          "the timelapse's end is told before the run's")
        // What the event says is what the file holds.
        let probed = try probe(lapse)
        XCTAssertEqual(probed.videoFrames, lapseFinished["frames"] as? Int)
        XCTAssertEqual(probed.duration, try XCTUnwrap(lapseFinished["duration"] as? Double), accuracy: 0.1)
        XCTAssertTrue(try ffmpegDecodes(lapse))
    }
}

extension ServeCommandTests {
    func testAPortInUseFailsBeforeTheCameraOpensAndSaysSo() throws {
        let (_, port) = try startServe(folder: try temporaryFolder())
        let second = try runGCapture(["serve", "--listen", "127.0.0.1:\(port)", "--camera", "test", "--microphone", "none",
                                      "--output", try temporaryFolder().path, "--json"], timeout: 20)
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.stderr.contains("cannot listen on 127.0.0.1:\(port): the port is in use"), second.stderr)
        XCTAssertFalse(second.stdout.contains("\"started\""), "the camera was opened: \(second.stdout)")
        let unmade = try temporaryFolder().appendingPathComponent("not-made")
        let badAddress = try runGCapture(["serve", "--listen", "localhost", "--camera", "test", "--microphone", "none",
                                          "--output", unmade.path], timeout: 10)
        XCTAssertEqual(badAddress.status, 64, badAddress.stderr)
        XCTAssertTrue(badAddress.stderr.contains("has no port"), badAddress.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: unmade.path), "a refused command left its --output folder behind")
    }
}
