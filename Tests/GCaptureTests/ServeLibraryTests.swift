import Foundation
import GCapture
import XCTest

/// The web gallery over the photo library, asked as the page asks it (HTTP on `gcapture serve`): pages newest
/// first, filters, albums, favourite marks, a zip of a selection read back by unzip, and the library's changes
/// reaching the page's event stream.
final class ServeLibraryTests: XCTestCase {
    func startServe(folder: URL) throws -> (LaunchedCommand, Int) {
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", "320x240"])
        guard serve.waitForEvent("listening", timeout: 30), let port = serve.events("listening").first?["port"] as? Int else {
            throw CheckFailed(description: "gcapture serve did not start listening: \(serve.errorOutput)")
        }
        return (serve, port)
    }

    /// A small grey JPEG (no EXIF: its creation date is the file's), dated `minutesAgo` before now.
    func photo(_ url: URL, shade: UInt8, minutesAgo: Double) throws {
        try JPEGEncoder.encode(grayscale: [UInt8](repeating: shade, count: 32 * 24), width: 32, height: 24).write(to: url)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -minutesAgo * 60)], ofItemAtPath: url.path)
    }

    func movie(_ url: URL, minutesAgo: Double) throws {
        let made = try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=15", "!", "video/x-raw,width=160,height=120",
                                                           "!", "x264enc", "!", "mp4mux", "!", "filesink", "location=\(url.path)"], timeout: 60)
        XCTAssertEqual(made.status, 0, made.stderr)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -minutesAgo * 60)], ofItemAtPath: url.path)
    }

    func items(_ answer: HTTPAnswer) throws -> [[String: Any]] {
        XCTAssertEqual(answer.status, 200, answer.text)
        return try XCTUnwrap(answer.json?["items"] as? [[String: Any]], answer.text)
    }

    func testTheGalleryPagesFiltersMarksAndZipsThroughTheLibrary() throws {
        let folder = try temporaryFolder()
        // Newest first: p0 (1 min ago) … p4, then the movies. The photo in a subfolder is the library's, not the web's.
        for index in 0..<5 { try photo(folder.appendingPathComponent("p\(index).jpg"), shade: UInt8(40 * index), minutesAgo: Double(index + 1)) }
        try movie(folder.appendingPathComponent("m0.mp4"), minutesAgo: 10)
        try movie(folder.appendingPathComponent("m1.mp4"), minutesAgo: 11)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("day2"), withIntermediateDirectories: false)
        try photo(folder.appendingPathComponent("day2/old.jpg"), shade: 7, minutesAgo: 20)
        for step in [["create", "Booth"], ["add", "Booth", "p1.jpg", "p3.jpg"]] {
            let album = try runGCapture(["library", "album"] + step + ["--library", folder.path], timeout: 60)
            XCTAssertEqual(album.status, 0, album.stderr)
        }
        let (serve, port) = try startServe(folder: folder)

        // Pages of three: all eight, each once, newest first.
        var seen: [String] = []
        var offset: Int? = 0
        while let next = offset {
            let answer = try http(port, "GET", "/api/library?limit=3&offset=\(next)")
            seen += try items(answer).compactMap { $0["id"] as? String }
            XCTAssertEqual(answer.json?["total"] as? Int, 7)
            offset = answer.json?["next"] as? Int
            XCTAssertLessThan(seen.count, 20, "the pages never end")
        }
        XCTAssertEqual(seen, ["0/p0.jpg", "0/p1.jpg", "0/p2.jpg", "0/p3.jpg", "0/p4.jpg", "0/m0.mp4", "0/m1.mp4"])
        let inLibrary = try runGCapture(["library", "list", "--library", folder.path], timeout: 60)
        XCTAssertTrue(inLibrary.stdout.contains("day2/old.jpg"), "the library has the subfolder's photo: \(inLibrary.stdout)")

        let videos = try items(try http(port, "GET", "/api/library?type=video"))
        XCTAssertEqual(videos.compactMap { $0["id"] as? String }, ["0/m0.mp4", "0/m1.mp4"])
        XCTAssertEqual(videos.first?["kind"] as? String, "movie")
        XCTAssertEqual(try XCTUnwrap(videos.first?["duration"] as? Double), 0.5, accuracy: 0.05)
        XCTAssertEqual(videos.first?["width"] as? Int, 160)

        // An item is served by its URL; the subfolder's photo is not, by any name.
        let oldest = try XCTUnwrap(try items(try http(port, "GET", "/api/library?offset=6")).first)
        let served = try http(port, "GET", try XCTUnwrap(oldest["url"] as? String))
        XCTAssertEqual(served.status, 200)
        XCTAssertEqual(served.body, try Data(contentsOf: folder.appendingPathComponent("m1.mp4")))
        XCTAssertEqual(try http(port, "GET", try XCTUnwrap(oldest["thumbnail"] as? String)).status, 200)
        for target in ["/media/0/day2%2Fold.jpg", "/thumbs/0/day2%2Fold.jpg", "/media/0/day2/old.jpg"] {
            XCTAssertTrue([400, 404].contains(try http(port, "GET", target).status), target)
        }

        // The album, as the CLI made it.
        let albums = try XCTUnwrap(try http(port, "GET", "/api/library/albums").json?["albums"] as? [[String: Any]])
        XCTAssertEqual(albums.compactMap { $0["title"] as? String }, ["Booth"])
        XCTAssertEqual(albums.first?["count"] as? Int, 2)
        let albumID = try XCTUnwrap(albums.first?["id"] as? String).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        XCTAssertEqual(Set(try items(try http(port, "GET", "/api/library?album=\(albumID)")).compactMap { $0["id"] as? String }),
                       ["0/p1.jpg", "0/p3.jpg"])

        // A favourite mark from the page is kept in the library (the album file beside the photos).
        let marked = try http(port, "POST", "/api/library/favorite", headers: ["Content-Type": "application/json"],
                              body: #"{"items": ["0/p2.jpg", "0/m1.mp4"], "favorite": true}"#)
        XCTAssertEqual(marked.status, 200, marked.text)
        XCTAssertEqual(try items(try http(port, "GET", "/api/library?favorites=1")).compactMap { $0["id"] as? String }, ["0/p2.jpg", "0/m1.mp4"])
        XCTAssertEqual(try items(try http(port, "GET", "/api/library?favorites=1&type=photo")).compactMap { $0["id"] as? String }, ["0/p2.jpg"])
        let listed = try runGCapture(["library", "list", "--library", folder.path, "--json"], timeout: 60)
        let favourites = (try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? [])
            .filter { $0["favorite"] as? Bool == true }.compactMap { $0["id"] as? String }
        XCTAssertEqual(Set(favourites), ["p2.jpg", "m1.mp4"], listed.stdout)

        // Three chosen, one zip: unzip finds exactly those files, byte for byte.
        let chosen = ["0/m0.mp4", "0/p4.jpg", "0/p0.jpg"]
        let zipped = try http(port, "POST", "/api/library/zip", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                              body: "items=" + chosen.joined(separator: "\r\n").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertEqual(zipped.status, 200, zipped.text)
        XCTAssertEqual(zipped.headers["content-type"], "application/zip")
        XCTAssertTrue(zipped.headers["content-disposition"]?.contains("attachment") == true)
        let scratch = try temporaryFolder()
        let archive = scratch.appendingPathComponent("selection.zip")
        try zipped.body.write(to: archive)
        let out = scratch.appendingPathComponent("out")
        let unzipped = try runTool("/usr/bin/unzip", ["-q", archive.path, "-d", out.path], timeout: 60)
        XCTAssertEqual(unzipped.status, 0, unzipped.stderr)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: out.path)), ["m0.mp4", "p4.jpg", "p0.jpg"])
        for name in ["m0.mp4", "p4.jpg", "p0.jpg"] {
            XCTAssertEqual(try runTool("/usr/bin/cmp", [out.appendingPathComponent(name).path, folder.appendingPathComponent(name).path]).status, 0, name)
        }
        let tested = try runTool("/usr/bin/unzip", ["-t", archive.path], timeout: 60)
        XCTAssertTrue(tested.stdout.contains("No errors detected"), tested.stdout)

        // Mistakes are named; nothing outside the library is reached.
        let mistakes: [(String, String, String?, Int, String)] = [
            ("GET", "/api/library?type=gif", nil, 400, "type=gif"),
            ("GET", "/api/library?limit=0", nil, 400, "limit=0"),
            ("GET", "/api/library?album=0:nosuch", nil, 404, "no such album"),
            ("POST", "/api/library/zip", "items=0%2F..%2F..%2Fetc%2Fpasswd", 400, "not an item"),
            ("POST", "/api/library/zip", "items=0%2Fday2%2Fold.jpg", 400, "not an item"),
            ("POST", "/api/library/zip", "items=0%2Fgone.jpg", 404, "no such photo or movie"),
            ("POST", "/api/library/zip", "items=", 400, "no items"),
            ("POST", "/api/library/favorite", #"{"items": "p1.jpg"}"#, 400, "favorite"),
        ]
        for (method, target, body, status, words) in mistakes {
            let type = target.hasSuffix("zip") ? "application/x-www-form-urlencoded" : "application/json"
            let answer = try http(port, method, target, headers: body == nil ? [:] : ["Content-Type": type], body: body)
            XCTAssertEqual(answer.status, status, "\(method) \(target) \(body ?? ""): \(answer.text)")
            XCTAssertTrue(answer.text.contains(words), "\(target): \(answer.text)")
            XCTAssertFalse(answer.text.contains(folder.path), "an error names a path: \(answer.text)")
        }
        XCTAssertTrue(serve.process.isRunning)
    }

    /// A photo another program copies in reaches an open event stream as a "library" event, and the gallery,
    /// within a second; a deleted one leaves both.
    func testAFileCopiedInOrDeletedReachesThePageWithinASecond() throws {
        let folder = try temporaryFolder()
        try photo(folder.appendingPathComponent("first.jpg"), shade: 60, minutesAgo: 5)
        let (_, port) = try startServe(folder: folder)
        XCTAssertEqual(try items(try http(port, "GET", "/api/library")).compactMap { $0["id"] as? String }, ["0/first.jpg"])
        let events = try HTTPTestConnection(port: port)
        events.send("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n")
        XCTAssertTrue(String(decoding: events.read(for: 5) { String(decoding: $0, as: UTF8.self).contains("retry:") }, as: UTF8.self)
            .contains("text/event-stream"))

        let source = try temporaryFolder().appendingPathComponent("copied.jpg")
        try photo(source, shade: 200, minutesAgo: 0)
        XCTAssertEqual(try runTool("/bin/cp", [source.path, folder.path]).status, 0)
        // From the end of the copy: starting cp is not the server's time.
        let copied = Date()
        let inserted = events.read(for: 5) { String(decoding: $0, as: UTF8.self).contains(#""inserted":1"#) }
        let seenAfter = Date().timeIntervalSince(copied)
        XCTAssertTrue(String(decoding: inserted, as: UTF8.self).contains(#""event":"library""#), String(decoding: inserted, as: UTF8.self))
        XCTAssertLessThan(seenAfter, 1, "the copy reached the page's events \(seenAfter) s after cp")
        XCTAssertEqual(try items(try http(port, "GET", "/api/library")).compactMap { $0["id"] as? String }, ["0/copied.jpg", "0/first.jpg"])

        let removedAt = Date()
        try FileManager.default.removeItem(at: folder.appendingPathComponent("copied.jpg"))
        let removed = events.read(for: 5) { String(decoding: $0, as: UTF8.self).contains(#""removed":1"#) }
        XCTAssertTrue(String(decoding: removed, as: UTF8.self).contains(#""removed":1"#), String(decoding: removed, as: UTF8.self))
        XCTAssertLessThan(Date().timeIntervalSince(removedAt), 1)
        XCTAssertEqual(try items(try http(port, "GET", "/api/library")).compactMap { $0["id"] as? String }, ["0/first.jpg"])
    }
}
