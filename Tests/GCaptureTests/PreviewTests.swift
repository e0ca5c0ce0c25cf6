import Foundation
@testable import GCapture
import GCaptureDescription
import GStreamerKit
import XCTest

/// The preview on a real X server (Xvfb) with a real X sink, read back through screenshots.
final class PreviewTests: XCTestCase {
    /// SMPTE bars, still: white on the left to blue on the right, so a mirror image tells itself apart.
    private func camera(position: CaptureDevice.Position, id: String) -> CaptureDevice {
        .makeTestCamera(uniqueID: id, options: .init(pattern: .smpte, motion: 0, position: position,
                                                     sizes: [.init(width: 640, height: 480)], maxFrameRate: 30))
    }

    private func preview(on display: VirtualDisplay) -> CapturePreviewOutput {
        CapturePreviewOutput(environment: ["DISPLAY": display.name])
    }

    /// Waits until the preview has shown a few frames, so a screenshot sees the picture, not an empty window.
    private func waitUntilShown(_ preview: CapturePreviewOutput, frames: Int = 10, timeout: TimeInterval = 10) async {
        let deadline = Date().addingTimeInterval(timeout)
        while preview.shownFrameCount < frames, Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        XCTAssertGreaterThanOrEqual(preview.shownFrameCount, frames, "the preview showed too few frames in \(timeout) s")
        // The window is mapped and drawn by the time a few frames have passed the sink; one more frame time.
        try? await Task.sleep(for: .milliseconds(200))
    }

    /// Left-to-right luma of what the preview shows with the given mirroring.
    private func shownProfile(mirrored: Bool?, position: CaptureDevice.Position, display: VirtualDisplay,
                              folder: URL, name: String) async throws -> [UInt8] {
        let preview = preview(on: display)
        if let mirrored {
            preview.connection.automaticallyAdjustsVideoMirroring = false
            preview.connection.isVideoMirrored = mirrored
        }
        let session = try await startSession(camera: camera(position: position, id: "preview-\(name)"), outputs: [preview])
        await waitUntilShown(preview)
        XCTAssertEqual(preview.sinkInUse, "ximagesink", "Xvfb has no Xv: the X sink without it")
        let shot = folder.appendingPathComponent("\(name).png")
        try screenshot(display, width: 640, height: 480, to: shot)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        return try lumaProfile(shot)
    }

    private func assertMirror(_ a: [UInt8], _ b: [UInt8], tolerance: Int = 6, _ what: String,
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.count, b.count, file: file, line: line)
        let worst = zip(a, b.reversed()).map { abs(Int($0) - Int($1)) }.max() ?? 255
        XCTAssertLessThanOrEqual(worst, tolerance, "\(what): \(a) is not the mirror image of \(b)", file: file, line: line)
    }

    /// A description's `outputs.preview` opens a real window with the sink, gravity and mirroring it names;
    /// its picture turns with the description's rotation, as photos do.
    func testADescribedPreviewShowsTheCameraWithItsSinkAndMirroring() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        func shown(mirror: String, rotation: Int = 0) async throws -> (profile: [UInt8], preview: CapturePreviewOutput) {
            let file = folder.appendingPathComponent("preview-\(mirror)-\(rotation).yaml")
            try """
                version: 1
                camera:
                  id: test
                  preset: vga640x480
                rotation: \(rotation)
                outputs:
                  preview:
                    sink: ximagesink display=\(display.name)
                    gravity: resize
                    mirror: \(mirror)
                """.write(to: file, atomically: true, encoding: .utf8)
            let described = try DescribedSession(CaptureDescription.load(contentsOf: file, options: .init(usesTestDevices: true)))
            let preview = try XCTUnwrap(described.previewOutput)
            try await within(engineDeadline, "described.start()") { try await described.start() }
            await waitUntilShown(preview)
            let shot = folder.appendingPathComponent("preview-\(mirror)-\(rotation).png")
            try screenshot(display, width: 640, height: 480, to: shot)
            try await within(engineDeadline, "described.stop()") { await described.stop() }
            guard rotation == 180 else { return (try lumaProfile(shot), preview) }
            // Upside down the top rows are the bars' bottom: turned back vertically, only the left-right turn is left.
            let upright = folder.appendingPathComponent("preview-\(mirror)-\(rotation)-vflip.png")
            let flipped = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", shot.path, "-vf", "vflip", upright.path])
            XCTAssertEqual(flipped.status, 0, flipped.stderr)
            return (try lumaProfile(upright), preview)
        }
        let (plain, plainPreview) = try await shown(mirror: "off")
        XCTAssertEqual(plainPreview.sinkInUse, "ximagesink display=\(display.name)")
        XCTAssertEqual(plainPreview.videoGravity, .resize)
        XCTAssertFalse(plainPreview.connection.isVideoMirrored)
        XCTAssertGreaterThan(Int(plain.first!), Int(plain.last!) + 60, "the bars, white on the left: \(plain)")
        let (mirrored, mirroredPreview) = try await shown(mirror: "on")
        XCTAssertTrue(mirroredPreview.connection.isVideoMirrored)
        assertMirror(mirrored, plain, "the description's mirror: on against off")
        // Turned 180 degrees, as the photos of that description would be: the bars run right to left.
        let (turned, turnedPreview) = try await shown(mirror: "off", rotation: 180)
        XCTAssertEqual(turnedPreview.connection.videoRotationAngle, 180)
        assertMirror(turned, plain, "rotation: 180, turned back upright, against 0")
    }

    func testMirroredPreviewIsTheMirrorImageOfTheUnmirroredOne() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        let plain = try await shownProfile(mirrored: false, position: .back, display: display, folder: folder, name: "plain")
        let mirrored = try await shownProfile(mirrored: true, position: .back, display: display, folder: folder, name: "mirrored")
        // The bars on screen, white on the left: the picture is there and is not symmetric.
        XCTAssertGreaterThan(Int(plain.first!), Int(plain.last!) + 60, "\(plain)")
        assertMirror(mirrored, plain, "mirroring on vs off")
    }

    func testAutomaticMirroringMirrorsAFrontCamerasPreviewButNotItsPhoto() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        let preview = preview(on: display)
        let photos = CapturePhotoOutput()
        let front = camera(position: .front, id: "preview-front")
        let session = try await startSession(camera: front, outputs: [preview, photos])
        await waitUntilShown(preview)
        XCTAssertTrue(preview.connection.automaticallyAdjustsVideoMirroring)
        XCTAssertTrue(preview.connection.isVideoMirrored, "a front camera's preview reads as mirrored")
        XCTAssertFalse(photos.connection.isVideoMirrored, "a front camera's photos read as not mirrored")
        let shot = folder.appendingPathComponent("front-preview.png")
        try screenshot(display, width: 640, height: 480, to: shot)
        let photo = folder.appendingPathComponent("front.jpg")
        _ = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: photo), within: engineDeadline)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let shown = try lumaProfile(shot), captured = try lumaProfile(photo)
        // The photo is the scene (white on the left), the preview its mirror image.
        XCTAssertGreaterThan(Int(captured.first!), Int(captured.last!) + 60, "the photo is mirrored: \(captured)")
        assertMirror(shown, captured, tolerance: 10, "front preview vs its photo")

        // A back camera under the same automatic adjustment: preview and photo alike, neither mirrored.
        let backShown = try await shownProfile(mirrored: nil, position: .back, display: display, folder: folder, name: "back")
        XCTAssertGreaterThan(Int(backShown.first!), Int(backShown.last!) + 60, "a back camera's preview is mirrored: \(backShown)")
    }

    /// A switch of camera tells the preview (videoDeviceDidChange); automatic mirroring then follows the new
    /// camera's position in the running branch.
    func testAutomaticMirroringFollowsTheCameraInARunningPreview() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        let preview = preview(on: display)
        let session = try await startSession(camera: camera(position: .back, id: "preview-follow"), outputs: [preview])
        await waitUntilShown(preview)
        let before = folder.appendingPathComponent("back.png"), after = folder.appendingPathComponent("front.png")
        try screenshot(display, width: 640, height: 480, to: before)
        XCTAssertFalse(preview.connection.isVideoMirrored)
        preview.videoDeviceDidChange(camera(position: .front, id: "preview-follow-front"))
        XCTAssertTrue(preview.connection.isVideoMirrored)
        let shownThen = preview.shownFrameCount
        await waitUntilShown(preview, frames: shownThen + 10)
        try screenshot(display, width: 640, height: 480, to: after)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let back = try lumaProfile(before), front = try lumaProfile(after)
        XCTAssertGreaterThan(Int(back.first!), Int(back.last!) + 60, "\(back)")
        assertMirror(front, back, "after the switch to a front camera")
    }

    /// Mirroring set on the connection of a running preview shows at once, without a rebuild.
    func testMirroringSetWhileRunningShowsAtOnce() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        let preview = preview(on: display)
        let session = try await startSession(camera: camera(position: .back, id: "preview-live"), outputs: [preview])
        await waitUntilShown(preview)
        let before = folder.appendingPathComponent("before.png"), after = folder.appendingPathComponent("after.png")
        try screenshot(display, width: 640, height: 480, to: before)
        preview.connection.automaticallyAdjustsVideoMirroring = false
        preview.connection.isVideoMirrored = true
        await waitUntilShown(preview, frames: preview.shownFrameCount + 10)
        try screenshot(display, width: 640, height: 480, to: after)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let plain = try lumaProfile(before), mirrored = try lumaProfile(after)
        XCTAssertGreaterThan(Int(plain.first!), Int(plain.last!) + 60, "\(plain)")
        assertMirror(mirrored, plain, "mirroring turned on while running")
    }

    func testRotationTurnsThePreview() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let preview = preview(on: display)
        preview.connection.videoRotationAngle = 90
        let session = try await startSession(camera: camera(position: .back, id: "preview-turned"), outputs: [preview])
        await waitUntilShown(preview)
        let folder = try temporaryFolder()
        // Turned a quarter clockwise, the bars run top (white) to bottom (blue) in a 480x640 window.
        let shot = folder.appendingPathComponent("turned.png")
        try screenshot(display, width: 480, height: 640 > display.height ? display.height : 640, to: shot)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let turned = folder.appendingPathComponent("turned-back.png")
        let back = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-i", shot.path,
                                                   "-vf", "transpose=cclock", turned.path])
        XCTAssertEqual(back.status, 0, back.stderr)
        let profile = try lumaProfile(turned)
        XCTAssertGreaterThan(Int(profile.first!), Int(profile.last!) + 60, "\(profile)")
    }

    /// ximagesink cannot scale: the branch scales to the render rectangle's size, keeping the aspect with
    /// bars (resizeAspect) or cropping (resizeAspectFill).
    func testGravityFitsTheRenderRectangleOnASinkThatCannotScale() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        // Rows of the screen's left column band, top to bottom, for a 2:1 rectangle of 480x240.
        func shown(_ gravity: CapturePreviewOutput.VideoGravity) async throws -> (inside: [UInt8], below: [UInt8], wide: [UInt8]) {
            let preview = preview(on: display)
            preview.videoGravity = gravity
            preview.renderRectangle = .init(x: 0, y: 0, width: 480, height: 240)
            let session = try await startSession(camera: camera(position: .back, id: "preview-\(gravity)"), outputs: [preview])
            await waitUntilShown(preview)
            let window = folder.appendingPathComponent("\(gravity).png"), below = folder.appendingPathComponent("\(gravity)-below.png")
            try screenshot(display, width: 480, height: 240, to: window)
            try screenshot(display, x: 0, y: 250, width: 480, height: 200, to: below)
            try await within(engineDeadline, "session.stop()") { await session.stop() }
            // Columns of the window's middle rows: letterboxing leaves the sides black.
            let middle = folder.appendingPathComponent("\(gravity)-middle.png")
            let crop = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-i", window.path,
                                                       "-vf", "crop=480:120:0:0", middle.path])
            XCTAssertEqual(crop.status, 0, crop.stderr)
            return (try lumaProfile(middle, width: 16), try lumaProfile(below, width: 4), try lumaProfile(window, width: 16))
        }
        let fit = try await shown(.resizeAspect)
        // 640x480 into 480x240 at 4:3: 320 wide, 80 of black on each side.
        XCTAssertLessThan(Int(fit.inside.first!), 30, "no bar on the left: \(fit.inside)")
        XCTAssertLessThan(Int(fit.inside.last!), 30, "no bar on the right: \(fit.inside)")
        XCTAssertGreaterThan(Int(fit.inside[3]), 150, "no picture in the middle: \(fit.inside)")
        XCTAssertLessThan(fit.below.map(Int.init).max()!, 30, "the window is taller than the rectangle: \(fit.below)")
        let fill = try await shown(.resizeAspectFill)
        XCTAssertGreaterThan(Int(fill.inside.first!), 150, "aspect fill left bars at the side: \(fill.inside)")
        XCTAssertGreaterThan(Int(fill.inside.first!), Int(fill.inside.last!) + 60, "\(fill.inside)")
        let stretched = try await shown(.resize)
        XCTAssertGreaterThan(Int(stretched.inside.first!), 150, "resize left bars at the side: \(stretched.inside)")
        XCTAssertLessThan(Int(stretched.inside.last!), 100, "\(stretched.inside)")
    }

    /// A display too slow to keep up costs the preview frames, never the recording.
    func testASlowPreviewDropsItsOwnFramesOnlyWhileAMovieRecords() async throws {
        let folder = try temporaryFolder()
        let preview = CapturePreviewOutput()
        // 100 ms per frame: a display that keeps up with 10 of the camera's 30 frames a second.
        preview.sinkName = "identity sleep-time=100000 ! fakesink sync=false"
        let movie = CaptureMovieFileOutput()
        let session = try await startSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), outputs: [preview, movie])
        try await Task.sleep(for: .milliseconds(300))
        let url = folder.appendingPathComponent("with-slow-preview.mp4")
        let waiter = await startRecording(movie, to: url)
        let shownBefore = preview.shownFrameCount
        let seconds = 4.0
        try await Task.sleep(for: .seconds(seconds))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        let shown = preview.shownFrameCount - shownBefore
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let probed = try probe(url)
        let frames = try XCTUnwrap(probed.videoFrames)
        let expected = probed.duration * 30
        print("slow preview: recording \(frames) frames in \(String(format: "%.2f", probed.duration)) s (\(Int(expected)) expected), preview shown \(shown) in \(seconds) s")
        XCTAssertGreaterThanOrEqual(Double(frames), expected * 0.97, "the recording lost frames to a slow preview")
        XCTAssertGreaterThanOrEqual(probed.duration, seconds - 0.5)
        XCTAssertLessThan(Double(shown), seconds * 30 / 2, "the slow preview was not slow: the test shows nothing")
        XCTAssertGreaterThan(shown, 0, "the preview showed nothing at all")
    }

    /// Sinks in the order a Linux user expects, with everything tried named when none can show a picture.
    func testSinkChoiceOrder() throws {
        func choose(_ environment: [String: String], opening: Set<String>, drm: Bool = false) throws(CaptureError) -> String {
            try PreviewSink.choose(named: nil, environment: environment, opens: { factory, _ in opening.contains(factory) },
                                   hasDRMDevice: { drm }).description
        }
        let all: Set<String> = ["waylandsink", "xvimagesink", "ximagesink", "glimagesink", "kmssink"]
        XCTAssertEqual(try choose(["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"], opening: all), "waylandsink")
        XCTAssertEqual(try choose(["WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"], opening: ["ximagesink"]), "ximagesink",
                       "XWayland when the compositor refuses waylandsink")
        XCTAssertEqual(try choose(["DISPLAY": ":0"], opening: all), "xvimagesink", "Xv first where the server has it")
        XCTAssertEqual(try choose(["DISPLAY": ":0"], opening: all.subtracting(["xvimagesink"])), "ximagesink")
        XCTAssertEqual(try choose(["DISPLAY": ":0"], opening: ["glimagesink"]), "glimagesink")
        XCTAssertEqual(try choose([:], opening: all, drm: true), "kmssink")
        XCTAssertThrowsError(try choose(["DISPLAY": ":0"], opening: ["kmssink"], drm: true),
                             "a desktop's screen belongs to its server, not to kmssink")
        do {
            _ = try choose([:], opening: [], drm: false)
            XCTFail("no display, yet a sink was chosen")
        } catch {
            guard case .noDisplay = error else { return XCTFail("\(error)") }
            let text = error.description
            for part in ["waylandsink", "WAYLAND_DISPLAY", "ximagesink", "DISPLAY", "kmssink"] {
                XCTAssertTrue(text.contains(part), "the error does not say it tried \(part): \(text)")
            }
        }
        XCTAssertEqual(try PreviewSink.choose(named: "fakesink", environment: [:]).description, "fakesink")
        XCTAssertThrowsError(try PreviewSink.choose(named: "nosuchsink", environment: [:]))
    }

    /// A real opening of the X sinks: Xvfb has no Xv, so xvimagesink must not be chosen there.
    func testXvimagesinkIsPassedOverWithoutXv() throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        XCTAssertEqual(try PreviewSink.choose(named: nil, environment: ["DISPLAY": display.name]).description, "ximagesink")
    }

    /// AVFoundation raises when isVideoMirrored is set while automatic adjustment is on; so does this,
    /// in a child process (a precondition ends the process that trips it).
    func testSettingMirroredWhileAutomaticAdjustmentIsOnIsAProgrammingError() throws {
        if ProcessInfo.processInfo.environment["GCAPTURE_PREVIEW_CHILD"] == "1" {
            let preview = CapturePreviewOutput()
            preview.connection.isVideoMirrored = true
            print("gcapture-test: isVideoMirrored was set with automatic adjustment on")
            return
        }
        let bundle = CommandLine.arguments[0]
        guard FileManager.default.isExecutableFile(atPath: bundle), bundle.hasSuffix(".xctest") else {
            throw TestEnvironment.missing("the test bundle cannot be run as a child process here (\(bundle))")
        }
        let run = try runTool(bundle, ["GCaptureTests.PreviewTests/testSettingMirroredWhileAutomaticAdjustmentIsOnIsAProgrammingError"],
                              // The child is meant to crash: Swift's backtracer, which it would start (and wait for)
                              // on the way, is slow, and under ThreadSanitizer its start fails a TSan CHECK and the
                              // child waits for it until killed.
                              environment: ["GCAPTURE_PREVIEW_CHILD": "1", "SWIFT_BACKTRACE": "enable=no"], timeout: 60)
        XCTAssertNotEqual(run.status, 0)
        XCTAssertFalse(run.stdout.contains("was set with automatic adjustment on"), run.stdout)
        XCTAssertTrue(run.stderr.contains("isVideoMirrored cannot be set while automaticallyAdjustsVideoMirroring is true"), run.stderr)
        // With the adjustment off, it is a setting like any other.
        let preview = CapturePreviewOutput()
        preview.connection.automaticallyAdjustsVideoMirroring = false
        preview.connection.isVideoMirrored = true
        XCTAssertTrue(preview.connection.isVideoMirrored)
        XCTAssertTrue(preview.connection.isVideoMirroringSupported)
    }

    // MARK: gcapture preview

    func testPreviewCommandRunsUnderXvfbAndFailsClearlyWithoutADisplay() throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let shown = try runProduct("gcapture", ["preview", "--camera", "test", "--preset", "vga640x480", "--duration", "1", "--json"],
                                   environment: ["DISPLAY": display.name, "WAYLAND_DISPLAY": ""], timeout: 60)
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertTrue(shown.stdout.contains("\"sink\":\"ximagesink\""), shown.stdout)
        let finished = try XCTUnwrap(shown.stdout.split(separator: "\n").last)
        let shownFrames = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(finished.utf8)) as? [String: Any])?["framesShown"] as? Int)
        XCTAssertGreaterThan(shownFrames, 5, shown.stdout)
        let turned = try runProduct("gcapture", ["preview", "--camera", "test", "--preset", "vga640x480", "--duration", "0.5",
                                                 "--mirror", "on", "--rotation", "90", "--json"],
                                    environment: ["DISPLAY": display.name, "WAYLAND_DISPLAY": ""], timeout: 60)
        XCTAssertEqual(turned.status, 0, turned.stderr)
        XCTAssertTrue(turned.stdout.contains("\"mirrored\":true") && turned.stdout.contains("\"rotation\":90"), turned.stdout)
        let fullscreen = try runProduct("gcapture", ["preview", "--camera", "test", "--duration", "0.5", "--fullscreen"],
                                        environment: ["DISPLAY": display.name, "WAYLAND_DISPLAY": ""], timeout: 60)
        XCTAssertEqual(fullscreen.status, 1)
        XCTAssertTrue(fullscreen.stderr.contains("ximagesink cannot show the preview fullscreen"), fullscreen.stderr)

        guard !PreviewSink.hasDRMDevice() else {
            // The CI host has no screen (no /dev/dri): under CI a screen fails rather than skips the check below.
            throw TestEnvironment.missing("a machine without a KMS screen: without a desktop the preview would use this one's")
        }
        let none = try runProduct("gcapture", ["preview", "--camera", "test", "--duration", "1"],
                                  environment: ["DISPLAY": "", "WAYLAND_DISPLAY": ""], timeout: 60)
        XCTAssertEqual(none.status, 1, none.stdout)
        XCTAssertTrue(none.stderr.contains("no display to show the preview on"), none.stderr)
        XCTAssertTrue(none.stderr.contains("DISPLAY is not set"), none.stderr)
        XCTAssertTrue(none.stderr.contains("kmssink"), none.stderr)
    }
}
