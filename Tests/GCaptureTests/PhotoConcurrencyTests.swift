import GStreamerKit
import Dispatch
import Foundation
@testable import GCapture
import Synchronization
import XCTest

/// How the photo output behaves towards threads: waiting captures hold none, delegates run on their queue
/// and may call back in, each capture is fixed at its request, and delegate callbacks keep request order.
final class PhotoConcurrencyTests: XCTestCase {
    private func startedSession(_ photos: CapturePhotoOutput, frameRate: Int) async throws -> CaptureSession {
        let session = try makeSession(camera: .makeTestCamera(options: .init(maxFrameRate: frameRate)), preset: .vga640x480,
                                      outputs: [photos])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        return session
    }

    /// A capture waiting for the camera (here: zero shutter lag off, the next frame a second away) is
    /// suspended, not blocking a thread: with many more captures waiting than the cooperative pool has
    /// threads, other async work still runs at once.
    func testCapturesWaitingForTheCameraHoldNoThreadOfTheCooperativePool() async throws {
        let photos = CapturePhotoOutput()
        photos.isZeroShutterLagEnabled = false
        let session = try await startedSession(photos, frameRate: 1)
        // Returns just after a frame arrived: the next one is about a second away.
        _ = try await photos.capturePhoto(within: engineDeadline)
        let pressed = ContinuousClock.now
        let waiting = 4 * ProcessInfo.processInfo.activeProcessorCount + 2
        let captures = (0..<waiting).map { _ in Task { try await photos.capturePhoto(within: engineDeadline) } }
        let ran = await Task { ContinuousClock.now }.value
        let photosTaken = try await withThrowingTaskGroup(of: CapturePhoto.self) { group in
            for capture in captures { group.addTask { try await capture.value } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let frameArrived = ContinuousClock.now
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(photosTaken.count, waiting)
        XCTAssertGreaterThan(frameArrived - pressed, .milliseconds(400), "the next frame came too soon to tell")
        XCTAssertLessThan(ran - pressed, .milliseconds(250),
                          "other async work waited \(ran - pressed) behind \(waiting) captures waiting for a frame")
    }

    /// A capture is what was asked at the request: changing its settings or the output afterwards changes
    /// nothing of it, even when the cooperative pool is too busy to start any work of the capture yet.
    func testSettingsAndOutputAreReadAtTheRequest() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput()
        let session = try await startedSession(photos, frameRate: 30)
        try await Task.sleep(for: .milliseconds(300)) // the ring fills
        let asked = folder.appendingPathComponent("asked.jpg"), changed = folder.appendingPathComponent("changed.jpg")
        let settings = CapturePhotoSettings(photoQualityPrioritization: .balanced, orientationHandling: .rotatePixels, fileURL: asked)
        let events = PhotoEvents(photos)
        // Every thread of the pool taken for a moment (blocked, so that the camera keeps its CPU), as in a
        // loaded program.
        let threads = ProcessInfo.processInfo.activeProcessorCount
        final class Count: Sendable { let value = Atomic(0) }
        let busy = Count()
        let blockers = (0..<threads).map { _ in
            Task.detached {
                busy.value.add(1, ordering: .relaxed)
                usleep(300_000)
            }
        }
        // The press comes from the app's own queue, not from the pool.
        await withCheckedContinuation { (pressed: CheckedContinuation<Void, Never>) in
            DispatchQueue(label: "app").async {
                let deadline = Date().addingTimeInterval(2)
                while busy.value.load(ordering: .relaxed) < threads, Date() < deadline {}
                photos.capturePhoto(with: settings, delegate: events)
                settings.fileURL = changed
                settings.photoQualityPrioritization = .quality
                settings.orientationHandling = .exifOrientationOnly
                photos.connection.videoRotationAngle = 90
                photos.isZeroShutterLagEnabled = false
                pressed.resume()
            }
        }
        for blocker in blockers { await blocker.value }
        let finished = await events.waitForFinishedCaptures(1)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertTrue(finished)
        let resolved = try XCTUnwrap(events.photos.first?.resolvedSettings)
        XCTAssertEqual(resolved.photoQualityPrioritization, .balanced)
        XCTAssertEqual(resolved.frameCount, 1)
        XCTAssertEqual(resolved.rotationAngle, 0)
        XCTAssertTrue(resolved.isZeroShutterLag)
        XCTAssertLessThanOrEqual(try XCTUnwrap(events.photos.first).shutterLagMilliseconds, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: asked.path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: changed.path))
        XCTAssertEqual(try exif(asked)["ImageWidth"] as? Int, 640)
    }

    /// Captures requested one after another are told of in that order, even when a later one is ready
    /// first (a .quality capture waits for a frame more than the ring holds; a .speed one does not).
    func testDelegateCallbacksComeInTheOrderOfTheRequests() async throws {
        let photos = CapturePhotoOutput()
        photos.zeroShutterLagRingDepth = 3
        let session = try await startedSession(photos, frameRate: 5)
        try await Task.sleep(for: .milliseconds(800)) // the ring fills
        let events = PhotoEvents(photos)
        var requested: [Int64] = []
        for index in 0..<6 {
            let settings = CapturePhotoSettings(photoQualityPrioritization: index.isMultiple(of: 2) ? .quality : .speed)
            requested.append(settings.uniqueID)
            photos.capturePhoto(with: settings, delegate: events)
        }
        let finished = await events.waitForFinishedCaptures(requested.count)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertTrue(finished, "\(events.log)")
        let log = events.log
        XCTAssertEqual(log.filter { $0.event == .willBegin }.map(\.id), requested, "\(log)")
        XCTAssertEqual(log.filter { $0.event == .didFinishCapture }.map(\.id), requested, "\(log)")
        for (earlier, later) in zip(requested, requested.dropFirst()) {
            let lastOfEarlier = try XCTUnwrap(log.lastIndex { $0.id == earlier })
            let finishOfLater = try XCTUnwrap(log.firstIndex { $0.id == later && $0.event == .didFinishProcessing })
            XCTAssertLessThan(lastOfEarlier, finishOfLater, "\(log)")
        }
    }

    /// The readiness coordinator's delegate runs on the output's delegate queue, never under the output's
    /// lock: a delegate that waits for the app's queue (as code hopping to a UI thread does) while the app
    /// presses the shutter there does not deadlock, and captures started from a capture delegate's
    /// callback work.
    func testDelegatesRunOnTheirQueueAndMayCallBackIntoTheOutput() async throws {
        let photos = CapturePhotoOutput()
        let session = try await startedSession(photos, frameRate: 30)
        let app = DispatchQueue(label: "app")
        let button = ShutterButton(photos: photos, app: app)
        let coordinator = CapturePhotoOutputReadinessCoordinator(photoOutput: photos)
        coordinator.delegate = button
        let events = PhotoEvents(photos, capturesFromCallback: 3)
        let presses = 20
        for _ in 0..<presses {
            app.async {
                let settings = CapturePhotoSettings(photoQualityPrioritization: .speed)
                coordinator.startTrackingCaptureRequest(using: settings)
                photos.capturePhoto(with: settings, delegate: events)
                _ = photos.captureReadiness
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        guard await events.waitForFinishedCaptures(presses + 3, timeout: 20) else {
            // Deadlocked: stopping would wait on the stuck threads too.
            return XCTFail("\(events.log.count) callbacks, then nothing: deadlocked")
        }
        try await Task.sleep(for: .milliseconds(100))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        photos.delegateQueue.sync {}
        XCTAssertFalse(button.states.isEmpty)
        XCTAssertEqual(button.offQueue, 0, "readiness told off the output's delegate queue")
        XCTAssertEqual(button.states.last, .sessionNotRunning)
        XCTAssertEqual(events.photos.count, presses + 3)
    }
}

/// Records a photo output's capture callbacks, checking each runs on the output's delegate queue.
final class PhotoEvents: CapturePhotoCaptureDelegate, @unchecked Sendable {
    enum Event: Sendable { case willBegin, didFinishProcessing, didFinishCapture }
    struct Entry: Sendable, CustomStringConvertible {
        var event: Event
        var id: Int64
        var description: String { "\(id) \(event)" }
    }

    private let queue: DispatchQueue
    private let state = Locked<(log: [Entry], photos: [CapturePhoto], fromCallback: Int)>(([], [], 0))
    var log: [Entry] { state.withLock { $0.log } }
    var photos: [CapturePhoto] { state.withLock { $0.photos } }

    /// `capturesFromCallback`: captures this delegate starts from inside didFinishCapture.
    init(_ output: CapturePhotoOutput, capturesFromCallback: Int = 0) {
        queue = output.delegateQueue
        state.withLock { $0.fromCallback = capturesFromCallback }
    }

    func photoOutput(_ output: CapturePhotoOutput, willBeginCaptureFor settings: CaptureResolvedPhotoSettings) {
        dispatchPrecondition(condition: .onQueue(queue))
        _ = output.captureReadiness
        state.withLock { $0.log.append(Entry(event: .willBegin, id: settings.uniqueID)) }
    }

    func photoOutput(_ output: CapturePhotoOutput, didFinishProcessingPhoto photo: CapturePhoto, error: Error?) {
        dispatchPrecondition(condition: .onQueue(queue))
        _ = output.isZeroShutterLagEnabled
        state.withLock { state in
            if error == nil {
                state.photos.append(photo)
                state.log.append(Entry(event: .didFinishProcessing, id: photo.resolvedSettings.uniqueID))
            }
        }
    }

    func photoOutput(_ output: CapturePhotoOutput, didFinishCaptureFor settings: CaptureResolvedPhotoSettings, error: Error?) {
        dispatchPrecondition(condition: .onQueue(queue))
        let again = state.withLock { state -> Bool in
            state.log.append(Entry(event: .didFinishCapture, id: settings.uniqueID))
            guard state.fromCallback > 0 else { return false }
            state.fromCallback -= 1
            return true
        }
        if again { output.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: .speed), delegate: self) }
    }

    func waitForFinishedCaptures(_ count: Int, timeout: TimeInterval = 10) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        func done() -> Bool { log.filter { $0.event == .didFinishCapture }.count >= count }
        while !done(), Date() < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return done()
    }
}

/// An app's shutter button: readiness is applied on the app's queue, waiting for it.
final class ShutterButton: CapturePhotoOutputReadinessCoordinatorDelegate, @unchecked Sendable {
    private let photos: CapturePhotoOutput
    private let app: DispatchQueue
    private let appKey = DispatchSpecificKey<Bool>()
    private let delegateQueueKey = DispatchSpecificKey<Bool>()
    private let state = Locked<(states: [CapturePhotoOutput.CaptureReadiness], offQueue: Int)>(([], 0))
    var states: [CapturePhotoOutput.CaptureReadiness] { state.withLock { $0.states } }
    var offQueue: Int { state.withLock { $0.offQueue } }

    init(photos: CapturePhotoOutput, app: DispatchQueue) {
        self.photos = photos
        self.app = app
        app.setSpecific(key: appKey, value: true)
        photos.delegateQueue.setSpecific(key: delegateQueueKey, value: true)
    }

    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness) {
        let onQueue = DispatchQueue.getSpecific(key: delegateQueueKey) == true
        let apply = {
            self.state.withLock { state in
                state.states.append(captureReadiness)
                if !onQueue { state.offQueue += 1 }
            }
            _ = coordinator.captureReadiness
            _ = self.photos.captureReadiness
        }
        if DispatchQueue.getSpecific(key: appKey) == true { apply() } else { app.sync(execute: apply) }
    }
}
