import Foundation
import XCTest

/// `gcapture run` with a real camera that goes silent (vivid dropping every buffer, in the v4l2 VM): a recording
/// asked for meanwhile.
///     ../shared/testbed/v4l2-vm -- .build/debug/gcapturePackageTests.xctest GCaptureTests.RunCommandV4L2Tests
final class RunCommandV4L2Tests: XCTestCase {
    override func setUpWithError() throws { try requireVividCamera() }

    /// A `record start` while the camera delivers nothing (a stall interruption) is answered at once: the take
    /// begins, its file gets the frames once they come again, and it stops into a movie that plays. `run` never
    /// waits for the camera to start a take, so its 15 s start timeout is not reached here (see CaptureController).
    func testARecordingAskedForWhileTheCameraIsSilentBeginsAndGetsTheFramesWhenTheyCome() throws {
        let folder = try temporaryFolder()
        addTeardownBlock { try? self.setVividControl("percentage_of_dropped_buffers", 0) }
        let run = try launch("gcapture", ["run", "--camera", "/dev/video0", "--microphone", "none", "--preset", "vga640x480",
                                          "--json", "--photo-folder", folder.path, "--movie-folder", folder.path], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started", timeout: 120), "not started: \(run.errorOutput)")

        try setVividControl("percentage_of_dropped_buffers", 100)
        XCTAssertTrue(run.waitForEvent("interrupted", timeout: 30), "the silent camera was not reported: \(run.output)")
        let clip = folder.appendingPathComponent("clip.mp4")
        let asked = Date()
        run.send(#"{"id": 1, "command": "record", "action": "start", "path": "\#(clip.path)"}"#)
        let started = try XCTUnwrap(run.waitForReply(1, timeout: 30), "no reply to record start: \(run.output)")
        XCTAssertEqual(started["ok"] as? Bool, true, "\(started)")
        // Seconds would mean it waited for the camera; the VM's emulated CPU is slow, but not that slow.
        XCTAssertLessThan(Date().timeIntervalSince(asked), 5, "record start waited for the silent camera")
        Thread.sleep(forTimeInterval: 1)

        try setVividControl("percentage_of_dropped_buffers", 0)
        XCTAssertTrue(run.waitForEvent("interruptionEnded", timeout: 30), "frames did not come again: \(run.output)")
        Thread.sleep(forTimeInterval: 3)
        run.send(#"{"id": 2, "command": "record", "action": "stop"}"#)
        let stopped = try XCTUnwrap(run.waitForReply(2, timeout: 60), run.output)
        XCTAssertEqual(stopped["ok"] as? Bool, true, "\(stopped)")
        XCTAssertEqual(stopped["path"] as? String, clip.path)

        run.send(#"{"id": 3, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 60), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)
        let movie = try probe(clip)
        XCTAssertEqual(movie.codecs, ["h264"])
        XCTAssertGreaterThan(movie.duration, 2, "the frames after the silence are missing")
        XCTAssertGreaterThan(movie.videoFrames ?? 0, 30)
    }
}
