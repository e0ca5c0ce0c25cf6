import Foundation
import GCapture
import GCapturePhotos
import XCTest

/// Runs the ported seed code (CameraManager.swift) on test cameras and checks what it produced with
/// exiftool and ffprobe. This target depends on GCapture alone: it also proves `import GCapture` suffices.
final class SeedPortTests: XCTestCase {
    override func setUp() {
        super.setUp()
        _ = seedLibraryFolder
    }

    /// A back and a front camera: the test pattern at 640x480, so .photo and .high pick that size.
    private let cameras = [CaptureDevice.Position.back, .front].map { position in
        CaptureDevice.makeTestCamera(uniqueID: "test-\(position.rawValue)",
                                     options: .init(position: position, sizes: [.init(width: 640, height: 480)], maxFrameRate: 30))
    }

    private func waitUntil(_ what: String, timeout: TimeInterval = 10, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { throw Timeout(what: what) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    private struct Timeout: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting until \(what)" }
    }

    func testSessionSetupAndPhotosWithTheDelegateAndRotation() async throws {
        // No camera node on this machine is closed to the tests (the test cameras have none).
        let granted = await requestCameraAccess()
        XCTAssertTrue(granted)
        let camera = CameraManager(cameras: cameras)
        camera.setupSession()
        camera.setupReadinessCoordinator()
        camera.startSession()
        try await waitUntil("the session runs") { camera.session.isRunning }
        XCTAssertEqual((camera.session.inputs.first as? CaptureDeviceInput)?.device.position, .back)

        // A user presses once the readiness coordinator has enabled the button.
        try await waitUntil("the button shows ready") { camera.shutterButton.readinessShown.last == .ready }
        XCTAssertTrue(camera.shutterButton.isEnabled)
        let shownBefore = camera.shutterButton.readinessShown.count
        camera.capturePhoto()
        try await waitUntil("the photo is in the library") { camera.library.photos.count == 1 }
        let upright = try exif(camera.library.photos[0])
        XCTAssertEqual(upright["FileType"] as? String, "JPEG")
        XCTAssertEqual(upright["ImageWidth"] as? Int, 640)
        XCTAssertEqual(upright["ImageHeight"] as? Int, 480)
        XCTAssertEqual(upright["Make"] as? String, "gcapture")

        // The readiness coordinator's delegate drove the shutter button through a capture and back.
        try await waitUntil("the button shows ready again") { camera.shutterButton.readinessShown.last == .ready }
        let shown = camera.shutterButton.readinessShown.dropFirst(shownBefore)
        XCTAssertEqual(shown.first, .notReadyMomentarily, "\(shown)")
        XCTAssertEqual(shown.last, .ready)
        XCTAssertTrue(camera.shutterButton.isEnabled)

        // Pattern 3: the coordinator follows the back camera's mount angle, set by its id as a kiosk's would be
        // (no sensor service here: the mount angle alone), and its observation turns the preview.
        let preview = CapturePreviewOutput()
        camera.setupRotationCoordinator(device: cameras[0], previewLayer: preview)
        XCTAssertEqual(camera.captureRotationAngle(), 0)
        CaptureDevice.setMountAngle(90, forUniqueID: "test-back")
        defer { CaptureDevice.setMountAngle(nil, forUniqueID: "test-back") }
        try await waitUntil("the observation turned the preview") { preview.connection.videoRotationAngle == 90 }
        XCTAssertEqual(camera.captureRotationAngle(), 90)
        camera.captureRotatedPhoto()
        try await waitUntil("the turned photo is in the library") { camera.library.photos.count == 2 }
        let turned = try exif(camera.library.photos[1])
        XCTAssertEqual(turned["ImageWidth"] as? Int, 480)
        XCTAssertEqual(turned["ImageHeight"] as? Int, 640)

        camera.configureMirroring()
        XCTAssertTrue(camera.photoOutput.connection.isVideoMirrored, "the seed found mirroring unsupported")

        camera.stopSession()
        try await waitUntil("the session stops") { !camera.session.isRunning }
    }

    func testResponsiveCaptureAndADeferredProxy() async throws {
        let camera = CameraManager(cameras: cameras)
        camera.setupSession()
        camera.setupReadinessCoordinator()
        camera.startSession()
        try await waitUntil("the session runs") { camera.session.isRunning }
        camera.enableResponsiveCapture()
        XCTAssertTrue(camera.photoOutput.isZeroShutterLagEnabled)
        XCTAssertTrue(camera.photoOutput.isAutoDeferredPhotoDeliveryEnabled)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("seed-port-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("deferred.jpg")
        let before = PhotoLibrary.shared().countAssets()
        camera.captureDeferredPhoto(to: url)
        // The seed's proxy callback, with its non-optional proxy, is called, and its PhotoKit code saves it.
        try await waitUntil("the proxy is in the library") { PhotoLibrary.shared().countAssets() > before }
        let saved = try XCTUnwrap(newestPhotos(limit: 1).firstObject)
        XCTAssertEqual(try exif(saved.fileURL)["FileType"] as? String, "JPEG")
        let photoOutput = camera.photoOutput
        let finished = try await within(30, "the deferred photos") { await photoOutput.finishDeferredPhotosWhenIdle(in: folder) }
        camera.stopSession()
        try await waitUntil("the session stops") { !camera.session.isRunning }
        XCTAssertTrue(finished.allSatisfy { (try? $0.get()) != nil }, "\(finished)")
        XCTAssertEqual(try exif(url)["ImageWidth"] as? Int, 640)
    }

    func testRecordingWithTheDelegate() async throws {
        let camera = CameraManager(cameras: cameras)
        camera.setupSession()
        camera.setupVideoRecording()
        camera.startSession()
        try await waitUntil("the session runs") { camera.session.isRunning }
        camera.startRecording()
        try await waitUntil("the recording runs") { camera.movieOutput.recordedDuration >= 2 }
        camera.stopRecording()
        try await waitUntil("the delegate has the movie", timeout: 15) {
            !camera.library.videos.isEmpty || !camera.library.videoErrors.isEmpty
        }
        camera.stopSession()
        try await waitUntil("the session stops") { !camera.session.isRunning }
        XCTAssertEqual(camera.library.videoErrors, [])
        let movie = try XCTUnwrap(camera.library.videos.first)
        defer { try? FileManager.default.removeItem(at: movie) }
        XCTAssertEqual(movie.pathExtension, "mov")
        let probe = try run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name:format=duration",
                                                  "-of", "default=noprint_wrappers=1", movie.path])
        XCTAssertEqual(probe.status, 0, probe.stderr)
        XCTAssertTrue(probe.stdout.contains("codec_name=h264"), probe.stdout)
        XCTAssertTrue(probe.stdout.contains("codec_name=aac"), probe.stdout)
        let duration = probe.stdout.split(separator: "\n").first { $0.hasPrefix("duration=") }.flatMap { Double($0.dropFirst(9)) }
        // Stopped once 2 s were recorded; the stop itself comes a poll and a thread hop later.
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(duration), 1.95)
        XCTAssertLessThan(try XCTUnwrap(duration), 3.5)
    }

    func testSwitchingBetweenBackAndFrontCameras() async throws {
        let camera = CameraManager(cameras: cameras)
        // The front camera is mounted upside down: the coordinator set up again for it says so.
        CaptureDevice.setMountAngle(180, forUniqueID: "test-front")
        defer { CaptureDevice.setMountAngle(nil, forUniqueID: "test-front") }
        camera.previewLayer = CapturePreviewOutput()
        camera.setupSession()
        camera.setupReadinessCoordinator()
        camera.startSession()
        try await waitUntil("the session runs") { camera.session.isRunning }
        func position() -> CaptureDevice.Position? { (camera.session.inputs.first as? CaptureDeviceInput)?.device.position }
        XCTAssertEqual(position(), .back)

        camera.switchCamera()
        try await waitUntil("the front camera is in") { position() == .front }
        try await waitUntil("the rotation coordinator follows the front camera") { camera.onSessionQueue { camera.captureRotationAngle() } == 180 }
        camera.capturePhoto()
        try await waitUntil("a photo from the front camera") { camera.library.photos.count == 1 }
        XCTAssertTrue(camera.session.isRunning)

        camera.switchCamera()
        try await waitUntil("the back camera is back") { position() == .back }
        try await waitUntil("the rotation coordinator follows the back camera") { camera.onSessionQueue { camera.captureRotationAngle() } == 0 }
        camera.capturePhoto()
        try await waitUntil("a photo from the back camera") { camera.library.photos.count == 2 }
        XCTAssertEqual(camera.session.inputs.count, 1)

        camera.stopSession()
        try await waitUntil("the session stops") { !camera.session.isRunning }
    }

    // MARK: Tools (this target cannot share GCaptureTests' helpers: it must import GCapture alone)

    private func exif(_ jpeg: Data) throws -> [String: Any] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("seed-port-\(UUID().uuidString).jpg")
        try jpeg.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try exif(file)
    }

    private func exif(_ url: URL) throws -> [String: Any] {
        let result = try run("/usr/bin/exiftool", ["-j", "-n", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let list = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]
        return try XCTUnwrap(list?.first)
    }

    /// Runs a tool with a 30 s limit; stderr goes to a file so that neither pipe can fill and stall it.
    private func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["30", path] + arguments
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("seed-port-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self),
                (try? String(contentsOf: errors, encoding: .utf8)) ?? "")
    }
}
