import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

final class PhotoOutputTests: XCTestCase {
    /// 30 fps: one frame interval.
    let frameInterval = 1000.0 / 30

    private func startedSession(_ photos: CapturePhotoOutput, camera: CaptureDevice = .makeTestCamera(options: .init(maxFrameRate: 30)),
                                preset: CaptureSession.Preset = .vga640x480, extra: [CaptureOutput] = []) async throws -> CaptureSession {
        let session = try makeSession(camera: camera, preset: preset, outputs: [photos] + extra)
        try await session.start()
        // Let the zero-shutter-lag ring fill.
        try await Task.sleep(for: .milliseconds(300))
        return session
    }

    func testZeroShutterLagTakesTheFrameExposedAtTheRequest() async throws {
        let photos = CapturePhotoOutput()
        let session = try await startedSession(photos)
        var lags: [Double] = []
        for attempt in 0..<12 {
            try await Task.sleep(for: .milliseconds(17 + attempt * 7)) // requests at every phase of the frame clock
            lags.append(try await photos.capturePhoto().shutterLagMilliseconds)
        }
        photos.isZeroShutterLagEnabled = false
        var nextFrameLags: [Double] = []
        for _ in 0..<5 { nextFrameLags.append(try await photos.capturePhoto().shutterLagMilliseconds) }
        await session.stop()
        XCTAssertTrue(lags.allSatisfy { $0 <= 0 && $0 > -frameInterval - 1 }, "lags \(lags)")
        XCTAssertTrue(nextFrameLags.allSatisfy { $0 > 0 && $0 <= frameInterval + 5 }, "without ZSL: \(nextFrameLags)")
    }

    /// Right after start the first frame may still be on its way to the ring when the press comes: it is
    /// the photo, not the frame after it (which would be a whole frame late).
    func testAPhotoTakenAsTheSessionStartsIsNotAFrameLate() async throws {
        var lags: [Double] = []
        for _ in 0..<12 {
            let photos = CapturePhotoOutput()
            let session = try makeSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), preset: .vga640x480,
                                          outputs: [photos])
            try await session.start()
            lags.append(try await photos.capturePhoto().shutterLagMilliseconds)
            await session.stop()
        }
        XCTAssertTrue(lags.allSatisfy { $0 < frameInterval / 2 && $0 > -frameInterval - 1 }, "lags \(lags)")
    }

    func testOverlappingCapturesAllDeliverInOrderWithBoundedMemory() async throws {
        let photos = CapturePhotoOutput()
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try await startedSession(photos, preset: .hd1280x720, extra: [frames])
        let states = ReadinessRecorder()
        let coordinator = CapturePhotoOutputReadinessCoordinator(photoOutput: photos)
        coordinator.delegate = states
        let start = log.count
        // 20 presses 20 ms apart, none waiting for the previous one.
        var captures: [Task<CapturePhoto, Error>] = []
        for _ in 0..<20 {
            captures.append(Task { try await photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: .quality)) })
            try await Task.sleep(for: .milliseconds(20))
        }
        var results: [CapturePhoto] = []
        for capture in captures { results.append(try await capture.value) }
        let during = Array(log.all.dropFirst(start))
        await session.stop()
        XCTAssertEqual(results.count, 20)
        let requests = results.map(\.requestTimestamp)
        XCTAssertEqual(requests, requests.sorted(), "photos came back out of order")
        XCTAssertEqual(results.map(\.timestamp), results.map(\.timestamp).sorted())
        XCTAssertTrue(results.allSatisfy { $0.shutterLagMilliseconds <= 0 })
        // Memory: the ring holds its depth in 720p NV12 frames, no more.
        XCTAssertEqual(photos.zeroShutterLagMemoryBytes, 0, "the ring is freed when the session stops")
        XCTAssertLessThan(FrameLog.longestGap(during), 0.07, "the frame output lost frames during the burst")
        XCTAssertFalse(states.states.isEmpty)
    }

    func testTheRingHoldsItsDepthOfFrames() async throws {
        let photos = CapturePhotoOutput()
        photos.zeroShutterLagRingDepth = 5
        let session = try await startedSession(photos, preset: .hd1280x720)
        XCTAssertEqual(photos.zeroShutterLagMemoryBytes, 5 * 1280 * 720 * 3 / 2)
        await session.stop()
    }

    /// Frames of a pool that grows on demand (videotestsrc's behind the session's tee) are held, not copied,
    /// and captures get those very buffers.
    func testTheRingHoldsFramesOfAGrowingPoolByReference() throws {
        let caps = try Caps("video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1")
        let pool = try BufferPool(caps: caps, bufferSize: 64 * 48)
        let ring = FrameRing(depth: 4)
        for index in 0..<10 { ring.store(try XCTUnwrap(pool.makeSample(presentationTime: ClockTime(index) * 33_000_000))) }
        XCTAssertEqual(ring.memoryBytes, 4 * 64 * 48)
        let frames = ring.frames(atOrBefore: .max, limit: 4)
        XCTAssertEqual(frames.map(\.presentationTime), [9, 8, 7, 6].map { UInt64($0) * 33_000_000 })
        XCTAssertTrue(frames.allSatisfy { $0.sample.bufferPool == BufferPoolBounds(minimum: 0, maximum: nil) }, "copied")
        ring.reset()
        XCTAssertEqual(ring.memoryBytes, 0)
    }

    /// A bounded pool (a V4L2 camera's) is never drained by the ring or by captures: the ring borrows its
    /// buffers only when its depth fits in half the pool's spare buffers, and captures then get copies.
    func testTheRingNeverDrainsABoundedPool() throws {
        let caps = try Caps("video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1")
        for (maximum, borrows) in [(6, false), (12, true)] {
            let pool = try BufferPool(caps: caps, bufferSize: 64 * 48, minimum: 2, maximum: maximum)
            let ring = FrameRing(depth: 4)
            var captured: [CapturedFrame] = []
            for index in 0..<20 {
                ring.store(try XCTUnwrap(pool.makeSample(presentationTime: ClockTime(index) * 33_000_000),
                                         "the pool of \(maximum) ran dry at frame \(index)"))
                captured += ring.frames(atOrBefore: .max, limit: 2)
            }
            XCTAssertEqual(ring.memoryBytes, 4 * 64 * 48, "the ring's memory counts held and copied frames alike")
            XCTAssertTrue(captured.allSatisfy { $0.sample.bufferPool == nil }, "a capture kept a buffer of the pool of \(maximum)")
            let free = (0..<maximum).compactMap { _ in pool.makeSample(presentationTime: nil) }.count
            XCTAssertEqual(free, borrows ? maximum - 4 : maximum, "pool of \(maximum)")
        }
    }

    func testReadinessFollowsTheDocumentedSequence() async throws {
        let photos = CapturePhotoOutput()
        let states = ReadinessRecorder()
        let coordinator = CapturePhotoOutputReadinessCoordinator(photoOutput: photos)
        coordinator.delegate = states
        XCTAssertEqual(coordinator.captureReadiness, .sessionNotRunning)
        let session = try await startedSession(photos)
        // The delegate is told on the output's delegate queue: what is queued there has been told.
        photos.delegateQueue.sync {}
        XCTAssertEqual(states.states, [.ready])

        // Zero shutter lag: the frame is already there, so the capture begins at once.
        let settings = CapturePhotoSettings()
        photos.delegateQueue.sync {
            coordinator.startTrackingCaptureRequest(using: settings)
            XCTAssertEqual(states.states.last, .notReadyMomentarily, "on the delegate queue: told before startTracking returns")
        }
        XCTAssertEqual(coordinator.captureReadiness, .notReadyMomentarily)
        _ = try await photos.capturePhoto(with: settings)
        photos.delegateQueue.sync {}
        XCTAssertEqual(states.states, [.ready, .notReadyMomentarily, .ready])

        // Without it the capture waits for the next frame first.
        photos.isZeroShutterLagEnabled = false
        let next = CapturePhotoSettings()
        coordinator.startTrackingCaptureRequest(using: next)
        _ = try await photos.capturePhoto(with: next)
        photos.delegateQueue.sync {}
        XCTAssertEqual(Array(states.states.dropFirst(3)), [.notReadyMomentarily, .notReadyWaitingForCapture, .notReadyMomentarily, .ready])

        // One capture at a time: the second press waits for processing.
        photos.isZeroShutterLagEnabled = true
        photos.isResponsiveCaptureEnabled = false
        let first = Task { try await photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: .quality)) }
        let second = Task { try await photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: .quality)) }
        _ = try await (first.value, second.value)
        photos.delegateQueue.sync {}
        XCTAssertTrue(states.states.dropFirst(7).contains(.notReadyWaitingForProcessing), "\(states.states)")
        XCTAssertEqual(states.states.last, .ready)

        await session.stop()
        photos.delegateQueue.sync {}
        XCTAssertEqual(states.states.last, .sessionNotRunning)
    }

    func testQualityBeatsSpeedOnANoisySceneAndSpeedIsFastest() async throws {
        let folder = try temporaryFolder()
        func shoot(noise: Int, _ prioritization: CapturePhotoOutput.QualityPrioritization, _ name: String) async throws -> (URL, [Double]) {
            let photos = CapturePhotoOutput()
            let camera = CaptureDevice.makeTestCamera(options: .init(pattern: .smpte, motion: 0, noiseLevel: noise, maxFrameRate: 30))
            let session = try await startedSession(photos, camera: camera, preset: .hd1280x720)
            var latencies: [Double] = []
            let url = folder.appendingPathComponent(name)
            for _ in 0..<5 {
                let photo = try await photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: prioritization, fileURL: url))
                latencies.append(photo.latencyMilliseconds)
            }
            await session.stop()
            return (url, latencies)
        }
        let (reference, _) = try await shoot(noise: 0, .quality, "clean.jpg")
        let (speed, speedLatencies) = try await shoot(noise: 12, .speed, "speed.jpg")
        let (balanced, _) = try await shoot(noise: 12, .balanced, "balanced.jpg")
        let (quality, qualityLatencies) = try await shoot(noise: 12, .quality, "quality.jpg")
        let speedPSNR = try psnr(speed, reference: reference)
        let balancedPSNR = try psnr(balanced, reference: reference)
        let qualityPSNR = try psnr(quality, reference: reference)
        print("PSNR against the noise-free frame: speed \(speedPSNR) dB, balanced \(balancedPSNR) dB, quality \(qualityPSNR) dB; "
              + "median latency speed \(median(speedLatencies)) ms, quality \(median(qualityLatencies)) ms")
        XCTAssertGreaterThanOrEqual(qualityPSNR - speedPSNR, 2, "quality \(qualityPSNR) dB, speed \(speedPSNR) dB")
        XCTAssertGreaterThanOrEqual(balancedPSNR, speedPSNR - 0.5, "balanced \(balancedPSNR) dB, speed \(speedPSNR) dB")
        XCTAssertLessThan(median(speedLatencies), median(qualityLatencies), "speed \(speedLatencies) quality \(qualityLatencies)")
    }

    func testJPEGCarriesEXIFAndIsTurnedUpright() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput()
        let session = try await startedSession(photos)
        photos.connection.videoRotationAngle = 90
        let upright = folder.appendingPathComponent("upright.jpg")
        let photo = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: upright))
        let tagged = folder.appendingPathComponent("tagged.jpg")
        _ = try await photos.capturePhoto(with: CapturePhotoSettings(orientationHandling: .exifOrientationOnly, fileURL: tagged))
        await session.stop()

        let exif = try exif(upright)
        XCTAssertEqual(exif["Make"] as? String, "gcapture")
        XCTAssertEqual(exif["Model"] as? String, "Test Camera")
        XCTAssertEqual(exif["Software"] as? String, "gcapture \(CaptureRuntime.version)")
        XCTAssertEqual(exif["Orientation"] as? Int, 1)
        XCTAssertEqual(exif["ImageWidth"] as? Int, 480)
        XCTAssertEqual(exif["ImageHeight"] as? Int, 640)
        let taken = try XCTUnwrap(exif["DateTimeOriginal"] as? String)
        XCTAssertTrue(taken.hasPrefix(String(ISO8601DateFormatter().string(from: Date()).prefix(4))), taken)
        XCTAssertEqual(photo.metadata["DateTimeOriginal"], taken)

        let tags = try self.exif(tagged)
        XCTAssertEqual(tags["Orientation"] as? Int, 6, "EXIF 6 = rotate 90 CW to view")
        XCTAssertEqual(tags["ImageWidth"] as? Int, 640)
    }

    func testFrontCameraPhotosAreNotMirroredUnlessAsked() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput()
        let front = CaptureDevice.makeTestCamera(uniqueID: "test-front", options: .init(motion: 0, position: .front))
        let session = try await startedSession(photos, camera: front)
        let plain = folder.appendingPathComponent("plain.jpg")
        _ = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: plain))
        photos.connection.automaticallyAdjustsVideoMirroring = false
        photos.connection.isVideoMirrored = true
        let mirrored = folder.appendingPathComponent("mirrored.jpg")
        _ = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: mirrored))
        await session.stop()
        // SMPTE bars run from white on the left to blue on the right.
        let plainProfile = try lumaProfile(plain), mirroredProfile = try lumaProfile(mirrored)
        XCTAssertGreaterThan(Int(plainProfile.first!), Int(plainProfile.last!) + 60, "\(plainProfile)")
        XCTAssertGreaterThan(Int(mirroredProfile.last!), Int(mirroredProfile.first!) + 60, "\(mirroredProfile)")
    }

    func testDeferredProxyIsReplacedByItsFinal() async throws {
        let folder = try temporaryFolder()
        let photos = CapturePhotoOutput()
        photos.isAutoDeferredPhotoDeliveryEnabled = true
        photos.deferredProcessingDelay = 0.2
        let session = try await startedSession(photos, camera: .makeTestCamera(options: .init(noiseLevel: 10, maxFrameRate: 30)))
        let url = folder.appendingPathComponent("deferred.jpg")
        let proxy = try await photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: .quality, fileURL: url))
        XCTAssertTrue(proxy.isProxy)
        XCTAssertEqual(try exif(url)["ImageDescription"] as? String, "gcapture deferred proxy")
        XCTAssertEqual(CapturePhotoOutput.deferredPhotos(in: folder).map(\.isFinished), [false])
        let finals = await photos.finishDeferredPhotosWhenIdle(in: folder)
        await session.stop()
        let final = try XCTUnwrap(try finals.first?.get())
        XCTAssertFalse(final.isProxy)
        XCTAssertEqual(final.resolvedSettings.frameCount, 4)
        XCTAssertNil(try exif(url)["ImageDescription"], "the proxy was not replaced")
        XCTAssertEqual(CapturePhotoOutput.deferredPhotos(in: folder).map(\.isFinished), [true])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".tmp") }
        XCTAssertEqual(leftovers, [])
    }

    func testBadRequestsFailClearlyAndLeaveNoFile() async throws {
        let photos = CapturePhotoOutput()
        do {
            _ = try await photos.capturePhoto()
            XCTFail("captured without a session")
        } catch {
            XCTAssertEqual(error, .sessionNotRunning)
        }
        let session = try await startedSession(photos)
        let missing = URL(fileURLWithPath: "/nonexistent-gcapture/photo.jpg")
        do {
            _ = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: missing))
            XCTFail("wrote into a folder that does not exist")
        } catch {
            XCTAssertTrue("\(error)".contains("/nonexistent-gcapture does not exist"), "\(error)")
        }
        await session.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing.path))
    }

    private func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
}

final class ReadinessRecorder: CapturePhotoOutputReadinessCoordinatorDelegate, @unchecked Sendable {
    private let recorded = Mutex<[CapturePhotoOutput.CaptureReadiness]>([])
    var states: [CapturePhotoOutput.CaptureReadiness] { recorded.withLock { $0 } }
    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness) {
        recorded.withLock { $0.append(captureReadiness) }
    }
}
