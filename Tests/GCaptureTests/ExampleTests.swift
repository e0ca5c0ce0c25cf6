import Foundation
import GCapture
import XCTest

/// The example programs (Examples/), built with the package, each run for a few seconds on the test camera
/// as a user would run it, their files checked by ffprobe and exiftool.
final class ExampleTests: XCTestCase {
    /// A key (a line from a pipe) and SIGUSR1 each take a photo after the countdown; the booth closes on
    /// SIGTERM and lists the photos newest first.
    func testThePhotoBoothTakesAPhotoOnAKeyAndOnSIGUSR1() throws {
        let folder = try temporaryFolder()
        let booth = try launch("photo-booth", ["--camera", "test", "--preset", "vga640x480", "--no-preview", "--countdown", "1", "--folder", folder.path],
                               writesStdin: true)
        XCTAssertTrue(waitForLine(booth, containing: "ready: ", timeout: 30), "\(booth.output)\n\(booth.errorOutput)")
        booth.signal(SIGUSR1)
        XCTAssertTrue(waitForLine(booth, containing: "saved ", count: 1, timeout: 20), "\(booth.output)\n\(booth.errorOutput)")
        booth.send("")
        XCTAssertTrue(waitForLine(booth, containing: "saved ", count: 2, timeout: 20), "\(booth.output)\n\(booth.errorOutput)")
        XCTAssertTrue(booth.output.contains("SIGUSR1: smile!") && booth.output.contains("key: smile!"), booth.output)
        XCTAssertTrue(booth.output.contains("1..."), "no countdown: \(booth.output)")
        booth.signal(SIGTERM)
        XCTAssertTrue(booth.waitForExit(timeout: 30))
        XCTAssertEqual(booth.status, 0, booth.errorOutput)

        let photos = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        XCTAssertEqual(photos, ["booth-0001.jpg", "booth-0002.jpg"])
        for name in photos {
            let facts = try exif(folder.appendingPathComponent(name))
            XCTAssertEqual(facts["FileType"] as? String, "JPEG", name)
            XCTAssertGreaterThanOrEqual(facts["ImageWidth"] as? Int ?? 0, 640, name)
        }
        let gallery = booth.output.components(separatedBy: "gallery (2, newest first):\n").last ?? ""
        XCTAssertEqual(gallery.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) },
                       ["booth-0002.jpg", "booth-0001.jpg"].map { folder.appendingPathComponent($0).path }, booth.output)
    }

    /// With its preview on a real X server (Xvfb): the picture is drawn, and the shutter works as without it.
    func testThePhotoBoothShowsItsPreview() throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        let booth = try launch("photo-booth", ["--camera", "test", "--preset", "vga640x480", "--countdown", "0", "--folder", folder.path],
                               environment: ["DISPLAY": display.name, "WAYLAND_DISPLAY": ""], writesStdin: true)
        XCTAssertTrue(waitForLine(booth, containing: "ready: ", timeout: 30), "\(booth.output)\n\(booth.errorOutput)")
        booth.send("")
        XCTAssertTrue(waitForLine(booth, containing: "saved ", timeout: 20), "\(booth.output)\n\(booth.errorOutput)")
        let shot = folder.appendingPathComponent("screen.png")
        try screenshot(display, width: display.width, height: display.height, to: shot)
        // Xvfb's root window is black; the test camera's bars are not.
        let profile = try lumaProfile(shot)
        XCTAssertGreaterThan(profile.map(Int.init).reduce(0, +) / profile.count, 20, "nothing drawn: \(profile)")
        // A second of preview at 30 fps, whatever the shot took (the booth once ran 0.4 s in all, 9 frames).
        Thread.sleep(forTimeInterval: 1)
        booth.send("q")
        XCTAssertTrue(booth.waitForExit(timeout: 30))
        XCTAssertEqual(booth.status, 0, booth.errorOutput)
        let shown = booth.output.split(separator: "\n").first { $0.hasPrefix("the preview showed ") }
        let frames = shown.flatMap { Int($0.split(separator: " ")[3]) } ?? 0
        XCTAssertGreaterThan(frames, 10, booth.output)
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder.appendingPathComponent("booth-0001.jpg").path))
    }

    /// Segments of 2 s, one after the other, each finalized and playable; the last is finalized on stop.
    func testTheRecorderGoesOnFromFileToFile() throws {
        let folder = try temporaryFolder()
        let result = try runProduct("recorder", ["--camera", "test", "--microphone", "none", "--folder", folder.path,
                                                 "--segment", "2", "--duration", "7"], timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        XCTAssertGreaterThanOrEqual(files.count, 2, result.stdout)
        XCTAssertEqual(files.first, "recording-0001.mp4")
        XCTAssertTrue(result.stdout.contains("(the recording reached its maximum duration)"), result.stdout)
        XCTAssertTrue(result.stdout.hasSuffix("\(files.count) files in \(folder.path)\n"), result.stdout)
        for name in files {
            let url = folder.appendingPathComponent(name)
            let movie = try probe(url)
            XCTAssertGreaterThan(movie.duration, 0.2, name)
            XCTAssertLessThanOrEqual(movie.duration, 2.1, name)
            XCTAssertTrue(try ffmpegDecodes(url), name)
        }
    }

    /// The test camera's scripted scene: the object that appears after 2 s is motion, told with a box around
    /// it, and with --record the motion's clip begins with its pre-roll and plays; the picture without the
    /// object shows none.
    func testTheMotionDetectorSeesTheSceneObjectAndRecordsItsClip() throws {
        let folder = try temporaryFolder()
        let moving = try runProduct("motion-detector", ["--camera", "test", "--record", folder.path, "--duration", "6"], timeout: 60)
        XCTAssertEqual(moving.status, 0, moving.stderr)
        let began = try XCTUnwrap(moving.stdout.split(separator: "\n").first { $0.hasPrefix("motion began at ") }, moving.stdout)
        // "motion began at 2.03 s: x 0.10 y 0.15, 0.25 × 0.30 (score 0.075)": the object's place and area.
        let numbers = began.split(whereSeparator: { " :,(×)".contains($0) }).compactMap { Double($0) }
        XCTAssertEqual(numbers.count, 6, String(began))
        if numbers.count == 6 {
            XCTAssertEqual(numbers[0], 2, accuracy: 1, "not when the object appeared: \(began)")
            for (seen, object) in zip(numbers[1...4], [0.10, 0.15, 0.25, 0.30]) { XCTAssertEqual(seen, object, accuracy: 0.03, String(began)) }
            XCTAssertEqual(numbers[5], 0.25 * 0.30, accuracy: 0.03, String(began))
        }
        let movingSummary = try summary(moving.stdout)
        XCTAssertGreaterThan(movingSummary.frames, 100, moving.stdout)
        XCTAssertGreaterThan(movingSummary.withMotion, 0, moving.stdout)

        let clip = folder.appendingPathComponent("motion-0001.mp4")
        XCTAssertTrue(moving.stdout.contains("clip \(clip.path): "), moving.stdout)
        // From up to 2 s before the motion (the pre-roll) to the end of the run, 4 s after it.
        let probed = try probe(clip)
        XCTAssertGreaterThan(probed.duration, 4.5, "the clip lacks its pre-roll or its end")
        XCTAssertEqual(probed.codecs, ["h264"])
        XCTAssertTrue(try ffmpegDecodes(clip))
        XCTAssertTrue(try EventClipRecord.read(forClip: clip).triggers.allSatisfy { $0.source == "motion" })

        let still = try runProduct("motion-detector", ["--camera", "test-still", "--duration", "3"], timeout: 60)
        XCTAssertEqual(still.status, 0, still.stderr)
        XCTAssertFalse(still.stdout.contains("motion began"), still.stdout)
        let stillSummary = try summary(still.stdout)
        XCTAssertGreaterThan(stillSummary.frames, 20, still.stdout)
        XCTAssertEqual(stillSummary.withMotion, 0, still.stdout)
    }

    /// "91 frames, 90 with motion, ...": the last line.
    private func summary(_ output: String) throws -> (frames: Int, withMotion: Int) {
        let last = try XCTUnwrap(output.split(separator: "\n").last)
        let numbers = last.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) }
        guard numbers.count >= 2 else { throw CheckFailed(description: "no summary in \(output)") }
        return (numbers[0], numbers[1])
    }

    private func waitForLine(_ command: LaunchedCommand, containing text: String, count: Int = 1, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while command.output.components(separatedBy: text).count - 1 < count {
            if Date() >= deadline || !command.process.isRunning { return false }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return true
    }
}

/// The recorder with a real camera (vivid, in the v4l2 VM) that is unplugged while it records.
///     ../shared/testbed/v4l2-vm -- .build/debug/gcapturePackageTests.xctest GCaptureTests.ExampleV4L2Tests
final class ExampleV4L2Tests: XCTestCase {
    override func setUpWithError() throws { try requireVividCamera() }

    /// vivid's `disconnect` (a USB unplug as the driver sees it): the recorder hears the interruption and its
    /// end through the session's notifications, and the one file goes on through the gap and plays.
    func testTheRecorderLivesThroughAnUnpluggedCamera() throws {
        let folder = try temporaryFolder()
        let recorder = try launch("recorder", ["--camera", "/dev/video0", "--microphone", "none", "--preset", "low",
                                               "--folder", folder.path, "--segment", "120", "--duration", "14"])
        let deadline = Date().addingTimeInterval(90)
        while !recorder.output.contains("recording "), recorder.process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        XCTAssertTrue(recorder.output.contains("recording "), recorder.output + recorder.errorOutput)
        Thread.sleep(forTimeInterval: 3)
        let unplug = try runTool("/usr/bin/v4l2-ctl", ["-d", "/dev/video0", "--set-ctrl", "disconnect=1"])
        XCTAssertEqual(unplug.status, 0, unplug.stderr)
        XCTAssertTrue(recorder.waitForExit(timeout: 120), recorder.output)
        XCTAssertEqual(recorder.status, 0, recorder.errorOutput)
        XCTAssertTrue(recorder.output.contains("interrupted: the camera was unplugged"), recorder.output)
        XCTAssertTrue(recorder.output.contains("interruption ended: the camera was unplugged"), recorder.output)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        XCTAssertEqual(files, ["recording-0001.mp4"], recorder.output)
        let url = folder.appendingPathComponent("recording-0001.mp4")
        XCTAssertGreaterThan(try probe(url).duration, 8, recorder.output)
        XCTAssertTrue(try ffmpegDecodes(url))
    }
}
