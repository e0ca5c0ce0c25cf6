import Foundation
import GCapture
import XCTest

/// The live view over WebRTC as its viewers see it: WHEP on `gcapture serve`, played by a WebRTC peer
/// nobody here wrote (aiortc, from PyPI, which decodes what it receives), and the endpoint's refusals.
final class ServeWebRTCTests: XCTestCase {
    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("WebRTC/whep_client.py")
    static let chromiumOffer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("WebRTC/chromium-offer.sdp")

    /// The Python of scripts/install-deps.sh's venv, which has aiortc.
    func aiortcPython() throws -> String {
        let venv = ProcessInfo.processInfo.environment["GCAPTURE_WEBRTC_VENV"]
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/gcapture/webrtc-venv").path
        let python = venv + "/bin/python"
        guard (try? runTool(python, ["-c", "import aiortc"]).status) == 0 else {
            throw TestEnvironment.missing("aiortc is not installed in \(venv) (bash scripts/install-deps.sh makes it)")
        }
        return python
    }

    func startServe(_ extra: [String] = [], microphone: String = "test-microphone") throws -> (LaunchedCommand, Int) {
        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", microphone,
                                            "--output", try temporaryFolder().path, "--json", "--live-size", "320x240"] + extra)
        guard serve.waitForEvent("listening", timeout: 30), let port = serve.events("listening").first?["port"] as? Int else {
            throw CheckFailed(description: "gcapture serve did not start listening: \(serve.errorOutput)")
        }
        return (serve, port)
    }

    /// Runs the WHEP client for `seconds` of receiving; its JSON report.
    func watch(_ port: Int, seconds: Double = 5, _ extra: [String] = []) throws -> [String: Any] {
        let run = try runTool(try aiortcPython(), [Self.client.path, "--url", "http://127.0.0.1:\(port)/whep", "--seconds", "\(seconds)"] + extra,
                              timeout: seconds + 60)
        guard let line = run.stdout.split(separator: "\n").last,
              let report = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw CheckFailed(description: "the WHEP client printed no report: \(run.stdout) \(run.stderr)")
        }
        return report
    }

    func webRTCStatus(_ port: Int, token: String? = nil) throws -> [String: Any] {
        let answer = try http(port, "GET", "/api/status", headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
        return try XCTUnwrap(answer.json?["webRTC"] as? [String: Any], answer.text)
    }

    func testAWHEPClientThatIsNotABrowserReceivesFiveSecondsOfVideoAndAudio() throws {
        let (serve, port) = try startServe()
        let report = try watch(port)
        XCTAssertEqual(report["status"] as? Int, 201, "\(report)")
        XCTAssertEqual(report["videoCodec"] as? String, "H264")
        XCTAssertTrue(report["answerHasCandidates"] as? Bool ?? false)
        XCTAssertGreaterThanOrEqual(report["videoFrames"] as? Int ?? 0, 120, "decoded video frames in 5 s at 30 fps: \(report)")
        // Opus in 20 ms frames: 250 in 5 s.
        XCTAssertGreaterThanOrEqual(report["audioFrames"] as? Int ?? 0, 200, "decoded audio frames in 5 s: \(report)")
        // The live view's size bounds the encode: the camera's 1280x720 scaled into the 320x240 asked, its
        // aspect kept.
        XCTAssertEqual(report["width"] as? Int, 320)
        XCTAssertEqual(report["height"] as? Int, 180)
        XCTAssertEqual(report["deleteStatus"] as? Int, 200)
        // DELETE let the viewer go: its resource is gone, nobody watches.
        let location = try XCTUnwrap(report["location"] as? String)
        XCTAssertEqual(try http(port, "DELETE", location).status, 404)
        XCTAssertEqual(try webRTCStatus(port)["viewers"] as? Int, 0)
        serve.signal(SIGINT)
        XCTAssertTrue(serve.waitForExit(timeout: 30))
        XCTAssertEqual(serve.status, 0, serve.errorOutput)
    }

    func testAViewerWithoutH264GetsVP8() throws {
        let (_, port) = try startServe()
        let report = try watch(port, seconds: 4, ["--codec", "vp8"])
        XCTAssertEqual(report["status"] as? Int, 201, "\(report)")
        XCTAssertEqual(report["videoCodec"] as? String, "VP8")
        XCTAssertGreaterThanOrEqual(report["videoFrames"] as? Int ?? 0, 90, "decoded VP8 frames in 4 s at 30 fps: \(report)")
        XCTAssertGreaterThanOrEqual(report["audioFrames"] as? Int ?? 0, 150, "\(report)")
        XCTAssertEqual([report["width"] as? Int, report["height"] as? Int], [320, 180])
        XCTAssertEqual(try webRTCStatus(port)["viewers"] as? Int, 0)
    }

    func testTwoViewersAtOnceShareOneEncode() throws {
        let (_, port) = try startServe(microphone: "none")
        let python = try aiortcPython()
        let arguments = [Self.client.path, "--url", "http://127.0.0.1:\(port)/whep", "--seconds", "4", "--video-only"]
        // Two viewers watching at the same time, each its own process.
        let second = try LaunchedCommand(URL(fileURLWithPath: python), arguments)
        addTeardownBlock { second.kill() }
        let first = try runTool(python, arguments, timeout: 60)
        XCTAssertTrue(second.waitForExit(timeout: 60))
        let reports = try [(first.stdout, first.stderr), (second.output, second.errorOutput)].map { stdout, stderr -> [String: Any] in
            let line = stdout.split(separator: "\n").last.map(String.init) ?? ""
            return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], stderr)
        }
        for report in reports {
            XCTAssertGreaterThanOrEqual(report["videoFrames"] as? Int ?? 0, 90, "\(report)")
        }
        // One encode for both: frames encoded are about the frames of the time watched (≤ 30 fps for the ~5 s
        // both watched and the few seconds of connecting), not twice that.
        let encoded = try XCTUnwrap(try webRTCStatus(port)["encodedFrames"] as? Int)
        let received = reports.map { $0["videoFrames"] as? Int ?? 0 }.reduce(0, +)
        XCTAssertLessThan(encoded, received, "two viewers received \(received) frames of \(encoded) encoded")
        XCTAssertEqual(try webRTCStatus(port)["viewers"] as? Int, 0)
    }

    func testTenViewersConnectingAtOnceAllGetThePictureOfOneEncode() throws {
        let (_, port) = try startServe(microphone: "none")
        // GStreamer's webrtcbin as the ten viewers (depacketizing, not decoding), their offers posted at once.
        let run = try runTool("/usr/bin/python3", [StreamWHIPTests.peer.path, "whep-viewers", "--url", "http://127.0.0.1:\(port)/whep",
                                                    "--seconds", "3", "--count", "10", "--concurrent-posts"], timeout: 90)
        let report = try XCTUnwrap(run.stdout.split(separator: "\n").last.flatMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }, run.stdout + run.stderr)
        XCTAssertEqual(run.status, 0, "\(report)")
        XCTAssertEqual(report["statuses"] as? [Int], Array(repeating: 201, count: 10), "\(report)")
        let frames = try XCTUnwrap(report["frames"] as? [Int])
        XCTAssertTrue(frames.allSatisfy { $0 >= 60 }, "every viewer gets about 3 s at 30 fps: \(frames)")
        let encoded = try XCTUnwrap(try webRTCStatus(port)["encodedFrames"] as? Int)
        XCTAssertLessThan(encoded * 3, frames.reduce(0, +), "ten viewers got \(frames.reduce(0, +)) frames of \(encoded) encoded")
        XCTAssertEqual(try webRTCStatus(port)["viewers"] as? Int, 0)
    }

    func testAViewerKilledMidStreamIsLetGo() throws {
        let (_, port) = try startServe(microphone: "none")
        let viewer = try LaunchedCommand(URL(fileURLWithPath: try aiortcPython()),
                                         [Self.client.path, "--url", "http://127.0.0.1:\(port)/whep", "--seconds", "60", "--video-only"])
        addTeardownBlock { viewer.kill() }
        var deadline = Date().addingTimeInterval(30)
        while (try webRTCStatus(port)["connectedViewers"] as? Int) != 1, Date() < deadline { Thread.sleep(forTimeInterval: 0.2) }
        XCTAssertEqual(try webRTCStatus(port)["connectedViewers"] as? Int, 1)
        // No DELETE, no goodbye: the viewer's process is gone. webrtcbin still says connected; the silence says otherwise.
        viewer.kill()
        let killed = Date()
        deadline = Date().addingTimeInterval(25)
        while (try webRTCStatus(port)["viewers"] as? Int) != 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.2) }
        XCTAssertEqual(try webRTCStatus(port)["viewers"] as? Int, 0, "the dead viewer is still held")
        XCTAssertLessThan(Date().timeIntervalSince(killed), 16, "let go 12 s after the last packet, on the next tick")
    }

    func testTheEndpointRefusesWhatItMustAndStaysBounded() throws {
        let token = "webrtc-secret-1"
        let (serve, port) = try startServe(["--token", token], microphone: "none")
        let offer = try String(contentsOf: Self.chromiumOffer, encoding: .utf8)
        let authorized = ["Authorization": "Bearer \(token)", "Content-Type": "application/sdp"]

        // No token, a wrong one, a foreign page.
        XCTAssertEqual(try http(port, "POST", "/whep", headers: ["Content-Type": "application/sdp"], body: offer).status, 401)
        XCTAssertEqual(try http(port, "POST", "/whep", headers: ["Authorization": "Bearer wrong-token-9", "Content-Type": "application/sdp"],
                                body: offer).status, 401)
        let foreign = try http(port, "POST", "/whep", headers: authorized.merging(["Origin": "https://evil.example"]) { $1 }, body: offer)
        XCTAssertEqual(foreign.status, 403, foreign.text)
        // Not SDP, SDP of no H.264, the wrong type: each named.
        let garbage = try http(port, "POST", "/whep", headers: authorized, body: "hello\r\nthere")
        XCTAssertEqual(garbage.status, 400)
        XCTAssertTrue(garbage.text.contains("not SDP"), garbage.text)
        let vp9Only = try http(port, "POST", "/whep", headers: authorized, body: Self.offer(videoCodec: "VP9/90000"))
        XCTAssertEqual(vp9Only.status, 400)
        XCTAssertTrue(vp9Only.text.contains("VP9") && vp9Only.text.contains("H.264"), vp9Only.text)
        let asJSON = try http(port, "POST", "/whep", headers: authorized.merging(["Content-Type": "application/json"]) { $1 }, body: offer)
        XCTAssertEqual(asJSON.status, 415)
        XCTAssertEqual(try http(port, "GET", "/whep", headers: authorized).status, 405)
        XCTAssertEqual(try http(port, "DELETE", "/whep/no-such-viewer", headers: authorized).status, 404)

        // A thousand offers, in two rounds: ten viewers (the limit) get answers, the rest are refused at once,
        // the ten leave. The first round makes what stays made (webrtcbin's and libnice's first use); after the
        // second, memory is where the first left it.
        // Under a sanitizer a round can outlast the time a viewer has to connect (serve's default): a viewer let go
        // for that has freed its place, and its DELETE finds nothing.
        let connectLimit = CaptureWebRTCOutput.Settings().connectLimit.inSeconds
        func outlastedConnectLimit(_ viewer: (location: String, at: Date)) -> Bool { Date().timeIntervalSince(viewer.at) > connectLimit }
        func offers(_ count: Int) throws {
            var answered: [(location: String, at: Date)] = []
            var refused = 0
            let started = Date()
            for _ in 0..<count {
                let answer = try http(port, "POST", "/whep", headers: authorized, body: offer)
                // Only once a place was freed so may an eleventh be answered.
                let placeFreed = answered.contains(where: outlastedConnectLimit)
                switch answer.status {
                case 201:
                    XCTAssertTrue(answered.count < 10 || placeFreed, "an offer answered while ten viewers held their places")
                    answered.append((try XCTUnwrap(answer.headers["location"]), Date()))
                case 503: refused += 1
                default: XCTFail("offer answered \(answer.status): \(answer.text)")
                }
            }
            let slowRound = answered.contains(where: outlastedConnectLimit)
            XCTAssertEqual(slowRound ? min(answered.count, 10) : answered.count, 10)
            XCTAssertEqual(refused, count - answered.count)
            XCTAssertLessThan(Date().timeIntervalSince(started), 60)
            if !slowRound { XCTAssertEqual(try webRTCStatus(port, token: token)["viewers"] as? Int, 10) }
            for viewer in answered {
                let status = try http(port, "DELETE", viewer.location, headers: authorized).status
                if status == 404, outlastedConnectLimit(viewer) { continue }
                XCTAssertEqual(status, 200)
            }
            XCTAssertEqual(try webRTCStatus(port, token: token)["viewers"] as? Int, 0)
        }
        let pid = serve.process.processIdentifier
        try offers(100)
        Thread.sleep(forTimeInterval: 1)
        let before = try XCTUnwrap(Self.residentKilobytes(of: pid))
        try offers(900)
        Thread.sleep(forTimeInterval: 1)
        let after = try XCTUnwrap(Self.residentKilobytes(of: pid))
        print("WHEP offers: resident \(before) KiB after 100, \(after) KiB after 1000")
        XCTAssertLessThan(after - before, 16 * 1024, "memory grew from \(before) to \(after) KiB over 900 more offers")
        // Then 30 viewers come and go, and none of their threads stays. Chromium's offer names its candidates by
        // mDNS names, which GStreamer 1.22 resolving itself kept each viewer's ICE agent and its two threads for
        // good. (Resident memory is no measure of that over 30 viewers: glibc's free lists move it by 10-20 MB.)
        let threadsBefore = try XCTUnwrap(Self.threadCount(of: pid))
        for _ in 0..<3 { try offers(10) }
        Thread.sleep(forTimeInterval: 1)
        let threadsAfter = try XCTUnwrap(Self.threadCount(of: pid))
        print("WHEP viewers: \(threadsBefore) threads before 30 more viewers, \(threadsAfter) after")
        XCTAssertLessThan(threadsAfter - threadsBefore, 10, "threads grew from \(threadsBefore) to \(threadsAfter) over 30 viewers")
        // And the live view still works for a real viewer.
        let report = try watch(port, seconds: 2, ["--token", token, "--video-only"])
        XCTAssertGreaterThanOrEqual(report["videoFrames"] as? Int ?? 0, 40, "\(report)")
    }

    /// The Chromium offer with its video line's codecs replaced by one other codec.
    static func offer(videoCodec: String) throws -> String {
        let chromium = try String(contentsOf: chromiumOffer, encoding: .utf8)
        var lines: [String] = []
        var inVideo = false
        for line in chromium.components(separatedBy: "\r\n") {
            if line.hasPrefix("m=") { inVideo = line.hasPrefix("m=video") }
            if inVideo, line.hasPrefix("m=video") { lines.append("m=video 9 UDP/TLS/RTP/SAVPF 98"); continue }
            if inVideo, line.hasPrefix("a=rtpmap:") || line.hasPrefix("a=fmtp:") || line.hasPrefix("a=rtcp-fb:") { continue }
            lines.append(line)
            if inVideo, line.hasPrefix("a=rtcp-rsize") { lines.append("a=rtpmap:98 \(videoCodec)") }
        }
        return lines.joined(separator: "\r\n")
    }

    static func threadCount(of pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.count
    }

    static func residentKilobytes(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }
}
