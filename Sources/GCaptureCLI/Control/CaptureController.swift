import Foundation
import GCapture
import GCaptureDescription
import GCaptureSupport

/// What a command answers when it worked: the reply's fields (for --json) and its plain words.
struct ControlReply: Sendable {
    var fields: ControlFields = [:]
    var text: String
}

/// Why a command did not do what it asked, in one sentence for the person or program that asked.
struct ControlFailure: Error, Sendable, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// Carries out the control commands on a running `ControlledCapture`. An actor: requests from stdin, the
/// shutter signal, a reload and the session's own events all reach it at once. Slow work (a photo's
/// encoding, a recording's finalization, a camera swap) awaits outside its lock, so that one slow command
/// does not hold the others.
actor CaptureController {
    /// Re-reads the set-up's description and returns its settings, and what changed that needs a new run;
    /// `apply` then changes only what differs. Called on SIGHUP with the settings now in force. A throw
    /// keeps the set-up as it is (the error is reported as a reloadFailed event).
    /// It blocks (it reads the file and reconfigures the session): it runs on `reloading`, never on this actor.
    typealias ReloadHook = @Sendable (_ current: ControlledCaptureSettings) throws -> ReloadedSetUp

    /// The reload of a set-up made from command-line options, which have no file to re-read: the settings
    /// in force, applied again (so SIGHUP changes nothing and the session runs on).
    static let reapplyCurrentSettings: ReloadHook = { ReloadedSetUp(settings: $0) }

    nonisolated let capture: ControlledCapture
    nonisolated let output: ControlOutput
    private let onReload: ReloadHook
    private let onFatalError: @Sendable (String) -> Void
    private(set) var settings: ControlledCaptureSettings
    private var camera: String
    /// The files handed out per folder and naming rule: numbering goes on after the highest in the folder.
    private var files: [String: OutputFiles] = [:]
    private var recording: RecordingWatcher?
    private var progress: Task<Void, Never>?
    private var photosInFlight = 0
    private var photosIdle: [CheckedContinuation<Void, Never>] = []
    private var stopping = false
    private var sessionEvents: Task<Void, Never>?
    /// Why the session is interrupted now, or nil: for the web page's status.
    private nonisolated let interruption = Locked<String?>(nil)
    private var streamEvents: Task<Void, Never>?

    /// `onFatalError`: the session stopped by itself (the run then ends, with an error).
    init(capture: ControlledCapture, output: ControlOutput, onReload: @escaping ReloadHook = CaptureController.reapplyCurrentSettings,
         onFatalError: @escaping @Sendable (String) -> Void) {
        self.capture = capture
        self.output = output
        self.onReload = onReload
        self.onFatalError = onFatalError
        settings = capture.settings
        camera = capture.camera
    }

    // MARK: Running

    func start() async throws(CaptureError) {
        applyToConnections(settings)
        let events = capture.session.events()
        let output = output, onFatalError = onFatalError, interruption = interruption
        sessionEvents = Task {
            for await event in events {
                switch event {
                case .wasInterrupted(let reason): interruption.withLock { $0 = reason.description }
                case .interruptionEnded: interruption.withLock { $0 = nil }
                default: break
                }
                Self.report(event, output: output, onFatalError: onFatalError)
            }
        }
        try await capture.session.start()
        let started = capture.startedEvent(camera: camera, settings: settings)
        output.event("started", started.fields, text: started.text)
        try startStream()
    }

    /// A description's stream: its states as `streamState` events (as `gcapture stream --json` prints them).
    private func startStream() throws(CaptureError) {
        guard let stream = capture.streamOutput, let location = capture.streamLocation else { return }
        let states = stream.stateUpdates()
        let output = output
        streamEvents = Task {
            for await state in states { output.event("streamState", state.eventFields, text: "stream: \(state)") }
        }
        try stream.startStreaming(to: location)
    }

    /// Finishes everything: the recording is finalized, the photos requested are written, the session stops.
    /// Commands from now on are refused.
    func shutDown() async {
        stopping = true
        if let recording, let movie = capture.movieOutput {
            movie.stopRecording()
            _ = await recording.finished.wait(seconds: 30)
            forget(recording)
        }
        await photosWritten()
        if let stream = capture.streamOutput, stream.isStreaming {
            // Ended as a stream ends (HLS's playlist closed, the RTMP server told), before the session stops.
            stream.stopStreaming()
            let deadline = Date().addingTimeInterval(5)
            while stream.isStreaming, Date() < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        }
        await capture.session.stop()
        sessionEvents?.cancel()
        streamEvents?.cancel()
    }

    private nonisolated static func report(_ event: CaptureSession.Event, output: ControlOutput, onFatalError: @Sendable (String) -> Void) {
        switch event {
        case .didStartRunning, .didStopRunning: break
        case .runtimeError(let error):
            output.event("runtimeError", ["error": error.description, "fatal": error.isFatal],
                         text: (error.isFatal ? "stopped: " : "error: ") + error.description)
            if error.isFatal { onFatalError(error.description) }
        case .wasInterrupted(let reason):
            output.event("interrupted", ["reason": reason.description, "code": reason.rawValue], text: "interrupted: \(reason)")
        case .interruptionEnded(let reason):
            output.event("interruptionEnded", ["reason": reason.description, "code": reason.rawValue],
                         text: "capturing again (the interruption ended: \(reason))")
        case .systemPressureChanged(let device, let state, let response):
            output.event("systemPressure", ["camera": device.description, "level": state.level.rawValue,
                                            "factors": state.factors.names, "response": PressureReport.name(of: response)],
                         text: "system pressure \(state) on \(device.localizedName): "
                             + (response == .none ? "capture unchanged" : "\(response)"))
        }
    }

    private func refuseWhenStopping() throws(ControlFailure) {
        if stopping { throw ControlFailure("gcapture is stopping") }
    }

    /// Carries out one command and waits for its outcome (a photo's: until it is written). `help` and
    /// `quit` belong to whoever reads the requests, not to the capture.
    func perform(_ command: ControlCommand, trigger: String) async -> Result<ControlReply, ControlFailure> {
        do {
            switch command {
            case .photo(let path): return await takePhoto(try requestPhoto(path: path, trigger: trigger))
            case .recordStart(let path): return .success(try await startRecording(path: path))
            case .recordStop: return .success(try await stopRecording())
            case .pause: return .success(try pauseRecording())
            case .resume: return .success(try resumeRecording())
            case .switchCamera(let camera): return .success(try await switchCamera(camera))
            case .rotate(let degrees): return .success(try rotate(degrees))
            case .mirror(let mirrored): return .success(try mirror(mirrored))
            case .help, .quit: return .failure(ControlFailure("\(command) is not a capture command"))
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: Photos

    /// A photo requested, its file named: taken in two steps so that requests are taken in the order they
    /// came (the frame, the rotation in force) while their encoding overlaps (the caller awaits `takePhoto`
    /// without holding up the next request).
    struct PhotoTicket: Sendable {
        let watcher: PhotoWatcher
        let url: URL
        let trigger: String
    }

    func requestPhoto(path: String?, trigger: String) throws(ControlFailure) -> PhotoTicket {
        try refuseWhenStopping()
        guard let photos = capture.photoOutput else { throw ControlFailure("this set-up takes no photos (it has no photo output)") }
        let url: URL
        if let path { url = try capture.paths.photo(path) } else { url = try nextFile(settings.photoNaming, in: settings.photoFolder) }
        photosInFlight += 1
        let watcher = PhotoWatcher()
        // The delegate form takes the request now, on this actor: the async form would take it only when
        // its task runs, after a `rotate` sent later had perhaps been applied.
        photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: settings.photoQuality,
                                                       orientationHandling: settings.photoEXIFOrientation ? .exifOrientationOnly : .rotatePixels,
                                                       fileURL: url), delegate: watcher)
        return PhotoTicket(watcher: watcher, url: url, trigger: trigger)
    }

    /// Waits for the photo a ticket asked for and emits its event; the reply when it is written.
    func takePhoto(_ ticket: PhotoTicket) async -> Result<ControlReply, ControlFailure> {
        let result = await ticket.watcher.result.wait(seconds: 60)
        photoFinished()
        switch result {
        case .success(let photo)?:
            let size = photo.resolvedSettings.photoDimensions
            let path = photo.fileURL?.path ?? ticket.url.path
            let fields: ControlFields = ["path": path, "width": size.width, "height": size.height,
                                         "rotation": photo.resolvedSettings.rotationAngle, "mirrored": photo.resolvedSettings.isMirrored,
                                         "shutterLagMs": photo.shutterLagMilliseconds, "trigger": ticket.trigger]
            // A person at a terminal already reads the reply to their own command.
            output.event("photo", fields, text: ticket.trigger == "command" ? nil : "photo \(path) (\(size.width)x\(size.height), \(ticket.trigger))")
            return .success(ControlReply(fields: ["path": path, "width": size.width, "height": size.height],
                                         text: "photo \(path) (\(size.width)x\(size.height))"))
        case .failure(let error)?:
            return photoFailed(ticket, error.message)
        case nil:
            return photoFailed(ticket, "the photo was not written within 60 s")
        }
    }

    private func photoFailed(_ ticket: PhotoTicket, _ message: String) -> Result<ControlReply, ControlFailure> {
        output.event("photoFailed", ["path": ticket.url.path, "error": message, "trigger": ticket.trigger],
                     text: ticket.trigger == "command" ? nil : "photo failed (\(ticket.trigger)): \(message)")
        return .failure(ControlFailure(message))
    }

    private func photoFinished() {
        photosInFlight -= 1
        guard photosInFlight == 0 else { return }
        let waiters = photosIdle
        photosIdle = []
        waiters.forEach { $0.resume() }
    }

    private func photosWritten() async {
        guard photosInFlight > 0 else { return }
        await withCheckedContinuation { photosIdle.append($0) }
    }

    // MARK: Movies

    /// How long `record start` waits for the recording's first frame.
    static let recordingStartTimeout: Double = 15

    func startRecording(path: String?) async throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        guard let movie = capture.movieOutput else { throw ControlFailure("this set-up records no movies (it has no movie output)") }
        if let recording { throw ControlFailure("already recording to \(recording.url.path); `record stop` first") }
        let url: URL
        if let path { url = try capture.paths.movie(path) } else { url = try nextFile(settings.movieNaming, in: settings.movieFolder) }
        guard let fileType = CaptureMovieFileOutput.FileType(fileExtension: url.pathExtension) else {
            throw ControlFailure("\(url.lastPathComponent): \(MovieDestination.namingRule)")
        }
        let output = output
        let watcher = RecordingWatcher(url: url) { [weak self] watcher, error in
            // Said here, before anyone waiting for the finish hears of it: the event comes before the reply.
            guard case .success? = watcher.started.value else { return }
            let stats = movie.lastStatistics
            let complete = error == nil || error!.recordingFinishedSuccessfully
            output.event("recordingFinished", ["path": watcher.url.path, "duration": stats.duration, "frames": stats.frames,
                                               "dropped": stats.droppedFrames, "complete": complete,
                                               "error": error.map { $0.description } ?? NSNull()],
                         text: "recording \(complete ? "finished" : "failed") \(watcher.url.path): \(String(format: "%.2f", stats.duration)) s"
                            + (error.map { " (\($0))" } ?? ""))
            Task { await self?.forget(watcher) }
        }
        recording = watcher
        movie.fileType = fileType
        movie.startRecording(to: url, recordingDelegate: watcher)
        switch await watcher.started.wait(seconds: Self.recordingStartTimeout) {
        case .success?:
            output.event("recordingStarted", ["path": url.path, "rotation": Int(movie.connection.videoRotationAngle)], text: nil)
            progress = Task { [output] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    guard !Task.isCancelled, movie.isRecording, movie.outputFileURL == url else { return }
                    let stats = movie.recordingStatistics
                    output.event("recordingProgress", ["path": url.path, "elapsed": movie.recordedDuration, "frames": stats.frames,
                                                       "dropped": stats.droppedFrames, "bytes": movie.recordedFileSize,
                                                       "paused": movie.isRecordingPaused], text: nil)
                }
            }
            return ControlReply(fields: ["path": url.path], text: "recording \(url.path)")
        case .failure(let error)?:
            forget(watcher)
            throw ControlFailure(error.description)
        case nil:
            // Given up on: the controller is no longer recording (a later `record start` tries again), whether
            // or not the output ever reports this take.
            movie.stopRecording()
            forget(watcher)
            throw ControlFailure("the recording to \(url.path) did not start within \(Int(Self.recordingStartTimeout)) s")
        }
    }

    func stopRecording() async throws(ControlFailure) -> ControlReply {
        guard let recording, let movie = capture.movieOutput else { throw ControlFailure("not recording") }
        movie.stopRecording()
        guard let finish = await recording.finished.wait(seconds: 30) else {
            throw ControlFailure("the recording to \(recording.url.path) did not finish within 30 s")
        }
        forget(recording)
        if let error = finish.error, !error.recordingFinishedSuccessfully { throw ControlFailure(error.description) }
        let stats = movie.lastStatistics
        return ControlReply(fields: ["path": recording.url.path, "duration": stats.duration, "frames": stats.frames],
                            text: "recorded \(recording.url.path): \(String(format: "%.2f", stats.duration)) s, \(stats.frames) frames")
    }

    func pauseRecording() throws(ControlFailure) -> ControlReply {
        guard let recording, let movie = capture.movieOutput else { throw ControlFailure("not recording: nothing to pause") }
        if movie.isRecordingPaused { throw ControlFailure("the recording is already paused") }
        movie.pauseRecording()
        guard movie.isRecordingPaused else { throw ControlFailure("the recording has not started yet: nothing to pause") }
        output.event("recordingPaused", ["path": recording.url.path, "elapsed": movie.recordedDuration], text: nil)
        return ControlReply(fields: ["path": recording.url.path], text: "paused \(recording.url.path)")
    }

    func resumeRecording() throws(ControlFailure) -> ControlReply {
        guard let recording, let movie = capture.movieOutput else { throw ControlFailure("not recording: nothing to resume") }
        guard movie.isRecordingPaused else { throw ControlFailure("the recording is not paused") }
        movie.resumeRecording()
        output.event("recordingResumed", ["path": recording.url.path, "elapsed": movie.recordedDuration], text: nil)
        return ControlReply(fields: ["path": recording.url.path], text: "resumed \(recording.url.path)")
    }

    private func forget(_ watcher: RecordingWatcher) {
        guard recording === watcher else { return }
        recording = nil
        progress?.cancel()
        progress = nil
    }

    // MARK: Camera

    /// Swaps the camera on the running session; when the new one cannot be used the old one stays.
    func switchCamera(_ id: String) async throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        let input: CaptureDeviceInput
        do {
            let device = try CaptureDevice.requireDevice(withUniqueID: id)
            guard device.mediaType == .video else { throw ControlFailure("\(id) names a microphone, not a camera") }
            input = try CaptureDeviceInput(device: device)
        } catch let failure as ControlFailure {
            throw failure
        } catch {
            throw ControlFailure("\(error)")
        }
        let session = capture.session
        let old = cameraInput
        session.beginConfiguration()
        if let old { session.removeInput(old) }
        session.addInput(input)
        do {
            try await session.commit()
        } catch {
            throw ControlFailure("cannot switch to \(input.device.description), still using \(camera): \(error)")
        }
        camera = input.device.description
        output.event("cameraSwitched", ["camera": camera], text: nil)
        return ControlReply(fields: ["camera": camera], text: "now using \(camera)")
    }

    /// The session's camera now.
    private var cameraInput: CaptureDeviceInput? {
        capture.session.inputs.compactMap { $0 as? CaptureDeviceInput }.first { $0.device.mediaType == .video }
    }

    /// What the capture is doing now: the web page's status.
    func status() -> ControlFields {
        var fields: ControlFields = [
            "camera": camera, "cameraID": cameraInput?.device.uniqueID ?? NSNull(), "microphone": capture.microphone ?? "none",
            "testDevice": !capture.notices.isEmpty, "photos": capture.photoOutput != nil, "movies": capture.movieOutput != nil,
            "running": capture.session.isRunning, "interruption": interruption.withLock { $0 } ?? NSNull(),
            "rotation": settings.rotation, "mirrored": settings.mirrored,
            "cameras": CaptureDevice.DiscoverySession(mediaType: .video).devices.map(\.uniqueID),
        ]
        if let recording, let movie = capture.movieOutput {
            fields["recording"] = ["path": recording.url.path, "elapsed": movie.recordedDuration, "paused": movie.isRecordingPaused] as ControlFields
        } else {
            fields["recording"] = NSNull()
        }
        return fields
    }

    // MARK: Settings

    func rotate(_ degrees: Int) throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        var new = settings
        new.rotation = degrees
        try apply(new)
        let later = recording != nil ? " (photos from now on; the movie being recorded keeps its rotation, the next one gets it)" : ""
        return ControlReply(fields: ["rotation": degrees, "appliesToCurrentRecording": false], text: "rotation \(degrees)°\(later)")
    }

    func mirror(_ mirrored: Bool) throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        var new = settings
        new.mirrored = mirrored
        try apply(new)
        return ControlReply(fields: ["mirrored": mirrored], text: "mirroring \(mirrored ? "on" : "off")")
    }

    /// Applies `new` on the live session: only what differs from the settings in force, without stopping
    /// anything. Everything is checked first, so a refused change leaves the settings as they were.
    /// Returns the names of the fields that changed. Rotation and mirroring apply to the next photo and
    /// the next recording (a movie's rotation is written when it starts).
    @discardableResult
    func apply(_ new: ControlledCaptureSettings) throws(ControlFailure) -> [String] {
        guard CaptureConnection.supportedVideoRotationAngles.contains(Double(new.rotation)) else {
            throw ControlFailure("rotation \(new.rotation) is not one of \(NumberRanges.rotation.accepted)")
        }
        for folder in Set([new.photoFolder, new.movieFolder]) where folder != settings.photoFolder && folder != settings.movieFolder {
            do { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) } catch {
                throw ControlFailure("cannot create the folder \(folder.path): \(error.localizedDescription)")
            }
        }
        let changed = settings.changes(to: new)
        if new.rotation != settings.rotation || new.mirrored != settings.mirrored { applyToConnections(new) }
        settings = new
        return changed
    }

    private func applyToConnections(_ settings: ControlledCaptureSettings) {
        let connections = [capture.photoOutput?.connection, capture.movieOutput?.connection].compactMap { $0 }
        for connection in connections {
            connection.videoRotationAngle = Double(settings.rotation)
            connection.automaticallyAdjustsVideoMirroring = false
            connection.isVideoMirrored = settings.mirrored
        }
    }

    private func nextFile(_ naming: FileNamePattern, in folder: URL) throws(ControlFailure) -> URL {
        let key = folder.path + "/" + naming.text
        let files = self.files[key] ?? OutputFiles(folder: folder, pattern: naming)
        self.files[key] = files
        do { return try files.next() } catch { throw ControlFailure("\(error)") }
    }

    /// SIGHUP: the reload hook re-reads the set-up, and what changed is applied on the live session. The
    /// hook runs off this actor and off the cooperative pool, so commands are answered while a slow camera
    /// opens; a SIGHUP during a reload reloads once more after it.
    func reload() async {
        guard !stopping else { return }
        guard !isReloading else { reloadAgain = true; return }
        isReloading = true
        defer { isReloading = false }
        repeat {
            reloadAgain = false
            do {
                let onReload = onReload, current = settings
                let new = try await Self.reloading.run { try onReload(current) }
                guard !stopping else { return }
                let changed = try apply(new.settings)
                output.event("reloaded", new.eventFields(changed: changed), text: new.eventText(changed: changed))
            } catch {
                output.event("reloadFailed", ["error": "\(error)"], text: "reload failed, the set-up runs on unchanged: \(error)")
            }
        } while reloadAgain && !stopping
    }

    private static let reloading = BlockingQueue(label: "gcapture.run.reload", qos: .userInitiated)
    private var isReloading = false
    private var reloadAgain = false
}
