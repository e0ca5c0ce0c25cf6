import GStreamerKit
import Foundation
@testable import GCapture
import Synchronization
import XCTest

/// The AVFoundation-shaped calls that cannot throw report what they refused instead of dropping it.
final class AVFoundationShapeTests: XCTestCase {
    /// Collects the session's runtime errors as they are posted (synchronously, on the posting thread).
    private final class ErrorCollector: @unchecked Sendable {
        let errors = Locked<[CaptureSession.RuntimeError]>([])
        private var token: NSObjectProtocol?
        init(_ session: CaptureSession) {
            token = NotificationCenter.default.addObserver(forName: CaptureSession.runtimeErrorNotification, object: session,
                                                           queue: nil) { [weak self] note in
                guard let error = note.userInfo?[CaptureSession.runtimeErrorUserInfoKey] as? CaptureSession.RuntimeError else { return }
                self?.errors.withLock { $0.append(error) }
            }
        }
        deinit { token.map(NotificationCenter.default.removeObserver) }
        var descriptions: [String] { errors.withLock { $0.map(\.description) } }
    }

    func testARefusedInputIsReportedAndLeavesTheSessionUnchanged() throws {
        let session = CaptureSession()
        let collector = ErrorCollector(session)
        let first = try CaptureDeviceInput(device: .testCamera)
        session.addInput(first)
        XCTAssertEqual(collector.descriptions, [])
        let second = try CaptureDeviceInput(device: .makeTestCamera(uniqueID: "test-2", options: .init()))
        XCTAssertFalse(session.canAddInput(second))
        session.addInput(second)
        XCTAssertEqual(collector.descriptions, ["cannot add input: the session already has a video input"])
        XCTAssertEqual(session.inputs, [first])
        XCTAssertFalse(collector.errors.withLock { $0[0].isFatal })
        XCTAssertThrowsError(try session.add(second)) { error in
            XCTAssertEqual("\(error)", "cannot add input: the session already has a video input")
        }
    }

    func testARefusedOutputAndAFailedCommitAreReportedAndLeaveTheSessionUnchanged() throws {
        let camera = CaptureDevice.makeTestCamera(options: .init(sizes: [.init(width: 640, height: 480)]))
        let session = CaptureSession()
        let collector = ErrorCollector(session)
        let frames = CaptureVideoDataOutput()
        session.beginConfiguration()
        session.addInput(try CaptureDeviceInput(device: camera))
        session.addOutput(frames)
        session.addOutput(frames)
        session.sessionPreset = .vga640x480
        session.commitConfiguration()
        XCTAssertEqual(collector.descriptions, ["cannot add output: CaptureVideoDataOutput is already in the session"])
        XCTAssertEqual(session.outputs, [frames])

        session.beginConfiguration()
        session.addOutput(CaptureVideoDataOutput())
        session.sessionPreset = .hd1920x1080
        session.commitConfiguration()
        XCTAssertEqual(collector.descriptions.last,
                       "Test Camera [test] offers 640x480 (NV12, I420, YUY2); preset hd1920x1080 needs 1920x1080")
        XCTAssertEqual(session.outputs, [frames])
        XCTAssertEqual(session.sessionPreset, .vga640x480)
    }

    /// Logs every callback of a photo capture by name.
    private final class PhotoEvents: CapturePhotoCaptureDelegate, @unchecked Sendable {
        let events = Locked<[String]>([])
        let photos = Locked<[CapturePhoto]>([])
        private func log(_ event: String) { events.withLock { $0.append(event) } }
        func photoOutput(_ output: CapturePhotoOutput, willBeginCaptureFor resolvedSettings: CaptureResolvedPhotoSettings) { log("willBegin") }
        func photoOutput(_ output: CapturePhotoOutput, willCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings) { log("willCapture") }
        func photoOutput(_ output: CapturePhotoOutput, didCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings) { log("didCapture") }
        func photoOutput(_ output: CapturePhotoOutput, didFinishProcessingPhoto photo: CapturePhoto, error: (any Error)?) {
            photos.withLock { $0.append(photo) }
            log(error.map { "didFinishProcessing error: \($0)" } ?? "didFinishProcessing")
        }
        func photoOutput(_ output: CapturePhotoOutput, didFinishCaptureFor resolvedSettings: CaptureResolvedPhotoSettings, error: (any Error)?) {
            log(error.map { "didFinishCapture error: \($0)" } ?? "didFinishCapture")
        }

        func waitForFinish(timeout: TimeInterval = 10) async -> [String] {
            let deadline = Date().addingTimeInterval(timeout)
            while !events.withLock({ $0.contains { $0.hasPrefix("didFinishCapture") } }), Date() < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
            // Anything told after the end (a second didFinishCapture) would show here.
            try? await Task.sleep(for: .milliseconds(100))
            return events.withLock { $0 }
        }
    }

    func testThePhotoDelegateHearsEveryStepInAVFoundationsOrder() async throws {
        let photos = CapturePhotoOutput()
        let session = try makeSession(outputs: [photos])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let delegate = PhotoEvents()
        photos.capturePhoto(with: CapturePhotoSettings(), delegate: delegate)
        let events = await delegate.waitForFinish()
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(events, ["willBegin", "willCapture", "didCapture", "didFinishProcessing", "didFinishCapture"])
        let data = try XCTUnwrap(delegate.photos.withLock { $0.first }?.fileDataRepresentation())
        XCTAssertEqual(Array(data.prefix(2)), [0xFF, 0xD8], "a JPEG")
    }

    func testACaptureRefusedBeforeItBeganReachesDidFinishProcessingPhoto() async throws {
        let photos = CapturePhotoOutput()
        let delegate = PhotoEvents()
        photos.capturePhoto(with: CapturePhotoSettings(), delegate: delegate)
        let events = await delegate.waitForFinish()
        XCTAssertEqual(events, ["didFinishProcessing error: the capture session is not running",
                                "didFinishCapture error: the capture session is not running"])
        let photo = try XCTUnwrap(delegate.photos.withLock { $0.first })
        XCTAssertNil(photo.fileDataRepresentation())
        XCTAssertEqual(photo.resolvedSettings.frameCount, 0)
    }

    func testSupportedPropertiesFollowTheConfiguration() async throws {
        let photos = CapturePhotoOutput()
        func supported() -> [Bool] {
            [photos.isZeroShutterLagSupported, photos.isResponsiveCaptureSupported,
             photos.isFastCapturePrioritizationSupported, photos.isAutoDeferredPhotoDeliverySupported]
        }
        XCTAssertEqual(supported(), [false, false, false, false], "not in a session")
        let session = try makeSession(outputs: [photos])
        XCTAssertEqual(supported(), [true, true, true, true], "committed with a camera")
        try await within(engineDeadline, "session.start()") { try await session.start() }
        XCTAssertEqual(supported(), [true, true, true, true], "running")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(supported(), [true, true, true, true], "stopped, still configured")
        session.removeOutput(photos)
        XCTAssertEqual(supported(), [false, false, false, false], "removed")

        let cameraless = CaptureSession()
        cameraless.beginConfiguration()
        try cameraless.add(CaptureDeviceInput(device: .testMicrophone))
        try cameraless.add(photos)
        try withinBlocking(engineDeadline, "cameraless.commitAndWait()") { try cameraless.commitAndWait() }
        XCTAssertEqual(supported(), [false, false, false, false], "a session without a camera")
    }

    func testConnectionsSayWhatTheirOutputTurns() {
        // Frames to code are turned and mirrored too, as AVFoundation's video data output does them
        // (OrientationMatrixTests checks the pictures).
        for output in [CapturePhotoOutput(), CaptureMovieFileOutput(), CaptureVideoDataOutput(), CapturePreviewOutput()] as [CaptureOutput] {
            XCTAssertEqual([0, 90, 180, 270, 45].map(output.connection.isVideoRotationAngleSupported), [true, true, true, true, false])
            XCTAssertTrue(output.connection.isVideoMirroringSupported)
        }
    }
}
