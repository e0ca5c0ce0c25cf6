import Yams

extension NodeReader {
    /// `cameras:`: one description per entry, in file order. Each is a whole one-camera description: the
    /// shared keys of `shared`, its entry's camera, rotation, mirror and outputs, and its entry's positions
    /// keyed as a one-camera file's are ("outputs.photo.folder"), so that the machine check and a reload
    /// find them unchanged. Each entry is read by a reader of its own, whose findings are also kept apart
    /// (`entryDiagnostics`) so that a camera's warnings are its own.
    mutating func readCameras(_ node: Node, shared: CaptureDescription) -> [CaptureDescription] {
        let listHint = "write each camera as '- name: ...' with its camera and outputs indented below it"
        guard case .sequence(let items) = node else {
            if DescriptionReader.isNull(node) {
                error(keyPositions["cameras"] ?? at(node), "cameras has no entries: \(listHint)")
            } else {
                error(at(node), "cameras is a list, not \(describe(node)): \(listHint)")
            }
            return []
        }
        if items.isEmpty { error(at(node), "cameras is empty: \(listHint)") }
        if items.count > Schema.maxCameras {
            error(at(items[Schema.maxCameras]), "cameras has \(items.count) entries; gcapture runs at most \(Schema.maxCameras) cameras at once: "
                  + "leave out \(items.count - Schema.maxCameras), or run them from another description")
        }
        var descriptions: [CaptureDescription] = []
        for (index, item) in items.enumerated() {
            var entryReader = NodeReader(file: file, safe: safe, scope: "cameras[\(index)].")
            descriptions.append(entryReader.readCameraEntry(item, shared: shared, microphonePosition: microphonePosition))
            diagnostics += entryReader.diagnostics
            entryDiagnostics.append(entryReader.diagnostics)
        }
        checkNamesAndCamerasDiffer(descriptions)
        return descriptions
    }

    /// An entry: name, camera, outputs, and optionally rotation and mirror.
    private mutating func readCameraEntry(_ node: Node, shared: CaptureDescription, microphonePosition: SourcePosition?) -> CaptureDescription {
        var description = shared
        let entry = shown("")
        // Shared keys are allowed here only to say where they go, rather than "unknown key".
        guard let fields = entries(node, path: "", what: entry, allowed: Schema.cameraEntryKeys + Schema.sharedKeys) else { return description }
        for key in Schema.sharedKeys where fields[key] != nil {
            error(keyPositions[key]!, "\(key) is shared by all the cameras: write it once at the top level, not in \(entry)")
        }
        if let node = fields["name"] {
            description.cameraName = cameraName(node)
        } else {
            error(at(node), "\(entry) has no name: give each camera one (letters, digits, - and _), as its events and files are named")
        }
        if let node = fields["camera"] {
            description.camera = readCamera(node)
        } else {
            error(at(node), "\(entry) has no camera: name it (`camera: {id: ...}`, an id from `gcapture devices`, or test)")
        }
        if let node = fields["rotation"], let value = quarterTurn(node, shown("rotation")) { description.rotation = value }
        if let node = fields["mirror"], let value = bool(node, shown("mirror")) { description.mirrored = value }
        if let node = fields["outputs"] {
            description.outputs = readOutputsOfOneCamera(node)
            checkMovieAudio(description.outputs, microphone: shared.microphone, microphonePosition: microphonePosition)
        } else {
            error(at(node), "\(entry) has no outputs: give it at least one of preview, photo, movie, frames or stream")
        }
        description.valuePositions = shared.valuePositions.merging(valuePositions) { _, entry in entry }
        description.keyPositions = shared.keyPositions.merging(keyPositions) { _, entry in entry }
        description.pathScope = scope
        return description
    }

    /// Letters, digits, - and _: it goes into events and file names as it is.
    private mutating func cameraName(_ node: Node) -> String? {
        guard let name = text(node, shown("name")) else { return nil }
        let allowed = !name.isEmpty && name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_")
        }
        guard allowed, name.count <= SafeLimits.nameLength else {
            error(at(node), "\(shown("name")) must be 1 to \(SafeLimits.nameLength) letters, digits, - and _ (it goes into events and file names), not \(describe(node))")
            return nil
        }
        return name
    }

    /// Two entries with one name could not be told apart in events; two with one camera would open it
    /// twice. Said at the second.
    private mutating func checkNamesAndCamerasDiffer(_ descriptions: [CaptureDescription]) {
        for (index, description) in descriptions.enumerated() {
            let earlier = descriptions[..<index]
            let here = "cameras[\(index)]"
            if let name = description.cameraName,
               let first = earlier.firstIndex(where: { $0.cameraName == name }) {
                error(description.position(of: "name"), "\(here).name '\(name)' is also cameras[\(first)]'s name: give each camera a name of its own")
            }
            // An entry without `camera:` is said to have none, not to clash through its default.
            guard description.keyPositions["camera"] != nil,
                  let first = earlier.firstIndex(where: { $0.keyPositions["camera"] != nil && Self.sameCamera($0.camera, description.camera) })
            else { continue }
            let position = description.valuePositions["camera.id"] ?? description.keyPosition(of: "camera")
            switch description.camera.choice {
            case .auto:
                error(position, "\(here).camera is auto, as cameras[\(first)].camera is: both would take the same first camera; "
                      + "name each camera by its id (`gcapture devices`)")
            case .test:
                error(description.valuePositions["camera.pattern"] ?? position,
                      "\(here).camera is the same test camera as cameras[\(first)].camera (the same pattern and noise): give it another pattern")
            case .id(let id):
                error(position, "\(here).camera.id '\(id)' is also cameras[\(first)]'s camera, and a camera is opened by one entry only: "
                      + "name another (`gcapture devices`)")
            case .source:
                break
            }
        }
    }

    /// Test cameras differ by their look (each is made from it); any other camera is the one its id names.
    private static func sameCamera(_ a: CaptureDescription.Camera, _ b: CaptureDescription.Camera) -> Bool {
        switch (a.choice, b.choice) {
        case (.test, .test): a.pattern == b.pattern && a.noise == b.noise
        case (.source, _), (_, .source): false
        default: a.choice == b.choice
        }
    }
}
