import Foundation
import XCTest

/// `gcapture stream` publishing over WHIP to a receiver nobody here wrote the WebRTC of: webrtcbin in a Python
/// GStreamer peer (Tests/GCaptureTests/WebRTC/gst_peer.py) that records what arrives, as it arrives, into
/// Matroska; ffprobe reads the file.
final class StreamWHIPTests: XCTestCase {
    static let peer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("WebRTC/gst_peer.py")

    func requireGStreamerPython() throws {
        let check = "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstWebRTC', '1.0'); from gi.repository import GstWebRTC"
        guard (try? runTool("/usr/bin/python3", ["-c", check]).status) == 0 else {
            throw TestEnvironment.missing("GStreamer's WebRTC for Python is not installed (apt install python3-gi gir1.2-gst-plugins-bad-1.0)")
        }
    }

    /// A WHIP receiver on `port`, recording into `file`, once it listens.
    func startReceiver(port: Int, file: URL) throws -> LaunchedCommand {
        let receiver = try LaunchedCommand(URL(fileURLWithPath: "/usr/bin/python3"),
                                           [Self.peer.path, "whip-receiver", "--port", "\(port)", "--output", file.path])
        addTeardownBlock { receiver.kill() }
        guard receiver.waitForEvent("listening", timeout: 20) else {
            throw CheckFailed(description: "the WHIP receiver did not start: \(receiver.errorOutput)")
        }
        return receiver
    }

    /// What `receiver` recorded into `file` once the publisher ended its session (DELETE: the receiver closed
    /// the file) and the receiver stopped: H.264 and Opus, as ffprobe reads them.
    func recording(of receiver: LaunchedCommand, in file: URL) throws -> ProbedMovie {
        XCTAssertTrue(receiver.waitForEvent("ended", timeout: 10), receiver.output)
        receiver.signal(SIGTERM)
        XCTAssertTrue(receiver.waitForExit(timeout: 20))
        let movie = try probe(file)
        XCTAssertEqual(Set(movie.codecs), ["h264", "opus"], "\(movie.streams)")
        return movie
    }

    func testStreamPublishesOverWHIPAndTheReceiverGetsH264AndOpus() throws {
        try requireGStreamerPython()
        let folder = try temporaryFolder()
        let port = try freeLoopbackPort()
        let file = folder.appendingPathComponent("received.mkv")
        let receiver = try startReceiver(port: port, file: file)

        let stream = try runGCapture(["stream", "whip://127.0.0.1:\(port)/whip", "--duration", "6", "--json"], timeout: 60)
        XCTAssertEqual(stream.status, 0, stream.stderr)
        let states = stream.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertTrue(states.contains { $0["state"] as? String == "live" }, stream.stdout)
        let movie = try recording(of: receiver, in: file)
        XCTAssertGreaterThanOrEqual(movie.videoFrames ?? 0, 120, "about 5 s live at 30 fps")
    }

    func testAKilledAndRestartedReceiverIsPublishedToAgain() throws {
        try requireGStreamerPython()
        let folder = try temporaryFolder()
        let port = try freeLoopbackPort()
        let first = try startReceiver(port: port, file: folder.appendingPathComponent("first.mkv"))
        let stream = try launch("gcapture", ["stream", "whip://127.0.0.1:\(port)/whip", "--json"])
        XCTAssertTrue(first.waitForEvent("session", timeout: 30), first.output)
        Thread.sleep(forTimeInterval: 2)
        first.kill()

        // Another receiver on the same port, as a restarted server would be: the stream finds it out (nothing
        // comes back from the dead one) and publishes again.
        let secondFile = folder.appendingPathComponent("second.mkv")
        let second = try startReceiver(port: port, file: secondFile)
        XCTAssertTrue(second.waitForEvent("session", timeout: 40), "no reconnection: \(stream.output)")
        Thread.sleep(forTimeInterval: 3)
        stream.signal(SIGINT)
        XCTAssertTrue(stream.waitForExit(timeout: 30))
        XCTAssertEqual(stream.status, 0, stream.errorOutput)
        XCTAssertTrue(stream.events("streamState").contains { $0["state"] as? String == "reconnecting" }, stream.output)
        let movie = try recording(of: second, in: secondFile)
        XCTAssertGreaterThanOrEqual(movie.videoFrames ?? 0, 60, "about 3 s after the reconnection")
    }
}
