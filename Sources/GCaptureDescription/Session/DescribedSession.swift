import Foundation
import GCapture
import GStreamerKit

/// The session a checked description declares, built and committed (its graph prepared, no device opened
/// until `start`): the outputs it asked for, and where their files go. What drives it (`gcapture run`, a
/// program) takes photos and records through `takePhoto()` and `startRecording(delegate:)`, or through the
/// outputs themselves.
public final class DescribedSession: @unchecked Sendable {
    public let checked: CheckedDescription
    public var description: CaptureDescription { checked.description }
    public let session: CaptureSession
    public let cameraInput: CaptureDeviceInput
    public let microphoneInput: CaptureDeviceInput?
    public let photoOutput: CapturePhotoOutput?
    public let movieOutput: CaptureMovieFileOutput?
    public let frameOutput: CaptureVideoDataOutput?
    /// Where the next photo and movie go (folder and naming rule).
    public let photoFiles: OutputFiles?
    public let movieFiles: OutputFiles?
    private let state: Locked<(rotation: Int, mirrored: Bool)>

    /// Builds the session: inputs, outputs with their settings, preset, rotation and mirroring. Nothing is
    /// opened or written yet (the output folders are made with their first file).
    public init(_ checked: CheckedDescription) throws(CaptureError) {
        self.checked = checked
        let description = checked.description
        state = Locked((description.rotation, description.mirrored))
        session = CaptureSession(name: "described")
        cameraInput = try CaptureDeviceInput(device: checked.camera)
        let recordsAudio = description.outputs.movie?.audio ?? false
        microphoneInput = try recordsAudio ? checked.microphone.map { device throws(CaptureError) in try CaptureDeviceInput(device: device) } : nil

        if let photo = description.outputs.photo, let folder = checked.photoFolder {
            let output = CapturePhotoOutput()
            output.isZeroShutterLagEnabled = photo.zeroShutterLag
            output.isAutoDeferredPhotoDeliveryEnabled = photo.deferred
            output.deferredPhotoDirectories = [folder]
            photoOutput = output
            photoFiles = OutputFiles(folder: folder, pattern: photo.name)
        } else {
            photoOutput = nil
            photoFiles = nil
        }
        if let movie = description.outputs.movie, let folder = checked.movieFolder {
            let output = CaptureMovieFileOutput()
            output.movieFragmentInterval = movie.fragmentInterval
            output.maxRecordedDuration = movie.maxDuration
            output.maxRecordedFileSize = movie.maxSize
            if let minimum = movie.minFreeDisk { output.minFreeDiskSpaceLimit = minimum }
            output.fileType = movie.format == "matroska" ? .matroska : .mp4
            output.videoEncoder = movie.encoder
            output.videoBitRate = movie.bitRate
            movieOutput = output
            movieFiles = OutputFiles(folder: folder, pattern: movie.name)
        } else {
            movieOutput = nil
            movieFiles = nil
        }
        if let frames = description.outputs.frames {
            let output = CaptureVideoDataOutput()
            output.alwaysDiscardsLateVideoFrames = frames.discardLate
            if frames.format != nil || frames.width != nil {
                output.videoSettings = .init(pixelFormat: frames.format, width: frames.width, height: frames.height)
            }
            frameOutput = output
        } else {
            frameOutput = nil
        }
        applyTurns()

        session.beginConfiguration()
        try session.add(cameraInput)
        if let microphoneInput { try session.add(microphoneInput) }
        for output in outputs { try session.add(output) }
        session.sessionPreset = CaptureSession.Preset(rawValue: description.camera.preset) ?? .high
        try session.commitAndWait()
    }

    /// Reads, checks and builds in one step; errors are the description's, with their positions.
    public static func open(contentsOf url: URL, file: String? = nil, options: DescriptionOptions = .init()) throws -> DescribedSession {
        try DescribedSession(CaptureDescription.load(contentsOf: url, file: file, options: options))
    }

    public var outputs: [CaptureOutput] {
        [photoOutput as CaptureOutput?, movieOutput, frameOutput].compactMap { $0 }
    }

    public func start() async throws(CaptureError) { try await session.start() }
    public func stop() async { await session.stop() }

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

    /// Degrees photos and movies are turned by: the mount angle plus the rotation.
    public var effectiveRotation: Int { (description.camera.mount + rotation) % 360 }

    private func applyTurns() {
        let angle = Double(effectiveRotation)
        let mirrored = isMirrored
        for output in [photoOutput as CaptureOutput?, movieOutput].compactMap({ $0 }) {
            output.connection.videoRotationAngle = angle
            output.connection.automaticallyAdjustsVideoMirroring = !mirrored
            output.connection.isVideoMirrored = mirrored
        }
    }

    // MARK: Photos and movies

    /// Settings for the next photo as the description says: its quality, orientation handling and file.
    public func makePhotoSettings() throws(CaptureError) -> CapturePhotoSettings {
        guard let photo = description.outputs.photo, let photoFiles else {
            throw .invalidSettings("the description has no photo output (outputs.photo)")
        }
        let quality = CapturePhotoOutput.QualityPrioritization.allCases.first { $0.description == photo.quality } ?? .balanced
        return CapturePhotoSettings(photoQualityPrioritization: quality,
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
public final class OutputFiles: @unchecked Sendable {
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

    /// The next file (its folder made if needed): the counter goes up by one each time, skipping names
    /// that exist.
    public func next(date: Date = Date()) throws(CaptureError) -> URL {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw .invalidSettings("cannot create the folder \(folder.path): \((error as NSError).localizedDescription)")
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
