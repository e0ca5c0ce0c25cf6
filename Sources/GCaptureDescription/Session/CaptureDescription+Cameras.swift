import Foundation
import GCapture

extension CaptureDescription {
    /// Reads and checks a description file that may list several cameras (`cameras:`): one checked
    /// description per camera, in file order; a one-camera file gives one. Each is a whole one-camera
    /// description (its entry's camera, rotation, mirror and outputs; the file's microphone, filters and
    /// web) that `DescribedSession` builds unchanged. Throws every error of every camera at once.
    public static func loadCameras(contentsOf url: URL, file: String? = nil,
                                   options: DescriptionOptions = .init()) throws(DescriptionError) -> [CheckedDescription] {
        let (name, data, options) = try open(url, file: file, options: options)
        return try checkCameras(DescriptionReader.readCameras(data, file: name, safe: options.safe), options: options)
    }

    /// Checks each camera against this machine, and the cameras against each other: no camera opened
    /// twice, no two writing the same names into one folder.
    public static func checkCameras(_ reading: DescriptionReader.Cameras,
                                    options: DescriptionOptions) throws(DescriptionError) -> [CheckedDescription] {
        guard let first = reading.descriptions.first else { throw DescriptionError(reading.errors) }
        if options.safe, options.root == nil {
            throw DescriptionError([DescriptionDiagnostic(file: first.file, position: .start,
                                                          message: "--safe needs a root folder for the outputs to stay inside")])
        }
        var checkers: [MachineCheck] = []
        var found: [MachineCheck.Found?] = []
        for description in reading.descriptions {
            var checker = MachineCheck(description: description, options: options, earlier: reading.diagnostics)
            found.append(checker.run())
            checkers.append(checker)
        }
        let clashes = CameraClashes(descriptions: reading.descriptions, found: found).diagnostics
        // The shared keys are checked with each camera: the same finding is then said once.
        let errors = (reading.diagnostics + checkers.flatMap(\.diagnostics) + clashes).ordered().filter { $0.severity == .error }
        let devices = found.compactMap { $0 }
        guard errors.isEmpty, devices.count == found.count else { throw DescriptionError(errors) }
        return reading.descriptions.indices.map { index in
            let warnings = reading.warningsByCamera[index] + checkers[index].diagnostics.filter { $0.severity == .warning }
            return checked(reading.descriptions[index], found: devices[index], warnings: warnings.ordered(), notices: checkers[index].notices)
        }
    }
}

/// What the cameras of one file must not share, found once the machine is known: the device each opens
/// (`/dev/video0` and its stable id are one camera) and the folders their files go to.
struct CameraClashes {
    var diagnostics: [DescriptionDiagnostic] = []

    init(descriptions: [CaptureDescription], found: [MachineCheck.Found?]) {
        for index in descriptions.indices {
            for earlier in 0..<index {
                checkDevices(descriptions[index], found[index], against: descriptions[earlier], found[earlier], earlier)
                checkFiles(descriptions[index], found[index], against: descriptions[earlier], found[earlier])
            }
        }
    }

    private mutating func error(_ description: CaptureDescription, _ position: SourcePosition, _ message: String) {
        diagnostics.append(DescriptionDiagnostic(file: description.file, position: position, message: message))
    }

    /// Two ids for one device; the same id twice the reader has said already. The test cameras are made
    /// for each entry, and `auto` with no camera present waits: neither is a device opened twice.
    private mutating func checkDevices(_ description: CaptureDescription, _ found: MachineCheck.Found?,
                                       against other: CaptureDescription, _ otherFound: MachineCheck.Found?, _ otherIndex: Int) {
        guard let camera = found?.camera, let otherCamera = otherFound?.camera, description.camera.choice != other.camera.choice,
              !camera.deviceType.isTest, !camera.isFirstAvailableCamera, camera.uniqueID == otherCamera.uniqueID else { return }
        let position = description.valuePositions["camera.id"] ?? description.keyPosition(of: "camera")
        error(description, position, "\(description.pathScope)camera opens \(camera.localizedName) ('\(camera.uniqueID)'), as cameras[\(otherIndex)].camera does: "
              + "a camera is opened by one entry only; name another (`gcapture devices`)")
    }

    /// Two cameras naming their files alike in one folder would number them as one series, each taking
    /// the other's next number.
    private mutating func checkFiles(_ description: CaptureDescription, _ found: MachineCheck.Found?,
                                     against other: CaptureDescription, _ otherFound: MachineCheck.Found?) {
        let files = Self.files(description, found), otherFiles = Self.files(other, otherFound)
        for file in files {
            guard let clash = otherFiles.first(where: { $0.folder == file.folder && $0.shape == file.shape }) else { continue }
            let position = description.valuePositions["\(file.output).name"] ?? description.valuePositions["\(file.output).folder"]
                ?? description.keyPosition(of: file.output)
            let name = description.cameraName.map { " (with '\($0)' in it, say)" } ?? ""
            error(description, position, "\(description.pathScope)\(file.output) names its files '\(file.pattern)' in \(file.folder), "
                  + "as \(other.pathScope)\(clash.output) does: the two cameras would overwrite each other's numbering; "
                  + "give it a folder or a name of its own\(name)")
        }
    }

    private struct Files {
        var output: String
        var folder: String
        var pattern: String
        /// The pattern without its counter's digits and date's format: names that differ only there are
        /// still numbered as one series.
        var shape: String
    }

    private static func files(_ description: CaptureDescription, _ found: MachineCheck.Found?) -> [Files] {
        guard let found else { return [] }
        let outputs = description.outputs
        let named: [(String, URL?, FileNamePattern?)] = [
            ("outputs.photo", found.photoFolder, outputs.photo?.name),
            ("outputs.movie", found.movieFolder, outputs.movie?.name),
            ("outputs.timelapse", found.timelapseFolder, outputs.timelapse?.name),
        ]
        return named.compactMap { output, folder, pattern in
            guard let folder, let pattern else { return nil }
            let shape = pattern.parts.map { part in
                switch part {
                case .text(let text): text
                case .counter: "{counter}"
                case .date: "{date}"
                }
            }.joined()
            return Files(output: output, folder: folder.resolvingSymlinksInPath().standardizedFileURL.path,
                         pattern: pattern.text, shape: shape)
        }
    }
}
