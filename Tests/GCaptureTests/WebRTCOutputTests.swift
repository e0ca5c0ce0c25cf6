import Foundation
@testable import GCapture
import XCTest

/// The WebRTC output's reading of offers (a real one from Chromium) and its care of viewers against a real
/// session: a viewer that never connects is let go by itself, and with it the encode.
final class WebRTCOutputTests: XCTestCase {
    static let chromiumOffer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("WebRTC/chromium-offer.sdp")

    func testChromiumsOfferGetsConstrainedBaselineH264AndOpus() throws {
        let offer = try WebRTCOffer(try String(contentsOf: Self.chromiumOffer, encoding: .utf8))
        // Chromium offers VP8 first and H.264 in four profiles: 108 is packetization mode 1, 42e01f.
        let video = try XCTUnwrap(try offer.videoChoice())
        XCTAssertEqual(video.payloadType, 108)
        XCTAssertEqual(video.profileLevelID, "42e01f")
        XCTAssertEqual(offer.opusPayloadType, 111)
        XCTAssertTrue(WebRTCOffer.isConstrainedBaseline("42e01f"))
        XCTAssertTrue(WebRTCOffer.isConstrainedBaseline("42C01F"))
        XCTAssertFalse(WebRTCOffer.isConstrainedBaseline("42001f"), "plain baseline")
        XCTAssertFalse(WebRTCOffer.isConstrainedBaseline("4d001f"), "main")
    }

    func testOffersTheLiveViewCannotServeAreRefusedNamingWhy() throws {
        func refusal(_ text: String) -> String {
            do { _ = try WebRTCOffer(text).videoChoice(); return "accepted" } catch { return error.description }
        }
        XCTAssertTrue(refusal("GET / HTTP/1.1").contains("not SDP"))
        XCTAssertTrue(refusal("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\n").contains("no media line"))
        let vp9Only = "v=0\r\ns=-\r\nm=video 9 UDP/TLS/RTP/SAVPF 98 99\r\na=recvonly\r\na=rtpmap:98 VP9/90000\r\na=rtpmap:99 rtx/90000\r\n"
        XCTAssertTrue(refusal(vp9Only).contains("only as VP9"), refusal(vp9Only))
        // A browser without H.264 gets VP8.
        let vp8Only = "v=0\r\ns=-\r\nm=video 9 UDP/TLS/RTP/SAVPF 120 124\r\na=recvonly\r\na=rtpmap:120 VP8/90000\r\na=rtpmap:124 rtx/90000\r\n"
        XCTAssertEqual(try WebRTCOffer(vp8Only).videoChoice(), WebRTCOffer.VideoChoice(codec: .vp8, payloadType: 120))
        let sendOnly = "v=0\r\ns=-\r\nm=video 9 UDP/TLS/RTP/SAVPF 102\r\na=sendonly\r\na=rtpmap:102 H264/90000\r\na=fmtp:102 packetization-mode=1\r\n"
        XCTAssertNoThrow(try XCTAssertNil(try WebRTCOffer(sendOnly).videoChoice(), "a viewer that only sends receives nothing"))
        let huge = "v=0\r\n" + String(repeating: "a=x\r\n", count: 20_000)
        XCTAssertTrue(refusal(huge).contains("at most"))
    }

    /// Candidates named by a host name reach webrtcbin resolved (GStreamer 1.22 resolving them itself keeps
    /// each connection's ICE agent and its two threads for good), and those that do not resolve left out.
    func testCandidateHostNamesAreResolvedBeforeWebRTCBinSeesThem() throws {
        let offer = try String(contentsOf: Self.chromiumOffer, encoding: .utf8)
        let mDNSNames = offer.split(whereSeparator: \.isNewline).compactMap { CandidateHostNames.hostName(in: String($0)) }
        XCTAssertEqual(mDNSNames.count, 4, "Chromium's offer names its candidates by mDNS names")
        XCTAssertTrue(mDNSNames.allSatisfy { $0.hasSuffix(".local") })
        // Here no mDNS resolver answers for them: each candidate is left out, every other line kept as it was.
        let unresolved = CandidateHostNames.resolved(in: offer, within: .seconds(2))
        XCTAssertFalse(unresolved.contains(".local"), unresolved)
        XCTAssertEqual(unresolved.split(whereSeparator: \.isNewline).count, offer.split(whereSeparator: \.isNewline).count - 4)
        XCTAssertTrue(unresolved.hasSuffix("\r\n") && offer.hasSuffix("\r\n"), "SDP's line endings")
        XCTAssertTrue(try WebRTCOffer(unresolved).videoChoice() != nil)

        // A name that resolves becomes its address; an IP address stays as it was.
        let lines = ["v=0", "a=candidate:1 1 udp 2113937151 localhost 33328 typ host generation 0",
                     "a=candidate:2 1 udp 2113937151 192.168.1.20 33329 typ host generation 0",
                     "a=candidate:3 1 udp 2113937151 fe80::1 33330 typ host generation 0",
                     "a=candidate:4 1 udp 2113937151 no-such-host.invalid 33331 typ host generation 0", ""]
        let resolved = CandidateHostNames.resolved(in: lines.joined(separator: "\r\n"), within: .seconds(2))
        XCTAssertEqual(resolved, ["v=0", "a=candidate:1 1 udp 2113937151 127.0.0.1 33328 typ host generation 0", lines[2], lines[3], ""]
            .joined(separator: "\r\n"))
        // An offer listing many names has only the first 16 looked up. ("127.5" is a name to inet_pton, which
        // reads only dotted quads, and 127.0.0.5 to getaddrinfo: 40 names that each resolve.)
        let many = (1...40).map { "a=candidate:\($0) 1 udp 2113937151 127.\($0) 5000 typ host" }
        let kept = CandidateHostNames.resolved(in: (["v=0"] + many + [""]).joined(separator: "\r\n"), within: .seconds(2))
            .split(whereSeparator: \.isNewline)
        XCTAssertEqual(kept.count, 1 + CandidateHostNames.maximumNames, "\(kept)")
        XCTAssertEqual(kept.last, "a=candidate:16 1 udp 2113937151 127.0.0.16 5000 typ host")
    }

    func testAViewerThatNeverConnectsIsLetGoAndTheEncodeWithIt() async throws {
        let output = CaptureWebRTCOutput()
        output.settings.connectLimit = .seconds(1)
        output.settings.maximumWidth = 320
        output.settings.maximumHeight = 240
        let session = try makeSession(camera: CaptureDevice.makeTestCamera(uniqueID: "test-webrtc", options: TestCameraOptions()), outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        // Before anyone watches, nothing is encoded.
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(output.encodedFrameCount, 0)

        // Chromium's offer, with no Chromium behind it: answered, never connected.
        let answer = try await within(engineDeadline, "addViewer") {
            try await output.addViewer(offer: try String(contentsOf: Self.chromiumOffer, encoding: .utf8))
        }
        XCTAssertTrue(answer.sdp.contains("a=candidate:"), answer.sdp)
        XCTAssertTrue(answer.sdp.contains("a=sendonly"), answer.sdp)
        XCTAssertTrue(answer.sdp.contains("a=rtpmap:108 H264/90000"), answer.sdp)
        XCTAssertEqual(output.viewerCount, 1)
        var deadline = Date().addingTimeInterval(5)
        while output.encodedFrameCount < 10, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertGreaterThanOrEqual(output.encodedFrameCount, 10, "the encode started for the viewer")

        deadline = Date().addingTimeInterval(5)
        while output.viewerCount > 0, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertEqual(output.viewerCount, 0, "the viewer that never connected is still held")
        // The branch left the graph: the count stops.
        try await Task.sleep(for: .milliseconds(300))
        let stopped = output.encodedFrameCount
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(output.encodedFrameCount, stopped, "frames are still encoded for nobody")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    func testAViewerNeedsARunningSession() async throws {
        let output = CaptureWebRTCOutput()
        let offer = try String(contentsOf: Self.chromiumOffer, encoding: .utf8)
        do {
            _ = try await output.addViewer(offer: offer)
            XCTFail("answered without a session")
        } catch {
            XCTAssertEqual(error.description, CaptureError.sessionNotRunning.description)
        }
    }
}
