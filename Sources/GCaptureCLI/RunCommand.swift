import ArgumentParser
import Foundation
import GCapture
import GCaptureControl
import GCaptureDescription
import GCaptureWeb

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a capture set-up until told to stop, driven by commands on stdin and by signals.",
        discussion: """
        With a description FILE (see docs/description-files.md; `gcapture inspect FILE` checks it), the file \
        is the set-up, and SIGHUP re-reads it and applies what changed to the running session. Without one, \
        the set-up is a camera, a microphone, a photo output and a movie output, chosen by the options below.

        Commands, one per line on stdin, as plain words or as a JSON object (see docs/control-protocol.md):
          \(ControlCommand.synopsis.joined(separator: "\n  "))

        With --json every reply and event is a JSON object on its own line, and the first line gives the \
        protocol's version; a request may carry an "id", given back in its reply:
          {"id": 1, "command": "photo"}
          {"id": 2, "command": "record", "action": "start", "path": "clip.mp4"}

        Signals: SIGUSR1 takes a photo (the shutter), SIGUSR2 triggers an event (as `trigger`). SIGHUP reloads the set-up (without a file: the \
        settings in force are applied again; a file's changes that need a new session, such as an output \
        added, are reported and left as they were). The first INT, TERM or QUIT stops cleanly: the recording is \
        finalized, the photos requested are written, exit status 0; a second one exits at once. The end of \
        stdin ends the commands, not the run.

        Under systemd (Type=notify, NOTIFY_SOCKET set): READY=1 once capturing, STATUS= lines, WATCHDOG=1 at \
        half of WatchdogSec while frames flow (a wedged camera starves it and systemd restarts the service), \
        STOPPING=1 when it stops. See Examples/kiosk.

        Examples:
          gcapture run pipelines/photobooth.yaml --json
          gcapture run --photo-folder shots --movie-folder clips
          gcapture run --camera test --microphone none --json < commands.jsonl
        """)

    @OptionGroup var logging: LoggingOptions

    @Argument(help: "A description file: the whole set-up (the options for devices, folders and names then do not apply).")
    var file: String?

    @Flag(help: "The description comes from untrusted hands: no custom fragments, a display sink for the preview, every path inside --root (its folders, and the PATH of `photo` and `record start`).")
    var safe = false

    @Option(help: "With --safe: the folder every output path must stay inside; a command's PATH is relative to it.")
    var root: String?

    @OptionGroup var device: CameraOptions<HighestQuality>

    @Option(help: DeviceChoice.microphoneHelp(none: "for silent movies"))
    var microphone: String?

    @Option(help: "Folder for photos taken without a path (created if missing).")
    var photoFolder = "."

    @Option(help: "Folder for movies recorded without a path (created if missing).")
    var movieFolder = "."

    @Option(help: "Photo file names: {counter} is the next free number, {date} the local time.",
            transform: { try Self.naming($0, option: "--photo-naming", folderOption: "--photo-folder", extensions: ["jpg", "jpeg"]) })
    var photoNaming = ControlledCaptureSettings.defaultPhotoNaming

    @Option(help: "Movie file names (.mp4, or .mkv for Matroska), with {counter} and {date}.",
            transform: { try Self.naming($0, option: "--movie-naming", folderOption: "--movie-folder", extensions: ["mp4", "mkv"]) })
    var movieNaming = ControlledCaptureSettings.defaultMovieNaming

    @OptionGroup var events: EventOptions

    @Option(parsing: .unconditional, help: "Degrees clockwise to turn photos and movies upright: \(NumberRanges.rotation.accepted) (default: 0; `rotate` changes it).",
            transform: NumberRanges.rotation.parser)
    var rotation: Int = 0

    @Flag(help: "Show the live picture too, filling the screen: a kiosk's preview (under cage, see Examples/kiosk).")
    var preview = false

    @Option(help: "With --preview: a GStreamer video sink instead of the one chosen (see `gcapture preview --help`).")
    var previewSink: String?

    @Flag(help: "Replies and events as JSON lines, for programs.")
    var json = false

    @Option(help: "Serve the operator's web page (live view, controls, events, gallery) on ADDR:PORT, e.g. 127.0.0.1:8080 (see `gcapture serve`).")
    var http: String?

    @OptionGroup var web: WebOptions

    /// A naming pattern whose names end in one of `extensions`: the file's type is what its name says.
    static func naming(_ text: String, option: String, folderOption: String, extensions: [String]) throws -> FileNamePattern {
        let pattern: FileNamePattern
        do { pattern = try FileNamePattern(parsing: text, folderSetting: folderOption) } catch { throw ValidationError("\(option) \(text): \(error)") }
        guard extensions.contains(URL(fileURLWithPath: text).pathExtension.lowercased()) else {
            throw ValidationError("\(option) \(text): the names must end in " + extensions.map { "." + $0 }.joined(separator: " or "))
        }
        return pattern
    }

    func validate() throws {
        if safe, file == nil { throw ValidationError("--safe is for description files: give the FILE") }
        // A description file says so itself (outputs.preview), in one place with its sink, gravity and mirroring.
        if preview || previewSink != nil, file != nil {
            throw ValidationError("--preview is for the form without a FILE: a description file has its own (outputs.preview)")
        }
        if previewSink != nil, !preview { throw ValidationError("--preview-sink needs --preview") }
        if http == nil, web.token != nil { throw ValidationError("--token is for the web page: give --http ADDR:PORT") }
        if http == nil, web.tlsCertificate != nil || web.tlsKey != nil {
            throw ValidationError("--tls-cert and --tls-key are for the web page: give --http ADDR:PORT")
        }
    }

    func run() async throws {
        try await ControlledRun.run(json: json, web: http.map { ControlledRun.Web(options: web, listen: $0) }, makeCapture: makeCapture)
    }

    /// The set-up to run and how SIGHUP reloads it: the one place `run` gets its set-up. Here from the
    /// options, re-applying the settings in force on reload; a description file's set-up comes in here too,
    /// as a `ControlledCapture` built from the described session, its outputs and settings, with a reload
    /// hook that re-reads the file and returns its settings.
    func makeCapture() throws -> ControlledRun.SetUp {
        guard let file else { return ControlledRun.SetUp(capture: try captureFromOptions()) }
        let cameras = try DescriptionCommandSupport.openCameras(file, safe: safe, root: root)
        let options = DescriptionCommandSupport.options(safe: safe, root: root)
        let names = cameras.map { $0.description.cameraName ?? "camera" }
        let setUps = cameras.enumerated().map { index, described in
            var capture = ControlledCapture(session: described.session, photoOutput: described.photoOutput,
                                            movieOutput: described.movieOutput, streamOutput: described.streamOutput,
                                            streamLocation: described.checked.streamLocation, settings: Self.settings(of: described),
                                            camera: described.cameraInput.device.description,
                                            microphone: described.microphoneInput?.device.description,
                                            notices: described.checked.notices)
            capture.paths.root = safe ? options.root.map(SafeRoot.init) : nil
            (capture.motionOutput, capture.motionTriggersEvents) = (described.motionOutput, described.motionTriggersMovie)
            capture.timelapse = described.timelapse
            return ControlledRun.SetUp.Camera(name: names[index], capture: capture,
                                              reload: Self.reload(described, camera: index, of: names, file: file, options: options))
        }
        // Read only when the page is served, and not when --tls-cert/--tls-key give one.
        let webTLS = http != nil && web.tls == nil ? try Self.webTLS(of: cameras[0].checked, file: file) : nil
        // The sessions' stop drains the timelapses; their files become plain MP4s just after, which the run waits for.
        let timelapses = cameras.compactMap(\.timelapse)
        return ControlledRun.SetUp(cameras: setUps, webTLS: webTLS,
                                   settle: { for timelapse in timelapses { await timelapse.waitUntilSettled() } })
    }

    /// SIGHUP for one camera of a description: the file re-read, and that camera's part applied. A file whose
    /// list of cameras changed (one added, removed, renamed or moved) needs a new run: reported, left as it was.
    private static func reload(_ described: DescribedSession, camera index: Int, of names: [String], file: String,
                               options: DescriptionOptions) -> CaptureController.ReloadHook {
        { _ in
            let cameras = try CaptureDescription.loadCameras(contentsOf: URL(fileURLWithPath: file), file: file, options: options)
            guard cameras.map({ $0.description.cameraName ?? "camera" }) == names else {
                if index == 0 {
                    FileHandle.standardError.write(Data("gcapture: \(file): cameras changed; that needs a new run and was left as it was\n".utf8))
                }
                return ReloadedSetUp(settings: Self.settings(of: described), needsNewRun: ["cameras"])
            }
            let report = try described.reload(cameras[index])
            if !report.needsRestart.isEmpty {
                let camera = names.count > 1 ? " (\(names[index]))" : ""
                FileHandle.standardError.write(Data("gcapture: \(file)\(camera): \(report.needsRestart.joined(separator: ", ")) changed; that needs a new run and was left as it was\n".utf8))
            }
            return ReloadedSetUp(settings: Self.settings(of: described), needsNewRun: report.needsRestart)
        }
    }

    /// The description's certificate and key for the page (already found readable by the check), read; a
    /// file that does not hold them is reported at its key's line, as the check's errors are.
    private static func webTLS(of checked: CheckedDescription, file: String) throws -> WebTLSIdentity? {
        guard let certificate = checked.tlsCertificate, let key = checked.tlsKey else { return nil }
        do {
            return try WebTLSIdentity(certificate: certificate.path, key: key.path)
        } catch {
            let path = error.file == .certificate ? "web.tls-cert" : "web.tls-key"
            let diagnostic = DescriptionDiagnostic(file: file, position: checked.description.position(of: path), message: "\(path): \(error.description)")
            FileHandle.standardError.write(Data((diagnostic.description + "\n").utf8))
            throw ExitCode(1)
        }
    }

    /// What of a described set-up `run` commands change live.
    private static func settings(of described: DescribedSession) -> ControlledCaptureSettings {
        let description = described.description
        let photo = description.outputs.photo
        let here = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        // One spelling of a folder, so that a reload compares folders, not how their URLs were made.
        func folder(_ url: URL) -> URL { URL(fileURLWithPath: url.path, isDirectory: true).standardizedFileURL }
        return ControlledCaptureSettings(
            rotation: described.effectiveRotation,
            mirrored: described.isMirrored,
            photoQuality: photo?.qualityPrioritization ?? .balanced,
            photoEXIFOrientation: photo?.exifOrientation ?? false,
            photoFolder: folder(described.photoFiles?.folder ?? here),
            movieFolder: folder(described.movieFiles?.folder ?? here),
            photoNaming: described.photoFiles?.pattern ?? ControlledCaptureSettings.defaultPhotoNaming,
            movieNaming: described.movieFiles?.pattern ?? ControlledCaptureSettings.defaultMovieNaming,
            postRoll: description.outputs.movie?.postRoll ?? CaptureEventRecorder.defaultPostRoll,
            eventGap: description.outputs.movie?.eventGap,
            triggerInterval: description.outputs.movie?.triggerEvery,
            photoAlbum: photo?.album)
    }

    /// The set-up the options describe.
    func captureFromOptions() throws -> ControlledCapture {
        let cameraChoice = try device.cameraChoice()
        let microphoneChoice = try DeviceChoice.microphone(microphone)
        let settings = ControlledCaptureSettings(
            rotation: rotation,
            photoFolder: try Self.folder(photoFolder, option: "--photo-folder"),
            movieFolder: try Self.folder(movieFolder, option: "--movie-folder"),
            photoNaming: photoNaming,
            movieNaming: movieNaming,
            postRoll: events.postRoll,
            eventGap: events.eventGap,
            triggerInterval: events.triggerEvery)
        let photos = CapturePhotoOutput()
        let movie = CaptureMovieFileOutput()
        movie.preRollDuration = events.preRoll
        let session = CaptureSession(name: "gcapture-run")
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: cameraChoice.device))
        if let microphone = microphoneChoice?.device { try session.add(CaptureDeviceInput(device: microphone)) }
        try session.add(photos)
        try session.add(movie)
        let motion = events.motion ? CaptureMotionOutput() : nil
        if let motion { try session.add(motion) }
        if preview {
            let screen = CapturePreviewOutput()
            // waylandsink (cage) and kmssink fill the screen; on an X desktop the preview is a window.
            let environment = ProcessInfo.processInfo.environment
            screen.isFullscreen = !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty || (environment["DISPLAY"] ?? "").isEmpty
            screen.sinkName = previewSink
            try session.add(screen)
        }
        session.sessionPreset = device.preset
        try session.commitAndWait()
        var capture = ControlledCapture(session: session, photoOutput: photos, movieOutput: movie, settings: settings,
                                        camera: cameraChoice.device.description, microphone: microphoneChoice?.device.description,
                                        notices: [cameraChoice, microphoneChoice].compactMap { $0?.notice })
        (capture.motionOutput, capture.motionTriggersEvents) = (motion, motion != nil)
        return capture
    }

    /// The folder, created when missing.
    static func folder(_ path: String, option: String) throws -> URL {
        let url = URL(fileURLWithPath: path, isDirectory: true).standardizedFileURL
        do { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) } catch {
            throw CommandFailure("\(option) \(path): cannot create the folder (\((error as NSError).localizedDescription))")
        }
        return url
    }
}
