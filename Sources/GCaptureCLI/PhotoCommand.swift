import ArgumentParser
import Foundation
import GCapture

struct PhotoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photo",
        abstract: "Take photos with zero shutter lag: JPEG with EXIF, upright.",
        discussion: """
        The photo is the frame exposed when the capture was requested, taken from a ring of recent frames.
        With --count, captures overlap: the next is requested on time while earlier ones still encode.
        With --deferred, .quality photos are written at once as a proxy and replaced by the final image
        when processing is done; work left by a killed run is finished by the next run in the same folder.

        Examples:
          gcapture photo --output shot.jpg
          gcapture photo --quality quality --count 5 --interval 0.2 --output 'burst-%d.jpg' --json
        """)

    @Option(help: "Camera id (see `gcapture devices`); default: the first real camera, else `test`.")
    var camera: String?

    @Option(help: "Where to write the photo; with --count, %d is the photo's number (else -N is added).")
    var output = "photo.jpg"

    @Option(help: "speed, balanced or quality.")
    var quality: CapturePhotoOutput.QualityPrioritization = .balanced

    @Option(help: "Photos to take.")
    var count = 1

    @Option(help: "Seconds between requests (0: as fast as the output accepts them).")
    var interval: Double = 0

    @Flag(help: "Deliver a proxy at once and the final image when processed (with --quality quality).")
    var deferred = false

    @Option(help: "Seconds without a capture request before deferred processing starts.")
    var deferredDelay: Double = 0.5

    @Option(help: "Session preset (see `gcapture frames --help`).")
    var preset: CaptureSession.Preset = .high

    @Option(help: "Degrees clockwise to turn the photo upright: 0, 90, 180, 270.")
    var rotation: Int = 0

    @Flag(help: "Keep the sensor's pixels and write the rotation as EXIF Orientation.")
    var exifOrientation = false

    @Flag(inversion: .prefixedNo, help: "Zero shutter lag (the frame at the request, not the next one).")
    var zeroShutterLag = true

    @Option(help: "Sensor noise of the test camera, ± 8-bit steps.")
    var noise: Int = 0

    @Flag(help: "Print one JSON object per line per event.")
    var json = false

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard interval >= 0 else { throw ValidationError("--interval cannot be negative") }
        try RotationChoice.validate(rotation)
    }

    func run() async throws {
        let urls = (1...count).map { outputURL(number: $0) }
        let folder = urls[0].deletingLastPathComponent()
        // Work an earlier run left here is finished by this one (in the background, once it starts), and
        // this run must not exit before it is.
        let resumesDeferredWork = CapturePhotoOutput.deferredPhotos(in: folder).contains { !$0.isFinished }
        let device = try CameraChoice.device(camera, noise: noise)
        let photos = CapturePhotoOutput()
        photos.isZeroShutterLagEnabled = zeroShutterLag
        photos.isAutoDeferredPhotoDeliveryEnabled = deferred
        photos.deferredPhotoDirectories = [folder]
        photos.deferredProcessingDelay = deferredDelay
        photos.connection.videoRotationAngle = Double(rotation)
        let events = EventPrinter(json: json)
        photos.deferredPhotoHandler = { result in
            if case .success(let photo) = result { events.photo(photo, event: "final") }
        }
        let coordinator = CapturePhotoOutputReadinessCoordinator(photoOutput: photos)
        let readiness = ReadinessPrinter(events)
        coordinator.delegate = readiness

        let session = CaptureSession(name: "gcapture-photo")
        session.beginConfiguration()
        try session.addInput(CaptureDeviceInput(device: device))
        try session.addOutput(photos)
        session.sessionPreset = preset
        try session.commitConfiguration()
        try await session.start()

        var captures: [Task<Void, Error>] = []
        for (index, url) in urls.enumerated() {
            if index > 0, interval > 0 { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) }
            let settings = CapturePhotoSettings(photoQualityPrioritization: quality,
                                                orientationHandling: exifOrientation ? .exifOrientationOnly : .rotatePixels,
                                                fileURL: url)
            coordinator.startTrackingCaptureRequest(using: settings)
            captures.append(Task {
                let photo = try await photos.capturePhoto(with: settings)
                events.photo(photo, event: photo.isProxy ? "proxy" : "photo")
            })
            if interval == 0 { try await captures.last!.value }
        }
        var failure: Error?
        for capture in captures {
            do { try await capture.value } catch { failure = failure ?? error }
        }
        if deferred || resumesDeferredWork {
            for case .failure(let error) in await photos.finishDeferredPhotosWhenIdle(in: folder) { failure = failure ?? error }
            photos.delegateQueue.sync {} // the handler has printed every final
        }
        await session.stop()
        photos.delegateQueue.sync {} // readiness changes still on their way are printed
        if let failure { throw failure }
    }

    private func outputURL(number: Int) -> URL {
        let path: String
        if output.contains("%d") {
            path = output.replacingOccurrences(of: "%d", with: String(number))
        } else if count > 1 {
            let url = URL(fileURLWithPath: output)
            let name = url.deletingPathExtension().lastPathComponent + "-\(number)"
            path = url.deletingLastPathComponent().appendingPathComponent(name).appendingPathExtension(url.pathExtension).path
        } else {
            path = output
        }
        return URL(fileURLWithPath: path).standardizedFileURL
    }
}

extension CapturePhotoOutput.QualityPrioritization: ExpressibleByArgument {
    public init?(argument: String) {
        guard let value = Self.allCases.first(where: { $0.description == argument }) else { return nil }
        self = value
    }
}

/// Prints the command's events, as text or as one JSON object per line.
final class EventPrinter: @unchecked Sendable {
    let json: Bool
    private let lock = NSLock()
    init(json: Bool) { self.json = json }

    func photo(_ photo: CapturePhoto, event: String) {
        let settings = photo.resolvedSettings
        emit(["event": event, "path": photo.fileURL?.path ?? "", "requestTime": photo.requestTimestamp,
              "frameTimestamp": photo.timestamp, "shutterLagMs": photo.shutterLagMilliseconds,
              "latencyMs": photo.latencyMilliseconds, "quality": settings.photoQualityPrioritization.description,
              "width": settings.photoDimensions.width, "height": settings.photoDimensions.height,
              "frames": settings.frameCount],
             text: "\(event) \(photo.fileURL?.path ?? "(memory)"): \(settings.photoDimensions.width)x\(settings.photoDimensions.height), "
                + "\(settings.photoQualityPrioritization), shutter lag \(String(format: "%.1f", photo.shutterLagMilliseconds)) ms, "
                + "written \(String(format: "%.1f", photo.latencyMilliseconds)) ms after the request")
    }

    func readiness(_ state: CapturePhotoOutput.CaptureReadiness) {
        guard json else { return }
        emit(["event": "readiness", "state": state.rawValue], text: "")
    }

    func emit(_ object: [String: Any], text: String) {
        lock.withLock {
            if json { JSONLine.print(object) } else { print(text); fflush(nil) }
        }
    }
}

final class ReadinessPrinter: CapturePhotoOutputReadinessCoordinatorDelegate, @unchecked Sendable {
    let events: EventPrinter
    init(_ events: EventPrinter) { self.events = events }
    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness) {
        events.readiness(captureReadiness)
    }
}

/// A command's --rotation: one of the turns a connection takes.
enum RotationChoice {
    static func validate(_ rotation: Int) throws {
        guard CaptureConnection.supportedVideoRotationAngles.contains(Double(rotation)) else {
            throw ValidationError("--rotation must be 0, 90, 180 or 270")
        }
    }
}

/// The camera a command uses: the one named, else the default; the test camera gets --noise.
enum CameraChoice {
    static func device(_ id: String?, noise: Int) throws -> CaptureDevice {
        let device = try id.map { try CaptureDevice.requireDevice(withUniqueID: $0) } ?? (CaptureDevice.default(for: .video) ?? .testCamera)
        guard device.deviceType == .testCamera, noise > 0 else { return device }
        return CaptureDevice.makeTestCamera(options: TestCameraOptions(noiseLevel: noise))
    }
}
