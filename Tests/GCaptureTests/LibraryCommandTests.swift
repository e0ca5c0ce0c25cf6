import Foundation
import GCapture
import XCTest

/// `gcapture library` run as a user would: the built CLI on a real folder, its files checked by cmp and ffprobe.
final class LibraryCommandTests: XCTestCase {
    func json(_ text: String) throws -> [[String: Any]] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], text)
    }

    func photo(_ url: URL, shade: UInt8) throws {
        let pixels = [UInt8](repeating: shade, count: 32 * 24)
        try JPEGEncoder.encode(grayscale: pixels, width: 32, height: 24).write(to: url)
    }

    func testImportListAlbumAndExportFromTheShell() throws {
        let scratch = try temporaryFolder()
        let library = scratch.appendingPathComponent("library").path
        let first = scratch.appendingPathComponent("first.jpg"), second = scratch.appendingPathComponent("second.jpg")
        try photo(first, shade: 40)
        try photo(second, shade: 200)
        let movie = scratch.appendingPathComponent("clip.mp4")
        XCTAssertEqual(try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=15", "!", "video/x-raw,width=160,height=120", "!",
                                                               "x264enc", "!", "mp4mux", "!", "filesink", "location=\(movie.path)"]).status, 0)

        let imported = try runGCapture(["library", "import", "--library", library, "--album", "Booth", "--json",
                                        first.path, second.path, movie.path], timeout: 60)
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertEqual(Set(try json(imported.stdout).compactMap { $0["id"] as? String }), ["first.jpg", "second.jpg", "clip.mp4"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: first.path), "copied, not moved")

        let videos = try runGCapture(["library", "list", "--library", library, "--media", "videos", "--json"], timeout: 60)
        XCTAssertEqual(videos.status, 0, videos.stderr)
        let clip = try XCTUnwrap(try json(videos.stdout).first)
        XCTAssertEqual(clip["id"] as? String, "clip.mp4")
        XCTAssertEqual(clip["pixelWidth"] as? Int, 160)
        XCTAssertEqual(try XCTUnwrap(clip["duration"] as? Double), 0.5, accuracy: 0.05)

        let removed = try runGCapture(["library", "album", "remove", "Booth", "second.jpg", "--library", library, "--json"], timeout: 60)
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertEqual(try json(removed.stdout).first?["count"] as? Int, 2)

        let out = scratch.appendingPathComponent("out")
        let exported = try runGCapture(["library", "export", "--album", "Booth", "--to", out.path, "--library", library], timeout: 60)
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: out.path)), ["first.jpg", "clip.mp4"])
        XCTAssertEqual(try runTool("/usr/bin/cmp", [first.path, out.appendingPathComponent("first.jpg").path]).status, 0)

        // A file another program drops in is listed by the next command.
        try photo(URL(fileURLWithPath: library).appendingPathComponent("dropped.jpg"), shade: 120)
        let all = try runGCapture(["library", "list", "--library", library, "--media", "photos"], timeout: 60)
        XCTAssertEqual(all.status, 0, all.stderr)
        XCTAssertTrue(all.stdout.contains("dropped.jpg"), all.stdout)
    }

    func testAFileThatIsNotAPhotoImportsNothingAndSaysWhich() throws {
        let scratch = try temporaryFolder()
        let library = scratch.appendingPathComponent("library")
        let good = scratch.appendingPathComponent("good.jpg"), bad = scratch.appendingPathComponent("bad.jpg")
        try photo(good, shade: 90)
        try Data("this is text, not a JPEG".utf8).write(to: bad)
        let result = try runGCapture(["library", "import", "--library", library.path, good.path, bad.path], timeout: 60)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains(bad.path) && result.stderr.contains("not a JPEG"), result.stderr)
        XCTAssertTrue(result.stderr.contains("nothing was imported"), result.stderr)
        let listed = try runGCapture(["library", "list", "--library", library.path, "--json"], timeout: 60)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertEqual(try json(listed.stdout).count, 0)

        let unknown = try runGCapture(["library", "export", "nope.jpg", "--to", scratch.path, "--library", library.path], timeout: 60)
        XCTAssertNotEqual(unknown.status, 0)
        XCTAssertTrue(unknown.stderr.contains("the library has no nope.jpg"), unknown.stderr)
    }

    /// `photo --album` and `record --album` file what they write into the folder's library; an album that
    /// cannot be written leaves the files written, says why and exits non-zero.
    func testPhotoAndRecordWithAnAlbumFileTheirFilesAndAFailureKeepsThem() throws {
        let folder = try temporaryFolder()
        let photos = try runGCapture(["photo", "--camera", "test", "--output", folder.appendingPathComponent("shot-%d.jpg").path,
                                      "--count", "2", "--album", "Booth", "--json"], timeout: 60)
        XCTAssertEqual(photos.status, 0, photos.stderr)
        let movie = try runGCapture(["record", "--camera", "test", "--microphone", "none", "--duration", "1",
                                     "--output", folder.appendingPathComponent("clip.mp4").path, "--album", "Booth"], timeout: 60)
        XCTAssertEqual(movie.status, 0, movie.stderr)
        let listed = try runGCapture(["library", "list", "--library", folder.path, "--album", "Booth", "--json"], timeout: 60)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertEqual(Set(try json(listed.stdout).compactMap { $0["id"] as? String }), ["shot-1.jpg", "shot-2.jpg", "clip.mp4"])
        XCTAssertGreaterThan(try probe(folder.appendingPathComponent("clip.mp4")).duration, 0.5)

        // The album file cannot be replaced (a folder stands in its place): the photo is written all the same.
        let blocked = try temporaryFolder()
        try FileManager.default.createDirectory(at: blocked.appendingPathComponent(".gcapture-library.json"), withIntermediateDirectories: false)
        let refused = try runGCapture(["photo", "--camera", "test", "--output", blocked.appendingPathComponent("kept.jpg").path,
                                       "--album", "Booth", "--json"], timeout: 60)
        XCTAssertNotEqual(refused.status, 0, refused.stdout)
        XCTAssertTrue(refused.stdout.contains("\"albumFailed\""), refused.stdout)
        XCTAssertTrue(refused.stderr.contains("not put in album 'Booth'"), refused.stderr)
        XCTAssertEqual(try JPEGHeader.read(path: blocked.appendingPathComponent("kept.jpg").path).displayedSize.width, 1920)

        let empty = try runGCapture(["photo", "--camera", "test", "--output", folder.appendingPathComponent("x.jpg").path, "--album", " "], timeout: 30)
        XCTAssertEqual(empty.status, 64, empty.stderr)
        XCTAssertTrue(empty.stderr.contains("album"), empty.stderr)
    }
}
