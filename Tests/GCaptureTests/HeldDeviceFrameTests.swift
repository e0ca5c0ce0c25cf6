import Foundation
import CGst
@testable import GCapture
@testable import GStreamerKit
import XCTest

/// Frames of a real camera kept by an output (issue 26), inside ../shared/testbed/v4l2-vm like the rest of
/// InterruptionDeviceTests: a V4L2 camera's frames reach the outputs in the driver's memory, and only those
/// outputs that keep frames copy them (DeviceFrameCopy).
extension InterruptionDeviceTests {
    /// A recording's encoder keeps frames (its input queue, x264's lookahead). One it still held in the
    /// driver's memory when the camera was unplugged kept the camera open, and vivid, like a USB camera,
    /// comes back only once its last handle is closed. Here the encoder keeps a frame from before the unplug
    /// until the test lets it go: the camera must come back meanwhile, which it does only when what a
    /// recording keeps is a copy. (Without the copy at the encoder's entrance this fails: no interruptionEnded.)
    func testACameraComesBackWhileARecordingStillKeepsAFrameFromBeforeTheUnplug() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        try requireFreshProcess()
        let session = try makeSession(camera: try vivid(), preset: Self.preset, outputs: [movie])
        let log = SessionEventLog(session)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let waiter = await startRecording(movie, to: folder.appendingPathComponent("held.mp4"))
        // The recording takes its video from an encoder shared with other outputs (none here). Past its input
        // queue, as x264's lookahead would, this probe keeps a reference to one frame (the thread goes on:
        // a thread stopped there would also stop the queries a branch must answer) until the test lets go.
        let input = try XCTUnwrap(session.runningGraph?.sharedEncoders.first?.branch.bin.element(named: "video_in")?.staticPad("src"),
                                  "the recording takes no shared encoder's video")
        let kept = Locked<Sample?>(nil)
        input.addProbe(.buffer) { info in
            guard let buffer = info.raw.pointee.data.map({ UnsafeMutablePointer<GstBuffer>(OpaquePointer($0)) }),
                  let sample = gst_sample_new(buffer, nil, nil, nil) else { return .remove }
            kept.withLock { $0 = Sample(adopting: sample) }
            return .remove
        }
        // Never kept past the test, whatever fails below.
        defer { kept.withLock { $0 = nil } }
        let deadline = Date().addingTimeInterval(10)
        while kept.withLock({ $0 == nil }), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertNotNil(kept.withLock { $0 }, "no frame reached the encoder's input within 10 s")

        _ = try disconnectVivid()
        let interrupted = await log.wait(timeout: 5) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted, "no interruption within 5 s: \(log.all.map { "\($0.event)" })")
        let ended = await log.wait(timeout: 15) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "the camera did not come back within 15 s while the recording kept a frame of it from before: "
                      + "\(log.all.map { "\($0.event)" }); this process still holds \(V4L2DeviceTests.openCameraNodes())")
        XCTAssertEqual(log.endings.map(\.reason), [.videoDeviceUnplugged])
        kept.withLock { $0 = nil }

        try await Task.sleep(for: .milliseconds(1000))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertTrue(log.runtimeErrors.isEmpty, "\(log.runtimeErrors)")
    }
}
