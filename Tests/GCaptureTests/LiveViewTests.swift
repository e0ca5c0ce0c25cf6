import Foundation
@testable import GCapture
@testable import GCaptureWeb
import GStreamerKit
import NIOCore
import XCTest

/// The web page's live view against a real session: the camera's frames while it runs, "NO SIGNAL" while it
/// is interrupted (not the black filler the outputs get meanwhile), the camera's frames again after.
final class LiveViewTests: XCTestCase {
    func testViewersSeeNoSignalWhileTheCameraIsInterruptedAndThePictureAgainAfter() async throws {
        let liveView = try LiveView(settings: .init(width: 320, height: 240, framesPerSecond: 15, quality: 70))
        let session = try makeSession(camera: CaptureDevice.makeTestCamera(uniqueID: "test-live", options: TestCameraOptions()),
                                      outputs: [liveView.output])
        liveView.follow(session)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let parts = Locked<[(at: Double, noSignal: Bool)]>([])
        let noSignal = liveView.noSignalPart
        let key = liveView.addViewer { part in parts.withLock { $0.append((monotonicMilliseconds(), part == noSignal)) } }
        defer { liveView.removeViewer(key) }

        func waitFor(_ what: String, seconds: Double, _ condition: @escaping ([(at: Double, noSignal: Bool)]) -> Bool) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while !condition(parts.withLock { $0 }) {
                guard Date() < deadline else { throw CheckFailed(description: "\(what) within \(seconds) s: \(parts.withLock { $0.map(\.noSignal) })") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await waitFor("5 camera frames", seconds: 5) { $0.filter { !$0.noSignal }.count >= 5 }
        let interruptedAt = monotonicMilliseconds()
        session.queue.async { session.interruptions.interrupt(.video, reason: .videoDeviceStalled) }
        try await waitFor("the no-signal picture", seconds: 2) { $0.contains { $0.noSignal && $0.at > interruptedAt } }
        let shownAfter = try XCTUnwrap(parts.withLock { $0.first { $0.noSignal && $0.at > interruptedAt } }).at - interruptedAt
        XCTAssertLessThan(shownAfter, 500, "viewers saw the camera's absence \(shownAfter) ms late")
        // The test camera comes back by itself; so does its picture.
        try await waitFor("camera frames after the interruption", seconds: 8) { entries in
            guard let last = entries.lastIndex(where: \.noSignal) else { return false }
            return entries[(last + 1)...].count >= 3
        }
        XCTAssertEqual(liveView.encodedFrameCount, parts.withLock { $0.filter { !$0.noSignal }.count },
                       "every encoded frame reached the viewer, and no filler frame was shown as the camera")
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let picture = FileManager.default.temporaryDirectory.appendingPathComponent("no-signal-\(UUID()).jpg")
        defer { try? FileManager.default.removeItem(at: picture) }
        try NoSignalPicture.jpeg(width: 320, height: 240).write(to: picture)
        let size = try XCTUnwrap(try probe(picture, countFrames: false).videoSize)
        XCTAssertEqual([size.width, size.height], [320, 240])
        // ffmpeg's reading of the middle band, 32 cells: white letters on dark grey; the top band is plain grey.
        func band(_ crop: String) throws -> [UInt8] {
            let raw = picture.deletingPathExtension().appendingPathExtension("\(crop.hashValue & 0xffff).gray")
            defer { try? FileManager.default.removeItem(at: raw) }
            let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", picture.path, "-vf",
                                                          "\(crop),scale=32:1:flags=area,format=gray", "-f", "rawvideo", raw.path])
            XCTAssertEqual(result.status, 0, result.stderr)
            return [UInt8](try Data(contentsOf: raw))
        }
        let middle = try band("crop=iw:ih/16:0:ih*15/32"), top = try band("crop=iw:ih/8:0:0")
        XCTAssertGreaterThan(middle.max() ?? 0, 100, "no letters: \(middle)")
        XCTAssertLessThan(top.max() ?? 255, 60, "not a dark picture: \(top)")
    }
}
