import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// Photos across interruptions of the camera (issue 11): none is ever of the session's filler frames, and
/// none waits for a camera that is gone. The camera is interrupted by InterruptionDriver on a real session.
final class PhotoInterruptionTests: XCTestCase {
    private func startedSession(_ photos: CapturePhotoOutput, _ driver: InterruptionDriver) async throws -> CaptureSession {
        let session = try await startSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), outputs: [photos, driver])
        try await Task.sleep(for: .milliseconds(300))
        return session
    }

    /// The photo's error, or nil and the brightest cell of its top rows (the test camera's colour bars are
    /// bright; the filler is black).
    private func outcome(of photos: CapturePhotoOutput, to url: URL) async throws -> (error: CaptureError?, brightest: UInt8?) {
        try await brightness(of: url, after: takePhoto(photos, to: url))
    }

    private func brightness(of url: URL, after error: CaptureError?) throws -> (error: CaptureError?, brightest: UInt8?) {
        (error, error == nil ? try lumaProfile(url).max() : nil)
    }

    func testAPhotoAskedForWhileTheCameraIsInterruptedFailsAtOnceAndPhotosComeBackWithTheCamera() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput(), driver = InterruptionDriver()
        let session = try await startedSession(photos, driver)
        // The camera goes away as v4l2src does: its end-of-stream runs through the tee first.
        try await driver.interrupt(.videoDeviceUnplugged, pushEndOfStream: true)
        // The filler's black frames flow meanwhile.
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(photos.captureReadiness, .sessionNotRunning)
        let asked = Date()
        let during = try await outcome(of: photos, to: folder.appendingPathComponent("during.jpg"))
        let waited = Date().timeIntervalSince(asked)
        XCTAssertEqual(during.error, .sessionWasInterrupted(.videoDeviceUnplugged),
                       "a photo was taken while the camera was away (brightest cell \(during.brightest.map(String.init) ?? "-"))")
        XCTAssertLessThan(waited, 0.1, "the capture waited \(waited) s")
        // The delegate hears the same, as AVFoundation's does.
        let delegate = PhotoFinish()
        photos.capturePhoto(with: CapturePhotoSettings(), delegate: delegate)
        let finished = try await delegate.error(within: 2)
        XCTAssertEqual(finished, .sessionWasInterrupted(.videoDeviceUnplugged))

        try await driver.endInterruption(.videoDeviceUnplugged)
        let after = try await outcome(of: photos, to: folder.appendingPathComponent("after.jpg"))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(after.error)
        XCTAssertGreaterThan(after.brightest ?? 0, 60, "the photo after recovery is black: a filler frame")
        XCTAssertGreaterThan(driver.fillerBuffers.withLock { $0 }, 5)
    }

    func testACaptureWaitingForAFrameFailsAsSoonAsTheCameraIsInterrupted() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput(), driver = InterruptionDriver()
        let session = try await startedSession(photos, driver)
        // A camera that stops without a word: the ring's frames grow stale, so the capture waits for a new one.
        try await driver.stall()
        try await Task.sleep(for: .milliseconds(200))
        let url = folder.appendingPathComponent("waiting.jpg")
        let capture = Task { try await takePhoto(photos, to: url) }
        try await Task.sleep(for: .milliseconds(300))
        // The session's watchdog interrupts the camera, and puts its filler in.
        try await driver.interrupt(.videoDeviceStalled)
        let interrupted = Date()
        let result = try brightness(of: url, after: try await capture.value)
        let waited = Date().timeIntervalSince(interrupted)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(result.error, .sessionWasInterrupted(.videoDeviceStalled),
                       "brightest cell of the photo: \(result.brightest.map(String.init) ?? "-")")
        XCTAssertLessThan(waited, 0.5, "the capture failed \(waited) s after the interruption")
    }

    func testAPhotoInFlightAtTheInterruptionIsOfTheCameraOrFails() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput(), driver = InterruptionDriver()
        let session = try await startedSession(photos, driver)
        photos.isZeroShutterLagEnabled = false
        var outcomes: [String] = []
        for attempt in 0..<3 {
            let url = folder.appendingPathComponent("in-flight-\(attempt).jpg")
            let capture = Task { try await takePhoto(photos, to: url) }
            // At different moments of the capture: waiting for its frame, or encoding it.
            try await Task.sleep(for: .milliseconds(attempt * 25))
            try await driver.interrupt(.videoDeviceUnplugged)
            let result = try brightness(of: url, after: try await capture.value)
            if let error = result.error {
                XCTAssertEqual(error, .sessionWasInterrupted(.videoDeviceUnplugged))
                outcomes.append("failed")
            } else {
                XCTAssertGreaterThan(result.brightest ?? 0, 60, "a filler frame was taken")
                outcomes.append("taken")
            }
            try await driver.endInterruption(.videoDeviceUnplugged)
            try await Task.sleep(for: .milliseconds(200))
        }
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        print("photos in flight at the interruption: \(outcomes)")
    }
}

/// The photo's error, or nil when it was taken (and written to `url`); a capture that hangs fails the test.
private func takePhoto(_ photos: CapturePhotoOutput, to url: URL) async throws -> CaptureError? {
    do {
        _ = try await within(5, "the photo") { try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: url), within: engineDeadline) }
        return nil
    } catch let error as CaptureError {
        return error
    }
}

/// The error a capture delegate hears at the end of its capture.
private final class PhotoFinish: CapturePhotoCaptureDelegate, @unchecked Sendable {
    private let finished = Locked<(any Error)??>(nil)

    func photoOutput(_ output: CapturePhotoOutput, didFinishCaptureFor resolvedSettings: CaptureResolvedPhotoSettings, error: (any Error)?) {
        finished.withLock { $0 = .some(error) }
    }

    func error(within seconds: Double) async throws -> CaptureError? {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let result = finished.withLock({ $0 }) { return result.map { $0 as! CaptureError } }
            guard Date() < deadline else { throw DeadlineExceeded(description: "the capture delegate heard nothing within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
