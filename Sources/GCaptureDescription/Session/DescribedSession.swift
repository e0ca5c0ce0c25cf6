import Foundation
import GCapture
import GCaptureSupport

/// The session a checked description declares, built and committed (its graph prepared, no device opened
/// until `start`): the outputs it asked for, and where their files go. What drives it (`gcapture run`, a
/// program) takes photos and records through `takePhoto()` and `startRecording(delegate:)`, or through the
/// outputs themselves.
public final class DescribedSession: Sendable {
    public let session: CaptureSession
    public let microphoneInput: CaptureDeviceInput?
    public let photoOutput: CapturePhotoOutput?
    public let movieOutput: CaptureMovieFileOutput?
    public let frameOutput: CaptureVideoDataOutput?
    public let previewOutput: CapturePreviewOutput?
    /// Publishes from `start` on to `checked.streamLocation`.
    public let streamOutput: CaptureStreamOutput?
    /// Records from every start of the session to its stop (`outputs.timelapse`).
    public let timelapse: DescribedTimelapse?
    /// `outputs.motion`: its events, and the movie's events it triggers when `triggers: movie`.
    public let motionOutput: CaptureMotionOutput?
    public var motionTriggersMovie: Bool { description.outputs.motion?.triggersMovie ?? false }

    private struct State {
        var checked: CheckedDescription
        var cameraInput: CaptureDeviceInput
        var rotation: Int
        var mirrored: Bool
        var photoFiles: OutputFiles?
        var movieFiles: OutputFiles?
    }
    private let state: Locked<State>

    /// The description in force (the last one `reload` applied).
    public var checked: CheckedDescription { state.withLock { $0.checked } }
    public var description: CaptureDescription { checked.description }
    public var cameraInput: CaptureDeviceInput { state.withLock { $0.cameraInput } }
    /// Where the next photo and movie go (folder and naming rule).
    public var photoFiles: OutputFiles? { state.withLock { $0.photoFiles } }
    public var movieFiles: OutputFiles? { state.withLock { $0.movieFiles } }

    /// Builds the session: inputs, outputs with their settings, preset, rotation and mirroring. Nothing is
    /// opened or written yet (the output folders are made with their first file).
    public init(_ checked: CheckedDescription) throws(CaptureError) {
        let description = checked.description
        session = CaptureSession(name: "described")
        let cameraInput = try CaptureDeviceInput(device: checked.camera)
        // A stream carries the microphone too (as `gcapture stream` does), unless the description says `none`.
        let recordsAudio = (description.outputs.movie?.audio ?? false) || description.outputs.stream != nil
        microphoneInput = try recordsAudio ? checked.microphone.map { device throws(CaptureError) in try CaptureDeviceInput(device: device) } : nil
        photoOutput = description.outputs.photo.map { _ in CapturePhotoOutput() }
        movieOutput = description.outputs.movie.map { _ in CaptureMovieFileOutput() }
        frameOutput = description.outputs.frames.map { _ in CaptureVideoDataOutput() }
        streamOutput = description.outputs.stream.map { _ in CaptureStreamOutput() }
        timelapse = description.outputs.timelapse.map { _ in DescribedTimelapse() }
        motionOutput = description.outputs.motion.map { settings in
            let output = CaptureMotionOutput()
            (output.zones, output.masks) = (settings.zones, settings.masks)
            (output.sensitivity, output.minimumArea) = (settings.sensitivity, settings.minimumArea)
            return output
        }
        previewOutput = description.outputs.preview.map { preview in
            let output = CapturePreviewOutput()
            output.sinkName = preview.sink == "auto" ? nil : preview.sink
            return output
        }
        state = Locked(State(checked: checked, cameraInput: cameraInput, rotation: description.rotation,
                             mirrored: description.mirrored))
        configureOutputs(checked)
        if let frames = description.outputs.frames, let frameOutput, frames.format != nil || frames.width != nil {
            frameOutput.videoSettings = .init(pixelFormat: frames.format, width: frames.width, height: frames.height)
        }
        applyTurns()

        session.beginConfiguration()
        try session.add(cameraInput)
        if let microphoneInput { try session.add(microphoneInput) }
        for output in outputs { try session.add(output) }
        session.sessionPreset = CaptureSession.Preset(rawValue: description.camera.preset) ?? .high
        try session.commitAndWait()
        timelapse?.follow(session)
    }

    /// Reads, checks and builds in one step; errors are the description's, with their positions.
    public static func open(contentsOf url: URL, file: String? = nil, options: DescriptionOptions = .init()) throws -> DescribedSession {
        try DescribedSession(CaptureDescription.load(contentsOf: url, file: file, options: options))
    }

    public var outputs: [CaptureOutput] {
        [previewOutput as CaptureOutput?, photoOutput, movieOutput, frameOutput, streamOutput].compactMap { $0 }
            + [timelapse?.output, motionOutput].compactMap { $0 }
    }

    /// Starts the session, and the stream if the description has one.
    public func start() async throws(CaptureError) {
        try await session.start()
        try startStreaming()
    }

    /// Starts publishing to the description's stream location (the session must be running); nothing
    /// without a stream output or while it publishes already. The supervisor retries a server that is away.
    public func startStreaming() throws(CaptureError) {
        guard let streamOutput, let location = checked.streamLocation, !streamOutput.isStreaming else { return }
        try streamOutput.startStreaming(to: location)
    }

    /// Finalizes the timelapse (waiting for its file), then stops the session.
    public func stop() async {
        await timelapse?.stop()
        await session.stop()
    }

    /// The settings of outputs that can change while the session runs (they apply from the next photo or
    /// recording), and their files.
    private func configureOutputs(_ checked: CheckedDescription) {
        let description = checked.description
        if let photo = description.outputs.photo, let photoOutput, let folder = checked.photoFolder {
            photoOutput.isZeroShutterLagEnabled = photo.zeroShutterLag
            photoOutput.isAutoDeferredPhotoDeliveryEnabled = photo.deferred
            photoOutput.deferredPhotoDirectories = [folder]
            let files = OutputFiles(folder: folder, pattern: photo.name)
            state.withLock { $0.photoFiles = files }
        }
        if let movie = description.outputs.movie, let movieOutput, let folder = checked.movieFolder {
            movieOutput.movieFragmentInterval = movie.fragmentInterval
            movieOutput.preRollDuration = movie.preRoll
            movieOutput.maxRecordedDuration = movie.maxDuration
            movieOutput.maxRecordedFileSize = movie.maxSize
            if let minimum = movie.minFreeDisk { movieOutput.minFreeDiskSpaceLimit = minimum }
            movieOutput.fileType = movie.format == "matroska" ? .matroska : .mp4
            movieOutput.videoEncoder = movie.encoder
            // The file gives kbit/s, as encoders' own settings do; the engine takes bits per second.
            movieOutput.videoBitRate = movie.bitRate.map { $0 * 1000 }
            let files = OutputFiles(folder: folder, pattern: movie.name)
            state.withLock { $0.movieFiles = files }
        }
        if let stream = description.outputs.stream, let streamOutput {
            streamOutput.videoBitRate = stream.bitRate.map { $0 * 1000 }
            streamOutput.keyFrameInterval = stream.keyInterval
            streamOutput.profile = CaptureStreamOutput.Profile(rawValue: stream.profile) ?? .main
            streamOutput.videoEncoder = stream.encoder
            streamOutput.audioCodec = CaptureStreamOutput.AudioCodec(rawValue: stream.audioCodec) ?? .aac
        }
        if let settings = description.outputs.timelapse { timelapse?.configure(settings, folder: checked.timelapseFolder) }
        if let frames = description.outputs.frames, let frameOutput {
            frameOutput.alwaysDiscardsLateVideoFrames = frames.discardLate
        }
        if let preview = description.outputs.preview, let previewOutput {
            previewOutput.videoGravity = switch preview.gravity {
            case "resize-aspect-fill": .resizeAspectFill
            case "resize": .resize
            default: .resizeAspect
            }
            previewOutput.isFullscreen = preview.fullscreen
            // `auto` leaves the choice to the connection: a front camera's preview is mirrored, as a mirror.
            previewOutput.connection.automaticallyAdjustsVideoMirroring = preview.mirror == "auto"
            if preview.mirror != "auto" { previewOutput.connection.isVideoMirrored = preview.mirror == "on" }
        }
    }

    // MARK: Rotation and mirroring

    /// The rotation on top of the camera's mount angle (0, 90, 180, 270).
    public var rotation: Int { state.withLock { $0.rotation } }
    public var isMirrored: Bool { state.withLock { $0.mirrored } }

    /// Changes the rotation of what is captured from now on (the running session is not stopped; a
    /// recording in progress keeps the angle it started with).
    public func setRotation(_ degrees: Int) throws(CaptureError) {
        guard Schema.quarterTurns.contains(degrees) else {
            throw .invalidSettings("rotation must be 0, 90, 180 or 270 degrees, not \(degrees)")
        }
        state.withLock { $0.rotation = degrees }
        applyTurns()
    }

    public func setMirrored(_ mirrored: Bool) {
        state.withLock { $0.mirrored = mirrored }
        applyTurns()
    }

    /// Degrees photos, movies and frames are turned by: the mount angle plus the rotation.
    public var effectiveRotation: Int {
        state.withLock { ($0.checked.description.camera.mount + $0.rotation) % 360 }
    }

    private func applyTurns() {
        let angle = Double(effectiveRotation)
        let mirrored = isMirrored
        // The preview turns with what is captured, so that it shows what the photos will; its mirroring is its own.
        previewOutput?.connection.videoRotationAngle = angle
        for output in [photoOutput as CaptureOutput?, movieOutput, frameOutput, timelapse?.output].compactMap({ $0 }) {
            output.connection.videoRotationAngle = angle
            // The description says whether what is captured is mirrored (it is not, unless it says so: what
            // automatic adjustment also gives it); AVFoundation allows setting it only by hand.
            output.connection.automaticallyAdjustsVideoMirroring = false
            output.connection.isVideoMirrored = mirrored
        }
    }

    // MARK: Camera

    /// Swaps the camera (and sets the preset) on the session, running or not; when the new camera cannot
    /// be used, the previous one stays in place and the error says why.
    public func switchCamera(to device: CaptureDevice, preset: CaptureSession.Preset? = nil) throws(CaptureError) {
        let old = cameraInput
        let input = try CaptureDeviceInput(device: device)
        session.beginConfiguration()
        session.removeInput(old)
        do {
            try session.add(input)
        } catch {
            session.addInput(old)
            session.commitConfiguration()
            throw error
        }
        if let preset { session.sessionPreset = preset }
        try session.commitAndWait()
        state.withLock { $0.cameraInput = input }
    }

    // MARK: Reloading

    /// What `reload` did: the changes applied to the live session, and those it cannot apply while the
    /// session exists (an output or the microphone added or removed), which need a new session.
    public struct ReloadReport: Sendable, Equatable {
        /// Dotted keys, e.g. "rotation", "camera", "outputs.photo".
        public var applied: [String] = []
        public var needsRestart: [String] = []
    }

    /// Applies a newer version of the description (re-read after an edit) to this session, running or not:
    /// only what changed, without stopping it. Camera and preset are swapped in place; rotation, mirroring
    /// and the outputs' settings apply from the next photo or recording. Adding or removing an output or the
    /// microphone cannot be done in place: it is reported in `needsRestart` and left as it was.
    @discardableResult
    public func reload(_ new: CheckedDescription) throws(CaptureError) -> ReloadReport {
        let old = checked
        let was = old.description, now = new.description
        var report = ReloadReport()
        if was.camera != now.camera || old.camera != new.camera {
            let preset = CaptureSession.Preset(rawValue: now.camera.preset) ?? .high
            if old.camera != new.camera || was.camera.pattern != now.camera.pattern || was.camera.noise != now.camera.noise {
                try switchCamera(to: new.camera, preset: preset)
                report.applied.append("camera")
            } else if was.camera.preset != now.camera.preset {
                session.beginConfiguration()
                session.sessionPreset = preset
                try session.commitAndWait()
                report.applied.append("camera.preset")
            }
            if was.camera.mount != now.camera.mount { report.applied.append("camera.mount") }
        }
        let structural: [(String, Bool)] = [
            ("outputs.photo", (was.outputs.photo == nil) != (now.outputs.photo == nil)),
            ("outputs.movie", (was.outputs.movie == nil) != (now.outputs.movie == nil)),
            // The window is made with the branch (its sink, gravity and fullscreen); only mirroring changes live.
            ("outputs.preview", was.outputs.preview.map { [$0.sink, $0.gravity, "\($0.fullscreen)"] }
                != now.outputs.preview.map { [$0.sink, $0.gravity, "\($0.fullscreen)"] }),
            ("outputs.frames", was.outputs.frames.map { ($0.format, $0.width, $0.height) } ?? (nil, nil, nil)
                != now.outputs.frames.map { ($0.format, $0.width, $0.height) } ?? (nil, nil, nil)
                || (was.outputs.frames == nil) != (now.outputs.frames == nil)),
            // The stream's branch and connection are made when it starts.
            ("outputs.stream", was.outputs.stream != now.outputs.stream || old.streamLocation != new.streamLocation),
            // A movie output added or removed is outputs.movie's change, not the microphone's.
            ("microphone", old.microphone != new.microphone
                || was.outputs.movie != nil && now.outputs.movie != nil && was.outputs.movie?.audio != now.outputs.movie?.audio),
            ("outputs.timelapse", (was.outputs.timelapse == nil) != (now.outputs.timelapse == nil)),
            ("outputs.motion", was.outputs.motion != now.outputs.motion),
            // The web page's certificate is read when the run starts.
            ("web", was.web != now.web),
        ]
        report.needsRestart = structural.filter(\.1).map(\.0)
        for (key, changed) in [("outputs.preview", was.outputs.preview != now.outputs.preview && !report.needsRestart.contains("outputs.preview")),
                               ("outputs.photo", was.outputs.photo != now.outputs.photo && !report.needsRestart.contains("outputs.photo")),
                               ("outputs.movie", was.outputs.movie != now.outputs.movie && !report.needsRestart.contains("outputs.movie")),
                               ("outputs.frames", was.outputs.frames?.discardLate != now.outputs.frames?.discardLate
                                    && !report.needsRestart.contains("outputs.frames"))] where changed {
            report.applied.append(key)
        }
        if was.outputs.timelapse != now.outputs.timelapse, !report.needsRestart.contains("outputs.timelapse") {
            report.applied.append("outputs.timelapse")
        }
        if was.rotation != now.rotation { report.applied.append("rotation") }
        if was.mirrored != now.mirrored { report.applied.append("mirror") }
        state.withLock { state in
            state.checked = new
            state.rotation = now.rotation
            state.mirrored = now.mirrored
        }
        configureOutputs(new)
        applyTurns()
        return report
    }

    // MARK: Photos and movies

    /// Settings for the next photo as the description says: its quality, orientation handling and file.
    public func makePhotoSettings() throws(CaptureError) -> CapturePhotoSettings {
        guard let photo = description.outputs.photo, let photoFiles, photoOutput != nil else {
            throw .invalidSettings("the description has no photo output (outputs.photo)")
        }
        return CapturePhotoSettings(photoQualityPrioritization: photo.qualityPrioritization,
                                    orientationHandling: photo.exifOrientation ? .exifOrientationOnly : .rotatePixels,
                                    fileURL: try photoFiles.next())
    }

    /// Takes a photo into the next file of the photo folder.
    public func takePhoto() async throws(CaptureError) -> CapturePhoto {
        guard let photoOutput else { throw .invalidSettings("the description has no photo output (outputs.photo)") }
        return try await photoOutput.capturePhoto(with: makePhotoSettings())
    }

    /// Starts a recording into `url`, or the next file of the movie folder; returns where it goes.
    @discardableResult
    public func startRecording(to url: URL? = nil, delegate: any CaptureFileOutputRecordingDelegate) throws(CaptureError) -> URL {
        guard let movieOutput, let movieFiles else { throw .invalidSettings("the description has no movie output (outputs.movie)") }
        let target: URL
        if let url { target = url } else { target = try movieFiles.next() }
        movieOutput.startRecording(to: target, recordingDelegate: delegate)
        return target
    }

    // MARK: Inspection

    /// The graph the session would play, in gst-launch syntax (the prepared graph while stopped).
    public var launchDescription: String? { session.launchDescription }

    /// The same graph in Graphviz dot form.
    public var dotDescription: String? { session.graphDescription ?? session.preparedGraphDescription }
}

/// A folder and a naming rule: hands out the next file name, never one that exists.
public final class OutputFiles: Sendable {
    public let folder: URL
    public let pattern: FileNamePattern
    private let counter: Locked<Int>

    /// Numbering continues after the highest number already in the folder. The folder is made with the
    /// first file, so that inspecting a description leaves nothing behind.
    public init(folder: URL, pattern: FileNamePattern) {
        self.folder = folder
        self.pattern = pattern
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        counter = Locked(names.compactMap(pattern.counter(inName:)).max() ?? 0)
    }

    /// Whether `name` in `folder` is one of this rule's files (a gallery telling timelapses from movies).
    public func names(_ name: String, in folder: URL) -> Bool {
        folder.standardizedFileURL.path == self.folder.standardizedFileURL.path && pattern.counter(inName: name) != nil
    }

    /// The next file (its folder made if needed): the counter goes up by one each time, skipping names
    /// that exist.
    public func next(date: Date = Date()) throws(CaptureError) -> URL {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw .fileAccessFailed("cannot create the folder \(folder.path): \((error as NSError).localizedDescription)")
        }
        return counter.withLock { counter in
            while true {
                counter += 1
                let url = folder.appendingPathComponent(pattern.render(counter: counter, date: date))
                if !FileManager.default.fileExists(atPath: url.path) { return url }
            }
        }
    }
}

extension CaptureDescription.Photo {
    /// `quality` as the photo output names it (the reader accepts only its three names).
    public var qualityPrioritization: CapturePhotoOutput.QualityPrioritization {
        CapturePhotoOutput.QualityPrioritization.allCases.first { $0.description == quality } ?? .balanced
    }
}
