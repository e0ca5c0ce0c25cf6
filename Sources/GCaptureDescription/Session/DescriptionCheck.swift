import Foundation
import GCapture

/// How a description is read and checked.
public struct DescriptionOptions: Sendable {
    /// For descriptions from untrusted hands: no custom GStreamer fragments, every output folder inside
    /// `root` (no '..', no symbolic link leading out), the sizes and counts of `SafeLimits`.
    public var safe: Bool
    /// The folder output folders are relative to: required under `safe`; otherwise the description
    /// file's own folder when nil.
    public var root: URL?
    /// `microphone: default` takes the built-in test microphone where the machine has none (said in
    /// `CheckedDescription.notices`), as the gcapture CLI does; the library alone does not. A camera is
    /// never stood in for: `id: auto` with no camera waits for one (`CheckedDescription.waitingNotice`).
    public var fallsBackToTestDevices: Bool
    /// Every camera becomes the built-in test camera and every microphone the test microphone, the rest
    /// of the description as written: a dry run of a description written for another machine (and CI).
    public var usesTestDevices: Bool

    public init(safe: Bool = false, root: URL? = nil, fallsBackToTestDevices: Bool = false, usesTestDevices: Bool = false) {
        self.safe = safe
        self.root = root
        self.fallsBackToTestDevices = fallsBackToTestDevices
        self.usesTestDevices = usesTestDevices
    }
}

/// A description checked against this machine: the devices it opens and the folders it writes to.
public struct CheckedDescription: Sendable {
    public let description: CaptureDescription
    public let camera: CaptureDevice
    public let microphone: CaptureDevice?
    /// Where photos and movies go, absolute (created when the session is built).
    public let photoFolder: URL?
    public let movieFolder: URL?
    public internal(set) var timelapseFolder: URL?
    /// Where the stream goes, as CaptureStreamOutput takes it (an HLS playlist's path made absolute).
    public let streamLocation: String?
    /// The web page's certificate and key (`web.tls-cert`, `web.tls-key`), absolute, files this user can
    /// read; whether they hold a certificate and its key is for the web server to say.
    public let tlsCertificate: URL?
    public let tlsKey: URL?
    /// What runs otherwise than written (keys for features this engine does not have yet).
    public let warnings: [DescriptionDiagnostic]
    /// Test devices standing in for missing real ones (only with `fallsBackToTestDevices`).
    public let notices: [String]

    /// When `camera: auto` finds no camera (`camera` is `CaptureDevice.firstAvailableCamera`): what the
    /// session will do about it. A notice, not an error: a kiosk may start before its camera is plugged in.
    public var waitingNotice: String? {
        guard camera.isFirstAvailableCamera else { return nil }
        return "no camera present now: the session starts interrupted (\(CaptureSession.InterruptionReason.videoDeviceUnplugged)) "
            + "and takes the first camera that appears"
    }
}

extension CaptureDescription {
    /// Reads and checks a description file: the schema, then this machine (devices, GStreamer elements,
    /// folders). Throws every error at once, in file order; warnings are in the result.
    public static func load(contentsOf url: URL, file: String? = nil,
                            options: DescriptionOptions = .init()) throws(DescriptionError) -> CheckedDescription {
        let (name, data, options) = try open(url, file: file, options: options)
        return try check(DescriptionReader.read(data, file: name, safe: options.safe), options: options)
    }

    /// The file's name for diagnostics, its bytes, and the options to check it with: outside --safe, paths
    /// in it are relative to its folder unless a root is given.
    static func open(_ url: URL, file: String?,
                     options: DescriptionOptions) throws(DescriptionError) -> (name: String, data: Data, options: DescriptionOptions) {
        let name = file ?? url.path
        let data = try readFile(url, name: name, options: options)
        var options = options
        if options.root == nil, !options.safe { options.root = url.deletingLastPathComponent() }
        return (name, data, options)
    }

    /// The file's bytes, or why there are none in plain words.
    private static func readFile(_ url: URL, name: String, options: DescriptionOptions) throws(DescriptionError) -> Data {
        do {
            if options.safe, let size = try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int,
               size > SafeLimits.fileBytes {
                throw DescriptionError([DescriptionDiagnostic(file: name, position: .start, message:
                    "the file is \(size) bytes; under --safe a description may have at most \(SafeLimits.fileBytes)")])
            }
            if let problem = notAFile(url.path) {
                throw DescriptionError([DescriptionDiagnostic(file: name, position: .start, message: "\(name) \(problem)")])
            }
            return try Data(contentsOf: url)
        } catch let error as DescriptionError {
            throw error
        } catch {
            throw DescriptionError([DescriptionDiagnostic(file: name, position: .start,
                                                          message: "cannot read the file: \((error as NSError).localizedDescription)")])
        }
    }

    /// What a path that is there but is no description file is, in plain words: Foundation's own errors
    /// said "permission" for /dev/zero and "NSCocoaErrorDomain error 256" for a folder. nil for a regular
    /// file, and for a path that is not there (reading it says so).
    private static func notAFile(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "is a folder: give the description file in it"
        default: return "is not a regular file: a description is a YAML file"
        }
    }

    /// Checks what the reader found against this machine; a value the reader already refused is not
    /// checked again.
    public static func check(_ reading: DescriptionReader.Result, options: DescriptionOptions) throws(DescriptionError) -> CheckedDescription {
        guard let description = reading.description else { throw DescriptionError(reading.errors) }
        if options.safe, options.root == nil {
            throw DescriptionError([DescriptionDiagnostic(file: description.file, position: .start,
                                                          message: "--safe needs a root folder for the outputs to stay inside")])
        }
        var checker = MachineCheck(description: description, options: options, earlier: reading.diagnostics)
        let result = checker.run()
        let all = (reading.diagnostics + checker.diagnostics).ordered()
        let errors = all.filter { $0.severity == .error }
        guard errors.isEmpty, let result else { throw DescriptionError(errors) }
        return checked(description, found: result, warnings: all.filter { $0.severity == .warning }, notices: checker.notices)
    }

    static func checked(_ description: CaptureDescription, found: MachineCheck.Found, warnings: [DescriptionDiagnostic],
                        notices: [String]) -> CheckedDescription {
        var checked = CheckedDescription(description: description, camera: found.camera, microphone: found.microphone,
                                         photoFolder: found.photoFolder, movieFolder: found.movieFolder,
                                         streamLocation: found.streamLocation, tlsCertificate: found.tlsCertificate,
                                         tlsKey: found.tlsKey, warnings: warnings, notices: notices)
        checked.timelapseFolder = found.timelapseFolder
        return checked
    }
}

/// The checks that depend on the machine.
struct MachineCheck {
    let description: CaptureDescription
    let options: DescriptionOptions
    let earlier: [DescriptionDiagnostic]
    var diagnostics: [DescriptionDiagnostic] = []
    var notices: [String] = []

    init(description: CaptureDescription, options: DescriptionOptions, earlier: [DescriptionDiagnostic]) {
        self.description = description
        self.options = options
        self.earlier = earlier
    }

    struct Found {
        var camera: CaptureDevice
        var microphone: CaptureDevice?
        var photoFolder: URL?
        var movieFolder: URL?
        var timelapseFolder: URL?
        var streamLocation: String?
        var tlsCertificate: URL?
        var tlsKey: URL?
    }

    mutating func error(_ position: SourcePosition, _ message: String) {
        diagnostics.append(DescriptionDiagnostic(file: description.file, position: position, message: message))
    }

    mutating func warning(_ position: SourcePosition, _ message: String) {
        diagnostics.append(DescriptionDiagnostic(file: description.file, position: position, severity: .warning, message: message))
    }

    /// A camera's key as messages show it: inside its entry of `cameras:` when there is one.
    func shown(_ path: String) -> String { description.pathScope + path }

    /// Whether the reader already refused the value at this path (its default stands in for it).
    func refused(_ path: String) -> Bool {
        guard let position = description.valuePositions[path] else { return false }
        return earlier.contains { $0.severity == .error && $0.position == position }
    }

    mutating func run() -> Found? {
        CaptureRuntime.initialize()
        let camera = findCamera()
        let microphone = findMicrophone()
        checkFragments()
        if let movie = description.outputs.movie, let encoder = movie.encoder, !refused("outputs.movie.encoder"),
           !ElementPackages.isInstalled(encoder) {
            error(description.position(of: "outputs.movie.encoder"), ElementPackages.missing(encoder))
        }
        if let preview = description.outputs.preview { checkPreview(preview) }
        var found: Found?
        if let camera { found = Found(camera: camera, microphone: microphone) }
        let photoFolder = description.outputs.photo.flatMap { folder($0.folder, "outputs.photo.folder") }
        let movieFolder = description.outputs.movie.flatMap { folder($0.folder, "outputs.movie.folder") }
        found?.photoFolder = photoFolder
        found?.movieFolder = movieFolder
        found?.streamLocation = description.outputs.stream.flatMap { checkStream($0) }
        found?.timelapseFolder = description.outputs.timelapse.flatMap { folder($0.folder, "outputs.timelapse.folder") }
        found?.tlsCertificate = description.web.tlsCertificate.flatMap { readableFile($0, "web.tls-cert") }
        found?.tlsKey = description.web.tlsKey.flatMap { readableFile($0, "web.tls-key") }
        return found
    }

    // MARK: Devices

    mutating func findCamera() -> CaptureDevice? {
        let camera = description.camera
        let path = "camera.id"
        let position = description.valuePositions[path] ?? description.keyPositions["camera"] ?? .start
        if refused(path) { return nil }
        let device: CaptureDevice
        switch options.usesTestDevices && camera.choice != .test ? .test : camera.choice {
        case .test:
            if camera.pattern != nil || camera.noise != nil {
                let pattern = camera.pattern.flatMap { name in TestCameraOptions.Pattern.allCases.first { $0.rawValue == name } } ?? .smpte
                device = CaptureDevice.makeTestCamera(options: TestCameraOptions(pattern: pattern, noiseLevel: camera.noise ?? 0))
            } else {
                device = .testCamera
            }
        case .auto:
            let wanted = CaptureDevice.Position(rawValue: camera.position) ?? .unspecified
            // The position is a preference: a kiosk's only camera is used wherever it faces. With none, the
            // session waits for the first camera to appear (interrupted meanwhile): a test pattern standing
            // in would be shown for good, by a kiosk started before its camera.
            device = CaptureDevice.firstCameraPresent(preferring: wanted) ?? .firstAvailableCamera(preferring: wanted)
        case .id(let id):
            guard let found = CaptureDevice.device(withUniqueID: id) else {
                let cameras = CaptureDevice.allDevices.filter { $0.mediaType == .video }.map(\.uniqueID)
                let hint = Suggestion.closest(to: id, among: cameras + ["auto", "test"]).map { "did you mean '\($0)'? " } ?? ""
                error(position, "no camera with id '\(id)' on this machine; \(hint)`gcapture devices` lists the cameras there are")
                return nil
            }
            guard found.mediaType == .video else {
                error(position, "'\(id)' is a microphone, not a camera (see `gcapture devices`)")
                return nil
            }
            device = found
        case .source(let fragment):
            let sourcePosition = description.position(of: "camera.source")
            if checkFragment(fragment, at: sourcePosition, what: shown("camera.source")) {
                error(sourcePosition, "\(shown("camera.source")) is not supported yet: the engine cannot take its camera from a GStreamer fragment (the fragment itself is valid); name the camera by id")
            }
            return nil
        }
        if !refused("camera.preset"), let preset = CaptureSession.Preset(rawValue: camera.preset) {
            let session = CaptureSession(name: "description-check")
            session.beginConfiguration()
            if let input = try? CaptureDeviceInput(device: device), (try? session.add(input)) != nil,
               !session.canSetSessionPreset(preset) {
                let sizes = Set(device.formats.map { "\($0.width)x\($0.height)" }).sorted()
                error(description.position(of: "camera.preset"),
                      "\(device.localizedName) cannot do preset \(preset.rawValue); it offers \(sizes.joined(separator: ", "))")
            }
        }
        return device
    }

    mutating func findMicrophone() -> CaptureDevice? {
        let position = description.position(of: "microphone")
        if refused("microphone") { return nil }
        if options.usesTestDevices, description.microphone != .none { return .testMicrophone }
        switch description.microphone {
        case .none:
            return nil
        case .default:
            if let found = CaptureDevice.default(for: .audio), !found.deviceType.isTest { return found }
            if options.fallsBackToTestDevices {
                notices.append("no microphone found: using the built-in test microphone `test-microphone`")
                return .testMicrophone
            }
            error(position, "no microphone found for `default`; name one by id (see `gcapture devices`), `test-microphone`, or `none`")
            return nil
        case .id(let id):
            guard let found = CaptureDevice.device(withUniqueID: id) else {
                let microphones = CaptureDevice.allDevices.filter { $0.mediaType == .audio }.map(\.uniqueID)
                let hint = Suggestion.closest(to: id, among: microphones + ["default", "none"]).map { "did you mean '\($0)'? " } ?? ""
                error(position, "no microphone with id '\(id)' on this machine; \(hint)`gcapture devices` lists the microphones there are")
                return nil
            }
            guard found.mediaType == .audio else {
                error(position, "'\(id)' is a camera, not a microphone (see `gcapture devices`)")
                return nil
            }
            return found
        }
    }

    // MARK: Fragments

    mutating func checkFragments() {
        for (index, fragment) in description.filters.enumerated() {
            let position = description.position(of: "filters.\(index)")
            if checkFragment(fragment, at: position, what: "filters[\(index)]") {
                warning(position, "filters are not supported yet (the engine has no place for them between camera and outputs): this one is valid but not applied")
            }
        }
    }

    /// Parses a fragment as the engine would; false (reported) when it does not parse or names an element
    /// this machine lacks.
    mutating func checkFragment(_ fragment: String, at position: SourcePosition, what: String) -> Bool {
        do {
            try CaptureRuntime.checkFragment(fragment)
            return true
        } catch let failure as GStreamerError {
            if let element = ElementPackages.missingElement(in: failure.message) {
                error(position, "\(what): " + ElementPackages.missing(element))
            } else if failure.kind == .parse {
                error(position, "\(what) does not parse as a GStreamer fragment (gst-launch syntax: elements joined by '!'): \(failure.message)")
            } else {
                error(position, "\(what) is not a GStreamer fragment this machine can build: \(failure.message)")
            }
            return false
        } catch {
            self.error(position, "\(what) is not a GStreamer fragment this machine can build: \(error)")
            return false
        }
    }

    // MARK: Preview

    /// A named sink must parse and exist; and the display must open here, as `run` would need it (a kiosk's
    /// description checked on a machine without a screen says so, at the preview).
    mutating func checkPreview(_ preview: CaptureDescription.Preview) {
        if preview.sink != "auto" {
            guard !refused("outputs.preview.sink"),
                  checkFragment(preview.sink, at: description.position(of: "outputs.preview.sink"), what: shown("outputs.preview.sink"))
            else { return }
        }
        let output = CapturePreviewOutput()
        output.sinkName = preview.sink == "auto" ? nil : preview.sink
        output.isFullscreen = preview.fullscreen
        do {
            _ = try output.checkDisplay()
        } catch .invalidSettings(let reason) where preview.fullscreen {
            error(description.position(of: "outputs.preview.fullscreen"), "\(shown("outputs.preview.fullscreen")): \(reason)")
        } catch {
            self.error(description.keyPosition(of: "outputs.preview"), "\(shown("outputs.preview")): \(error)")
        }
    }

    // MARK: Stream

    /// Where the stream goes, as CaptureStreamOutput takes it: the URL, or an HLS playlist's path made
    /// absolute against the root (the description's folder). The scheme, the plugins (by Debian package),
    /// the playlist's folder and the encoder are checked here, at the url. Under --safe a description may
    /// not send the camera anywhere.
    mutating func checkStream(_ stream: CaptureDescription.Stream) -> String? {
        let path = "outputs.stream.url"
        // No url (or one the reader refused) was reported where it is missing.
        guard !stream.url.isEmpty, !refused(path) else { return nil }
        if options.safe {
            error(description.keyPosition(of: "outputs.stream"), "\(shown("outputs.stream")) publishes the camera to a server, which --safe forbids")
            return nil
        }
        var location = stream.url
        if !location.contains("://"), !location.hasPrefix("/") {
            let base = options.root ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            location = base.appendingPathComponent(location).standardizedFileURL.path
        }
        let output = CaptureStreamOutput()
        output.videoEncoder = refused("outputs.stream.encoder") ? nil : stream.encoder
        output.audioCodec = CaptureStreamOutput.AudioCodec(rawValue: stream.audioCodec) ?? .aac
        do {
            try output.checkDestination(location)
        } catch {
            self.error(description.position(of: path), "\(shown(path)): \(error)")
            return nil
        }
        return location
    }

    // MARK: Folders

    /// What the description names at `path` (a folder, a file) as an absolute URL, relative to the root (or
    /// the current folder), with the root it was taken from and where the value stands; nil when the path
    /// is refused, or under --safe when it leads outside the root (said as `outside`).
    private mutating func locate(_ value: String, _ path: String, shownAs shownPath: String, outside: String) -> (URL, URL, SourcePosition)? {
        if refused(path) { return nil }
        let position = description.position(of: path)
        let base = (options.root ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).standardizedFileURL
        let url = value.hasPrefix("/") ? URL(fileURLWithPath: value).standardizedFileURL
            : base.appendingPathComponent(value).standardizedFileURL
        if options.safe, !SafeRoot(base).contains(url) {
            error(position, "\(shownPath) '\(value)' \(outside), which --safe forbids")
            return nil
        }
        return (url, base, position)
    }

    /// The folder's absolute URL; under --safe, only when it stays inside the root once every symbolic
    /// link on the way is followed.
    mutating func folder(_ folder: String, _ path: String) -> URL? {
        let shownPath = shown(path)
        guard let (url, _, position) = locate(folder, path, shownAs: shownPath, outside: "leads outside the root through a symbolic link") else { return nil }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            if !isDirectory.boolValue {
                error(position, "\(shownPath) '\(folder)' is a file, not a folder")
                return nil
            }
            if !FileManager.default.isWritableFile(atPath: url.path) {
                error(position, "\(shownPath) '\(folder)' is not writable by this user")
                return nil
            }
        } else {
            var ancestor = url.deletingLastPathComponent()
            while !FileManager.default.fileExists(atPath: ancestor.path), ancestor.path != "/" { ancestor.deleteLastPathComponent() }
            if !FileManager.default.isWritableFile(atPath: ancestor.path) {
                error(position, "\(shownPath) '\(folder)' does not exist and cannot be made: \(ancestor.path) is not writable")
                return nil
            }
        }
        return url
    }

    /// A file to read (the web page's certificate or key): its absolute URL when it exists, is a file and
    /// this user can read it; under --safe, only inside the root.
    mutating func readableFile(_ file: String, _ path: String) -> URL? {
        guard let (url, base, position) = locate(file, path, shownAs: path, outside: "is outside the root") else { return nil }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            error(position, "\(path) '\(file)' does not exist" + (file.hasPrefix("/") ? "" : " (in \(base.path))"))
            return nil
        }
        if isDirectory.boolValue {
            error(position, "\(path) '\(file)' is a folder, not a file")
            return nil
        }
        if !FileManager.default.isReadableFile(atPath: url.path) {
            error(position, "\(path) '\(file)' cannot be read by this user")
            return nil
        }
        return url
    }
}
