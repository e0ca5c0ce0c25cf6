import Foundation
import GCapture
import XCTest

/// The operator's page in a real browser (headless Chromium from Debian, driven by Selenium): the live
/// picture moves, the shutter puts a photo in the gallery, a recording started from the page plays.
final class ServeBrowserTests: XCTestCase {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/serve_page.py")

    static let liveScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/webrtc_page.py")

    func testThePagePlaysTheLiveViewOverWebRTCShowingPicturesJustTaken() throws {
        try requireBrowser()
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none", "--stamp-time",
                                            "--output", try temporaryFolder().path, "--json", "--live-size", "640x360"])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let url = try XCTUnwrap(serve.events("listening").first?["url"] as? String)
        let browser = try runTool("/usr/bin/python3", [Self.liveScript.path, "live", url, "webrtc", "60"], timeout: 120)
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        let findings = browser.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(findings.first?["check"] as? String, "live view moves")
        let latency = try XCTUnwrap(findings.first { $0["check"] as? String == "latency" }, browser.stdout)
        // The capture times read back from the pictures shown are recent: the picture is live, not replayed.
        let median = try XCTUnwrap(latency["p50"] as? Double), worst = try XCTUnwrap(latency["maximum"] as? Double)
        XCTAssertGreaterThan(median, 0, "a picture shown before it was taken: the clocks or the reading are wrong")
        XCTAssertLessThan(median, 500, "the WebRTC picture is \(median) ms old: \(latency)")
        XCTAssertLessThan(worst, 3000, "\(latency)")
    }

    func testABrowserWithoutWebRTCGetsTheMJPEGPictureAndIsToldSo() throws {
        try requireBrowser()
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", try temporaryFolder().path, "--json", "--live-size", "320x240"])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let url = try XCTUnwrap(serve.events("listening").first?["url"] as? String)
        let browser = try runTool("/usr/bin/python3", [Self.liveScript.path, "fallback", url], timeout: 90)
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        XCTAssertTrue(browser.stdout.contains("WebRTC failed: this browser has no WebRTC"), browser.stdout)
    }

    func testThePageShowsTheCameraLiveTakesAPhotoAndRecordsAMovieThatPlays() throws {
        try requireBrowser()
        let folder = try temporaryFolder()
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", "960x540", "--post-roll", "1"])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let url = try XCTUnwrap(serve.events("listening").first?["url"] as? String)

        let browser = try runTool("/usr/bin/python3", [Self.script.path, url], timeout: 150)
        let findings = browser.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        XCTAssertEqual(findings.compactMap { $0["check"] as? String },
                       ["live view moves", "photo in gallery", "movie in gallery", "event clip in gallery"])
        XCTAssertEqual(serve.events("eventStarted").first?["trigger"] as? String, "web")

        let photo = try XCTUnwrap(findings.first { $0["check"] as? String == "photo in gallery" }?["name"] as? String)
        XCTAssertEqual(serve.events("photo").first.flatMap { ($0["path"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } }, photo)
        XCTAssertEqual(serve.events("photo").first?["trigger"] as? String, "web")
        let movieName = try XCTUnwrap(findings.first { $0["check"] as? String == "movie in gallery" }?["name"] as? String)
        let movie = try probe(folder.appendingPathComponent(movieName))
        XCTAssertGreaterThan(movie.duration, 2, "about 3 s were recorded from the page")
        XCTAssertGreaterThan(movie.videoFrames ?? 0, 60)
        XCTAssertEqual(serve.events("recordingFinished").first?["complete"] as? Bool, true)
    }

    /// The gallery over the photo library, as PhotosPicker's multi-selection: filtered to videos, three chosen
    /// and downloaded as one zip whose contents are those three files; a photo another program copies in
    /// appears in the open page within a second, and goes when it is deleted; a star makes a favourite.
    func testTheGalleryFiltersToVideosZipsThreeAndShowsACopyWithinASecond() throws {
        try requireBrowser()
        let folder = try temporaryFolder()
        for index in 0..<3 {
            try JPEGEncoder.encode(grayscale: [UInt8](repeating: UInt8(60 * index), count: 32 * 24), width: 32, height: 24)
                .write(to: folder.appendingPathComponent("photo\(index).jpg"))
        }
        for index in 0..<4 {
            let made = try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=10", "pattern=\(index)", "!",
                                                               "video/x-raw,width=160,height=120", "!", "x264enc", "!", "mp4mux", "!",
                                                               "filesink", "location=\(folder.appendingPathComponent("clip\(index).mp4").path)"],
                                   timeout: 60)
            XCTAssertEqual(made.status, 0, made.stderr)
        }
        let elsewhere = try temporaryFolder()
        let copied = elsewhere.appendingPathComponent("copied-in.jpg")
        try JPEGEncoder.encode(grayscale: [UInt8](repeating: 220, count: 32 * 24), width: 32, height: 24).write(to: copied)
        let downloads = try temporaryFolder()

        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", "320x240"])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let url = try XCTUnwrap(serve.events("listening").first?["url"] as? String)
        let script = Self.script.deletingLastPathComponent().appendingPathComponent("library_page.py")
        let browser = try runTool("/usr/bin/python3", [script.path, url, folder.path, downloads.path, copied.path], timeout: 150)
        let findings = browser.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        XCTAssertEqual(findings.compactMap { $0["check"] as? String },
                       ["gallery shown", "filtered to videos", "zip downloaded", "copy appeared", "deletion disappeared", "favourite filtered"])
        let shownVideos = try XCTUnwrap(findings.first { $0["check"] as? String == "filtered to videos" }?["names"] as? [String])
        XCTAssertEqual(Set(shownVideos), ["clip0.mp4", "clip1.mp4", "clip2.mp4", "clip3.mp4"])

        let download = try XCTUnwrap(findings.first { $0["check"] as? String == "zip downloaded" })
        let chosen = try XCTUnwrap(download["names"] as? [String])
        XCTAssertEqual(chosen.count, 3)
        let out = try temporaryFolder()
        let unzipped = try runTool("/usr/bin/unzip", ["-q", try XCTUnwrap(download["path"] as? String), "-d", out.path], timeout: 60)
        XCTAssertEqual(unzipped.status, 0, unzipped.stderr)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: out.path)), Set(chosen))
        for name in chosen {
            XCTAssertEqual(try runTool("/usr/bin/cmp", [out.appendingPathComponent(name).path, folder.appendingPathComponent(name).path]).status, 0,
                           "\(name) in the zip is not the library's file")
        }
        let appeared = try XCTUnwrap(findings.first { $0["check"] as? String == "copy appeared" }?["seconds"] as? Double)
        XCTAssertLessThan(appeared, 1, "the copied photo appeared in the open page \(appeared) s after cp")
        let gone = try XCTUnwrap(findings.first { $0["check"] as? String == "deletion disappeared" }?["seconds"] as? Double)
        XCTAssertLessThan(gone, 1, "the deleted photo left the open page \(gone) s after it was deleted")
        print("library page: a copy appeared after \(appeared) s, a deletion went after \(gone) s")
    }

    /// serve --motion: the page draws the motion output's zone and the motion it sees over the live view; the
    /// motion started an event, finished at the end of the run.
    func testThePageDrawsTheMotionZoneAndTheMotionOverTheLiveView() throws {
        try requireBrowser()
        let folder = try temporaryFolder()
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--motion"])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let url = try XCTUnwrap(serve.events("listening").first?["url"] as? String)
        let browser = try runTool("/usr/bin/python3", [Self.script.path, "--motion", url], timeout: 120)
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        serve.signal(SIGINT)
        XCTAssertTrue(serve.waitForExit(timeout: 20))
        XCTAssertEqual(serve.status, 0, serve.errorOutput)
        XCTAssertEqual(serve.events("eventStarted").first?["trigger"] as? String, "motion")
        let ended = try XCTUnwrap(serve.events("eventEnded").first, "the motion's clip was not finished at the end: \(serve.output)")
        XCTAssertEqual(ended["triggers"] as? [String], ["motion"])
        XCTAssertEqual(ended["complete"] as? Bool, true)
    }

    /// Over HTTPS: Chromium that trusts the test authority (in the NSS database of a HOME of its own) gets
    /// the whole page, live view, shutter and recording; a server whose certificate another authority signed
    /// is refused by that same browser.
    func testOverHTTPSTheBrowserTrustingTheAuthorityGetsThePageAndRefusesAStranger() throws {
        try requireBrowser()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/certutil") else {
            throw TestEnvironment.missing("/usr/bin/certutil is not installed (apt install libnss3-tools, or bash scripts/install-deps.sh)")
        }
        let certificates = try TestCertificates(test: self)
        let home = try temporaryFolder()
        let database = home.appendingPathComponent(".pki/nssdb")
        try FileManager.default.createDirectory(at: database, withIntermediateDirectories: true)
        for arguments in [["-N", "-d", "sql:\(database.path)", "--empty-password"],
                          ["-A", "-d", "sql:\(database.path)", "-t", "C,,", "-n", "gcapture test authority", "-i", certificates.authority.path]] {
            let run = try runTool("/usr/bin/certutil", arguments, timeout: 30)
            XCTAssertEqual(run.status, 0, "certutil \(arguments.joined(separator: " ")): \(run.stderr)")
        }
        let browserEnvironment = ["HOME": home.path]

        let folder = try temporaryFolder()
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", "640x360", "--post-roll", "1",
                                            "--tls-cert", certificates.certificate.path, "--tls-key", certificates.key.path])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let url = try XCTUnwrap(serve.events("listening").first?["url"] as? String)
        XCTAssertTrue(url.hasPrefix("https://127.0.0.1:"), url)
        let browser = try runTool("/usr/bin/python3", [Self.script.path, url], environment: browserEnvironment, timeout: 150)
        let findings = browser.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        XCTAssertEqual(findings.compactMap { $0["check"] as? String },
                       ["live view moves", "photo in gallery", "movie in gallery", "event clip in gallery"])
        XCTAssertEqual(serve.events("photo").first?["trigger"] as? String, "web")

        let stranger = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                               "--output", try temporaryFolder().path, "--json", "--live-size", "320x240",
                                               "--tls-cert", certificates.strangerCertificate.path,
                                               "--tls-key", certificates.strangerKey.path])
        XCTAssertTrue(stranger.waitForEvent("listening", timeout: 30), stranger.errorOutput)
        let strangerURL = try XCTUnwrap(stranger.events("listening").first?["url"] as? String)
        let refusal = try runTool("/usr/bin/python3", [Self.script.path, "--refused", strangerURL], environment: browserEnvironment,
                                  timeout: 90)
        XCTAssertEqual(refusal.status, 0, "the browser test failed:\n\(refusal.stdout)\n\(refusal.stderr.suffix(2000))")
        XCTAssertTrue(refusal.stdout.contains("ERR_CERT_AUTHORITY_INVALID"), refusal.stdout)
    }
}

extension XCTestCase {
    /// Headless Chromium, its driver and Selenium, or the test cannot be had.
    func requireBrowser() throws {
        for part in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: part) {
            throw TestEnvironment.missing("\(part) is not installed (apt install chromium chromium-driver, or bash scripts/install-deps.sh)")
        }
        guard (try? runTool("/usr/bin/python3", ["-c", "import selenium"]).status) == 0 else {
            throw TestEnvironment.missing("Selenium is not installed for /usr/bin/python3 (apt install python3-selenium)")
        }
    }
}
