import ArgumentParser
import Foundation
import GCapture
import GCaptureSupport
import Synchronization

struct PhotoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photo",
        abstract: "Take photos with zero shutter lag: JPEG with EXIF, upright.",
        discussion: """
        The photo is the frame exposed when the capture was requested, taken from a ring of recent frames. \
        With --count, captures overlap: the next is requested on time while earlier ones still encode. \
        With --deferred, .quality photos are written at once as a proxy and replaced by the final image \
        when processing is done; work left by a killed run is finished by the next run in the same folder. \
        Each photo of a burst is its own frame: a request within a frame of the previous one takes the next. \
        A file already at --output is never replaced unless --overwrite says so.

        \(StopSignals.helpText)

        Examples:
          gcapture photo --output shot.jpg
          gcapture photo --quality quality --count 5 --interval 0.2 \\
              --output 'burst-%d.jpg' --json
          gcapture photo --camera /dev/video0 --camera /dev/video1 --output shot.jpg
              (shot-video0.jpg and shot-video1.jpg, taken at the same moment)
        """)

    static let countRange = NumberRange(1...100_000)
    static let secondsRange = NumberRange(0.0...3600.0, "seconds")
    @OptionGroup var logging: LoggingOptions

    @OptionGroup var device: SeveralCameraOptions<HighestQuality>

    @Option(help: "Where to write the photo, a .jpg or .jpeg; with --count, %d is the photo's number (else -N is added).")
    var output = "photo.jpg"

    @Option(help: "What matters most: speed (the newest frame, fast), balanced (the frame at the request) or quality (several frames averaged).")
    var quality: PhotoQuality = .balanced

    @Option(parsing: .unconditional, help: "Photos to take, \(countRange.accepted) (default: 1).", transform: countRange.parser)
    var count = 1

    @Option(parsing: .unconditional, help: "Seconds between requests, \(secondsRange.accepted); 0: as fast as the output accepts them (default: 0).",
            transform: secondsRange.parser)
    var interval: Double = 0

    @Flag(help: "Deliver a proxy at once and the final image when processed (with --quality quality).")
    var deferred = false

    @Option(parsing: .unconditional, help: "Seconds without a capture request before deferred processing starts, \(secondsRange.accepted) (default: 0.5).",
            transform: secondsRange.parser)
    var deferredDelay: Double = 0.5

    @Option(parsing: .unconditional, help: "Degrees clockwise to turn the photo upright: \(NumberRanges.rotation.accepted) (default: 0).",
            transform: NumberRanges.rotation.parser)
    var rotation: Int = 0

    @Flag(help: "Keep the sensor's pixels and write the rotation as EXIF Orientation.")
    var exifOrientation = false

    @Flag(inversion: .prefixedNo, help: "Zero shutter lag (the frame at the request, not the next one).")
    var zeroShutterLag = true

    @Flag(help: "Replace a photo already at that path; without it, an existing file is left alone and the command stops.")
    var overwrite = false

    @Flag(help: "Print one JSON object per line per event.")
    var json = false

    @Option(help: ArgumentHelp("Put each photo in this album of its folder's photo library (made when missing; see `gcapture library`).",
                               valueName: "name"))
    var album: String?

    /// The photo is a JPEG: a name that says otherwise (shot.png, shot) would lie about the file.
    func validate() throws {
        let first = URL(fileURLWithPath: output.replacingOccurrences(of: "%d", with: "1")).standardizedFileURL
        try OutputPath.refuseFolder(first, option: "--output", what: "photo", example: "photo.jpg")
        guard ["jpg", "jpeg"].contains(first.pathExtension.lowercased()) else {
            throw ValidationError("--output \(output): \(OutputPath.photoNamingRule)")
        }
        try AlbumFiling.validate(album)
        // As a description file's `deferred: true` is: refused, not silently ignored.
        if deferred, device.camera.count > 1 {
            throw ValidationError("--deferred keeps one camera's work to finish later: give --camera once")
        }
        if deferred, !quality.prioritization.defersDelivery {
            throw ValidationError("--deferred applies only with --quality quality (the averaged frames are what is deferred), not --quality \(quality.rawValue)")
        }
    }

    func run() async throws {
        let stop = StopSignals.shared
        stop.install()
        let choices = try device.cameraChoices()
        let several = choices.count > 1
        // Several cameras: each photo once per camera, named after it (shot-video0.jpg).
        let urls = (1...count).map { outputURL(number: $0) }
        let urlsByCamera = choices.map { choice in several ? urls.map { OutputPath.forCamera($0, choice.device) } : urls }
        for url in urlsByCamera.joined() {
            try OutputPath.makeRoom(for: url, overwrite: overwrite, option: "--output") { url in
                if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            }
        }
        let folder = urls[0].deletingLastPathComponent()
        // Work an earlier run left here is finished by this one (in the background, once it starts), and
        // this run must not exit before it is.
        let resumesDeferredWork = CapturePhotoOutput.deferredPhotos(in: folder).contains { !$0.isFinished }
        let events = EventPrinter(json: json)
        let filing = AlbumFiling(title: album, folder: folder)
        let outputs = choices.map { _ in makePhotoOutput(folder: folder, events: events) }
        // Readiness is one output's: with several cameras a request waits for each anyway.
        let readiness = ReadinessPrinter(events)
        let coordinator = several ? nil : CapturePhotoOutputReadinessCoordinator(photoOutput: outputs[0])
        coordinator?.delegate = readiness

        let capture = try await CommandCapture.start(name: "gcapture-photo", zip(choices, outputs).map { ([$0.device], $1) },
                                                     microphone: nil, preset: device.preset, json: json)
        if json {
            events.emit(["event": "started", "camera": choices.map(\.device.description).joined(separator: ", ")]
                            .merging(DeviceChoice.startedFields(choices)) { $1 }, text: "")
        }

        // Only the captures still running are kept: a long burst must not hold every finished one.
        let captures = CapturesInFlight()
        var requested = 0
        for index in urls.indices {
            if index > 0, interval > 0, !(await stop.sleep(seconds: interval)) { break }
            // A signal stops the requests; the photos already requested are still written.
            if stop.received != nil { break }
            requested += 1
            let requests = zip(outputs, urlsByCamera).map { photos, urls in
                let settings = CapturePhotoSettings(photoQualityPrioritization: quality.prioritization,
                                                    orientationHandling: exifOrientation ? .exifOrientationOnly : .rotatePixels,
                                                    fileURL: urls[index])
                coordinator?.startTrackingCaptureRequest(using: settings)
                return { @Sendable () async throws -> Void in
                    let photo = try await photos.capturePhoto(with: settings)
                    events.photo(photo, event: photo.isProxy ? "proxy" : "photo")
                    // A proxy is filed too: its final replaces it under the same name.
                    if let filing, let url = photo.fileURL { await filing.file(url, events: events) }
                }
            }
            // Every camera's photo of a request is asked for at once.
            for request in requests { captures.start(request) }
            if interval == 0, let failure = await captures.finish() { throw failure }
        }
        var failure = await captures.finish()
        if deferred || resumesDeferredWork, let photos = outputs.first {
            // Not finishDeferredPhotosWhenIdle: its wait for the idle delay cannot be cut short, and a
            // signal must not leave the command waiting (up to an hour) for it. The last capture has
            // returned, so the output has been idle since at least then.
            await stop.sleep(seconds: deferredDelay)
            for case .failure(let error) in await photos.finishDeferredPhotos(in: folder) { failure = failure ?? error }
            photos.delegateQueue.sync {} // the handler has printed every final
        }
        await capture.stop()
        for photos in outputs { photos.delegateQueue.sync {} } // readiness changes still on their way are printed
        if let signal = stop.receivedName {
            events.emit(["event": "stopped", "signal": signal, "requested": requested, "count": count],
                        text: "stopped by \(signal): \(requested) of \(count) photos requested")
        }
        if let failure { throw failure }
        if let failure = filing?.failure { throw failure }
    }

    /// A photo output with the command's settings.
    private func makePhotoOutput(folder: URL, events: EventPrinter) -> CapturePhotoOutput {
        let photos = CapturePhotoOutput()
        photos.isZeroShutterLagEnabled = zeroShutterLag
        photos.isAutoDeferredPhotoDeliveryEnabled = deferred
        photos.deferredPhotoDirectories = [folder]
        photos.deferredProcessingDelay = deferredDelay
        photos.connection.videoRotationAngle = Double(rotation)
        photos.deferredPhotoHandler = { result in
            if case .success(let photo) = result { events.photo(photo, event: "final") }
        }
        return photos
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

/// --quality's values by name. Not QualityPrioritization itself: ArgumentParser lists and shows the
/// default of a raw-valued enum by its raw values, and the help said "values: 1, 2, 3; default: 2" for an
/// option that took only the names.
enum PhotoQuality: String, CaseIterable, ExpressibleByArgument {
    case speed, balanced, quality

    var prioritization: CapturePhotoOutput.QualityPrioritization {
        switch self { case .speed: .speed; case .balanced: .balanced; case .quality: .quality }
    }
}

/// The captures of a burst still running. Each one is let go when it finishes: keeping every capture's
/// Task until the end grew `gcapture photo --count 1800 --interval 0.1` by 5.5 KB a photo.
final class CapturesInFlight: Sendable {
    private struct State {
        var running = 0
        var failure: (any Error)?
        var idle: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Locked(State())

    func start(_ capture: @escaping @Sendable () async throws -> Void) {
        state.withLock { $0.running += 1 }
        Task {
            var error: (any Error)?
            do { try await capture() } catch let failed { error = failed }
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.failure = state.failure ?? error
                state.running -= 1
                guard state.running == 0 else { return [] }
                defer { state.idle = [] }
                return state.idle
            }
            waiters.forEach { $0.resume() }
        }
    }

    /// Waits until every capture started has finished, and returns the first failure.
    func finish() async -> (any Error)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { state in
                if state.running == 0 { return true }
                state.idle.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
        return state.withLock { $0.failure }
    }
}

/// Prints the command's events, as text or as one JSON object per line.
final class EventPrinter: Sendable {
    let json: Bool
    /// Held while a line is written, so lines from several threads do not interleave.
    private let writing = Lock()
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
        writing.withLock {
            if json { JSONLine.print(object) } else { Console.write(text) }
        }
    }
}

final class ReadinessPrinter: CapturePhotoOutputReadinessCoordinatorDelegate, Sendable {
    let events: EventPrinter
    init(_ events: EventPrinter) { self.events = events }
    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness) {
        events.readiness(captureReadiness)
    }
}
