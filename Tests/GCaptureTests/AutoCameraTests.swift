import Foundation
@testable import GCapture
import XCTest

/// Issue 24: a description's `camera: auto` with no camera present waits for one, interrupted, and never
/// takes the built-in test camera (a kiosk started before its camera would show a test pattern for good).
/// Here, on a machine without a camera; AutoCameraV4L2Tests plugs one in.
final class AutoCameraDescriptionTests: XCTestCase {
    override func setUpWithError() throws {
        if FileManager.default.fileExists(atPath: "/dev/video0") { throw XCTSkip("this machine has a camera; the test needs none") }
    }

    static func writeDescription(camera: String, in folder: URL) throws -> URL {
        let file = folder.appendingPathComponent("kiosk.yaml")
        try """
            version: 1
            camera:
              id: \(camera)
              preset: low
            microphone: none
            outputs:
              photo:
                folder: photos
              movie:
                folder: movies
                audio: false
            """.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    /// No GCAPTURE_TEST_DEVICES: the kiosk's own environment.
    static let environment = ["GCAPTURE_TEST_DEVICES": "0"]

    func testAutoWithoutACameraStartsInterruptedAndAReloadKeepsWaiting() throws {
        let folder = try temporaryFolder()
        let file = try Self.writeDescription(camera: "auto", in: folder)
        let run = try launch("gcapture", ["run", file.path, "--json"], environment: Self.environment, writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        let started = try XCTUnwrap(run.events("started").first)
        XCTAssertFalse((started["camera"] as? String ?? "").contains("[test]"), "the test camera stands in: \(started)")
        XCTAssertEqual(started["testDevice"] as? Bool, false, "\(started)")
        XCTAssertTrue(run.waitForEvent("interrupted"), "not interrupted: \(run.output)")
        XCTAssertEqual(run.events("interrupted").first?["code"] as? Int, CaptureSession.InterruptionReason.videoDeviceUnplugged.rawValue)

        // As during any interruption: a photo fails at once, a recording takes the black frames.
        run.send(#"{"id": 1, "command": "photo"}"#)
        let photo = try XCTUnwrap(run.waitForReply(1), run.output)
        XCTAssertEqual(photo["ok"] as? Bool, false, "\(photo)")
        XCTAssertTrue((photo["error"] as? String ?? "").contains("interrupted"), "\(photo)")
        run.send(#"{"id": 2, "command": "record", "action": "start"}"#)
        let movie = URL(fileURLWithPath: try XCTUnwrap(run.waitForReply(2)?["path"] as? String, run.output))
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: 2), "the recording does not go on: \(run.output)")
        run.send(#"{"id": 3, "command": "record", "action": "stop"}"#)
        XCTAssertEqual(run.waitForReply(3)?["ok"] as? Bool, true, run.output)

        // A reload while no camera is there keeps waiting for one: no swap to the test camera.
        run.signal(SIGHUP)
        XCTAssertTrue(run.waitForEvent("reloaded"), "no reload: \(run.output) \(run.errorOutput)")
        XCTAssertFalse(run.waitForEvent("interruptionEnded", timeout: 2), "the reload ended the wait: \(run.output)")
        run.send(#"{"id": 4, "command": "photo"}"#)
        XCTAssertEqual(run.waitForReply(4)?["ok"] as? Bool, false, "a photo after the reload: \(run.output)")
        run.send(#"{"id": 5, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)

        let lumas = try meanLumas(movie)
        XCTAssertGreaterThan(lumas.count, 5, "too few frames in \(movie.path)")
        XCTAssertLessThan(lumas.max() ?? 255, 20, "frames that are no filler (black): \(lumas)")
    }

    /// `inspect` says the run will wait (a notice), and names no test camera; `id: test` is the test camera.
    func testInspectSaysTheRunWaitsAndTestStillNamesTheTestCamera() throws {
        let folder = try temporaryFolder()
        let auto = try runGCapture(["inspect", try Self.writeDescription(camera: "auto", in: folder).path], timeout: 30)
        XCTAssertEqual(auto.status, 0, auto.stderr)
        XCTAssertTrue(auto.stderr.contains("no camera present now"), auto.stderr)
        XCTAssertFalse(auto.stderr.contains("test camera") || auto.stdout.contains("[test]"), auto.stdout + auto.stderr)

        let test = try launch("gcapture", ["run", try Self.writeDescription(camera: "test", in: folder).path, "--json"],
                              environment: Self.environment, writesStdin: true)
        XCTAssertTrue(test.waitForEvent("started"), "not started: \(test.errorOutput)")
        XCTAssertTrue((test.events("started").first?["camera"] as? String ?? "").contains("[test]"), test.output)
        test.send(#"{"id": 1, "command": "photo"}"#)
        XCTAssertEqual(test.waitForReply(1)?["ok"] as? Bool, true, test.output)
        XCTAssertTrue(test.events("interrupted").isEmpty, test.output)
        test.send(#"{"id": 2, "command": "quit"}"#)
        XCTAssertTrue(test.waitForExit(timeout: 20), "quit did not end the run")
    }
}

/// The camera appears while `gcapture run` waits: inside ../shared/testbed/v4l2-vm started with --no-vivid,
/// the test loads vivid itself (.ci/run runs it so, alone; GCAPTURE_AUTOCAM_TEST=1).
final class AutoCameraV4L2Tests: XCTestCase {
    func testAutoTakesTheFirstCameraThatAppearsAndTheRecordingShowsIt() throws {
        let environment = ProcessInfo.processInfo.environment
        guard environment["V4L2VM"] == "1", environment["GCAPTURE_AUTOCAM_TEST"] == "1" else {
            throw XCTSkip("loads vivid: run inside ../shared/testbed/v4l2-vm --no-vivid with GCAPTURE_AUTOCAM_TEST=1 (.ci/run does)")
        }
        guard !FileManager.default.fileExists(atPath: "/dev/video0") else {
            throw TestEnvironment.MissingPart(description: "vivid is loaded already: start the VM with --no-vivid")
        }
        let folder = try temporaryFolder()
        let file = try AutoCameraDescriptionTests.writeDescription(camera: "auto", in: folder)
        let run = try launch("gcapture", ["run", file.path, "--json"], environment: AutoCameraDescriptionTests.environment,
                             writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started", timeout: 60), "not started: \(run.errorOutput)")
        XCTAssertTrue(run.waitForEvent("interrupted", timeout: 30), "not interrupted: \(run.output)")
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        let movie = URL(fileURLWithPath: try XCTUnwrap(run.waitForReply(1, timeout: 30)?["path"] as? String, run.output))
        Thread.sleep(forTimeInterval: 3)
        let loaded = try runTool("/usr/sbin/modprobe", ["vivid"])
        XCTAssertEqual(loaded.status, 0, loaded.stderr)
        // udev announces the camera; under TCG the VM is slow to set it up.
        XCTAssertTrue(run.waitForEvent("interruptionEnded", timeout: 60), "the camera that appeared was not taken: \(run.output) \(run.errorOutput)")
        let progress = run.events("recordingProgress").count
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: progress + 3, timeout: 30), run.output)
        run.send(#"{"id": 2, "command": "photo"}"#)
        XCTAssertEqual(run.waitForReply(2, timeout: 30)?["ok"] as? Bool, true, "no photo of the camera: \(run.output)")
        run.send(#"{"id": 3, "command": "record", "action": "stop"}"#)
        XCTAssertEqual(run.waitForReply(3, timeout: 30)?["ok"] as? Bool, true, run.output)
        run.send(#"{"id": 4, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 60), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)

        // Black while waiting, then vivid's picture (its colour bars are far from black).
        let lumas = try meanLumas(movie)
        let firstPicture = try XCTUnwrap(lumas.firstIndex { $0 > 40 }, "no frame of the camera in the recording: \(lumas)")
        XCTAssertGreaterThan(firstPicture, 0, "the recording does not start with the filler: \(lumas)")
        XCTAssertLessThan(lumas[0], 20, "\(lumas)")
    }
}

extension XCTestCase {
    /// Each frame's mean luma, as ffmpeg decodes the file (0-255 full range: black is 0, not 16).
    func meanLumas(_ url: URL) throws -> [Double] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("lumas-\(UUID().uuidString).raw")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", url.path,
                                                      "-vf", "scale=8:8,format=gray", "-f", "rawvideo", output.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let bytes = [UInt8](try Data(contentsOf: output))
        return stride(from: 0, to: bytes.count - 63, by: 64).map { start in
            Double(bytes[start..<start + 64].reduce(0) { $0 + Int($1) }) / 64
        }
    }
}

/// The engine's side, without a description: a session whose camera input is
/// `CaptureDevice.firstAvailableCamera()` on a machine without a camera.
final class FirstAvailableCameraTests: XCTestCase {
    func testASessionWaitingForAFirstCameraIsInterruptedUntilACameraIsCommitted() async throws {
        guard CaptureDevice.firstCameraPresent() == nil else { throw XCTSkip("this machine has a camera; the test needs none") }
        let session = CaptureSession()
        let log = SessionEventLog(session)
        let frames = CaptureVideoDataOutput()
        let waiting = try CaptureDeviceInput(device: .firstAvailableCamera())
        session.beginConfiguration()
        try session.add(waiting)
        try session.add(frames)
        session.sessionPreset = .low
        try await session.commit()
        try await session.start()
        XCTAssertEqual(session.interruptionReasons, [.videoDeviceUnplugged])
        let interrupted = await log.wait(timeout: 10) { !$0.interruptions.isEmpty }
        XCTAssertTrue(interrupted, "no wasInterrupted: \(log.all.map { "\($0.event)" })")
        XCTAssertEqual(log.interruptions.map(\.reason), [.videoDeviceUnplugged])

        // The app names a camera itself: the wait is over.
        session.beginConfiguration()
        session.removeInput(waiting)
        try session.add(CaptureDeviceInput(device: .testCamera))
        try await session.commit()
        XCTAssertFalse(session.isInterrupted)
        let ended = await log.wait(timeout: 10) { !$0.endings.isEmpty }
        XCTAssertTrue(ended, "no interruptionEnded: \(log.all.map { "\($0.event)" })")
        await session.stop()
    }
}
