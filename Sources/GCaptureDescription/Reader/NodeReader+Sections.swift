import Yams

extension NodeReader {
    /// A one-camera file's description. A file listing `cameras:` is refused at that key (its entries
    /// are still read, so that their mistakes are said too): taking its first camera alone would leave
    /// the others unwatched without a word.
    mutating func readRoot(_ root: Node) -> CaptureDescription {
        let descriptions = readDescriptions(root)
        if let cameras = keyPositions["cameras"] {
            error(cameras, "this file lists its cameras under `cameras:`, and this program takes one camera (CaptureDescription.load): "
                  + "read it with CaptureDescription.loadCameras, or run it with `gcapture run`")
        }
        return descriptions.first ?? emptyDescription
    }

    /// One description per camera: the file's own for a one-camera file, one per entry of `cameras:`.
    mutating func readDescriptions(_ root: Node) -> [CaptureDescription] {
        var description = emptyDescription
        guard case .mapping = root else {
            error(at(root), "a description is a mapping of keys (version, camera, outputs, ...), not \(describe(root)); see docs/description-files.md")
            return [description]
        }
        guard let top = entries(root, path: "", what: "the description") else { return [description] }
        if let node = top["version"] {
            if let version = integer(node, "version", in: Int.min...Int.max) {
                if version != 1 { error(at(node), "version \(version) is not known: this gcapture reads version 1") }
                description.version = version
            }
        } else {
            error(.start, "the description has no `version: 1` line (the format's version, so later ones can change it)")
        }
        if let node = top["microphone"] { description.microphone = readMicrophone(node) }
        if let node = top["filters"] { description.filters = readFilters(node) }
        if let node = top["web"] { description.web = readWeb(node) }
        if let cameras = top["cameras"] {
            for key in Schema.perCameraKeys where top[key] != nil {
                error(keyPositions[key]!, "\(key) goes in each camera's entry when the file lists `cameras:`: move it into the entries under cameras")
            }
            // Only the shared keys' positions: a misplaced top-level `camera:` is no entry's camera.
            let isShared = { (path: String) in Schema.sharedKeys.contains { path == $0 || path.hasPrefix($0 + ".") } }
            description.valuePositions = valuePositions.filter { isShared($0.key) }
            description.keyPositions = keyPositions.filter { isShared($0.key) }
            return readCameras(cameras, shared: description)
        }
        if let node = top["camera"] { description.camera = readCamera(node) }
        if let node = top["rotation"], let value = quarterTurn(node, "rotation") { description.rotation = value }
        if let node = top["mirror"], let value = bool(node, "mirror") { description.mirrored = value }
        if let node = top["outputs"] {
            description.outputs = readOutputsOfOneCamera(node)
            checkMovieAudio(description.outputs, microphone: description.microphone, microphonePosition: microphonePosition)
        } else {
            error(.start, "the description has no `outputs:` (preview, photo, movie, frames or stream)")
        }
        description.valuePositions = valuePositions
        description.keyPositions = keyPositions
        return [description]
    }

    var emptyDescription: CaptureDescription {
        CaptureDescription(file: file, version: 1, camera: .init(), microphone: .none, rotation: 0, mirrored: false,
                           outputs: .init(), filters: [], valuePositions: [:], keyPositions: [:])
    }

    /// Where `microphone:` is written (its value), when it is.
    var microphonePosition: SourcePosition? {
        keyPositions["microphone"].map { valuePositions["microphone"] ?? $0 }
    }

    /// `outputs:` of a camera, which must name at least one output.
    mutating func readOutputsOfOneCamera(_ node: Node) -> CaptureDescription.Outputs {
        let outputs = readOutputs(node)
        if outputs.isEmpty, case .mapping = node {
            error(at(node), "\(shown("outputs")) has none of preview, photo, movie, frames or stream: the session would capture for nobody")
        }
        return outputs
    }

    /// A movie records the microphone unless told not to: said at `microphone: none` when it is written,
    /// else at the movie.
    mutating func checkMovieAudio(_ outputs: CaptureDescription.Outputs, microphone: CaptureDescription.Microphone,
                                  microphonePosition: SourcePosition?) {
        guard let movie = outputs.movie, movie.audio, microphone == .none else { return }
        let position = valuePositions["outputs.movie.audio"] ?? keyPositions["outputs.movie"] ?? .start
        let movieOutput = shown("outputs.movie")
        if let microphonePosition {
            error(microphonePosition, "microphone is none, but \(movieOutput) records audio: name a microphone (or `default`), or set \(movieOutput).audio: false")
        } else {
            error(position, "\(movieOutput) records audio (audio: true is the default) but there is no microphone: add `microphone: default`, or set audio: false")
        }
    }

    mutating func readCamera(_ node: Node) -> CaptureDescription.Camera {
        var camera = CaptureDescription.Camera()
        if case .scalar = node {
            // `camera: test` is short for `camera: {id: test}`.
            guard let id = text(node, shown("camera")) else { return camera }
            camera.choice = cameraChoice(id, node)
            valuePositions["camera.id"] = at(node)
            return camera
        }
        guard let fields = entries(node, path: "camera", what: shown("camera")) else { return camera }
        if let node = fields["id"], let id = text(node, shown("camera.id")) { camera.choice = cameraChoice(id, node) }
        if let node = fields["source"], let fragment = text(node, shown("camera.source")) {
            if fields["id"] != nil {
                error(keyPositions["camera.source"]!, "\(shown("camera")) has both id and source: a camera is one or the other")
            } else if safe {
                error(keyPositions["camera.source"]!, "\(shown("camera.source")) is a custom GStreamer fragment, which --safe does not allow")
            } else if fragment.trimmingCharacters(in: .whitespaces).isEmpty {
                error(at(node), "\(shown("camera.source")) needs a GStreamer fragment, like `v4l2src device=/dev/video0`")
            } else {
                camera.choice = .source(fragment)
            }
        }
        if let node = fields["position"], let value = choice(node, shown("camera.position"), among: Schema.positions) {
            camera.position = value
            if fields["id"] != nil, case .id = camera.choice {
                warning(keyPositions["camera.position"]!, "\(shown("camera.position")) chooses among cameras for `id: auto`; with an id it changes nothing")
            }
        }
        if let node = fields["preset"], let value = choice(node, shown("camera.preset"), among: Schema.presets) { camera.preset = value }
        if let node = fields["mount"], let value = quarterTurn(node, shown("camera.mount")) { camera.mount = value }
        let isTest = camera.choice == .test
        if let node = fields["pattern"], let value = choice(node, shown("camera.pattern"), among: Schema.patterns) {
            camera.pattern = value
            if !isTest { error(keyPositions["camera.pattern"]!, "\(shown("camera.pattern")) is for the test camera (`id: test`) only") }
        }
        if let node = fields["noise"], let value = integer(node, shown("camera.noise"), in: 0...127, unit: "8-bit steps") {
            camera.noise = value
            if !isTest { error(keyPositions["camera.noise"]!, "\(shown("camera.noise")) is for the test camera (`id: test`) only") }
        }
        return camera
    }

    private func cameraChoice(_ id: String, _ node: Node) -> CaptureDescription.Camera.Choice {
        switch id {
        case "auto": .auto
        case "test": .test
        default: .id(id)
        }
    }

    mutating func readWeb(_ node: Node) -> CaptureDescription.Web {
        var web = CaptureDescription.Web()
        guard let fields = entries(node, path: "web", what: "web") else { return web }
        for (key, path) in [("tls-cert", "web.tls-cert"), ("tls-key", "web.tls-key")] {
            guard let node = fields[key], let value = text(node, path) else { continue }
            if value.isEmpty { error(at(node), "\(path) needs a file's path"); continue }
            if key == "tls-cert" { web.tlsCertificate = value } else { web.tlsKey = value }
        }
        if fields["tls-cert"] != nil, fields["tls-key"] == nil {
            error(keyPositions["web.tls-cert"]!, "web.tls-cert needs web.tls-key: give the certificate's private key too")
        }
        if fields["tls-key"] != nil, fields["tls-cert"] == nil {
            error(keyPositions["web.tls-key"]!, "web.tls-key needs web.tls-cert: give the certificate the key belongs to")
        }
        return web
    }

    mutating func readMicrophone(_ node: Node) -> CaptureDescription.Microphone {
        guard let id = text(node, "microphone") else { return .none }
        switch id {
        case "none": return .none
        case "default": return .default
        case "": error(at(node), "microphone needs an id, `default` or `none`"); return .none
        default: return .id(id)
        }
    }

    mutating func readOutputs(_ node: Node) -> CaptureDescription.Outputs {
        var outputs = CaptureDescription.Outputs()
        guard let fields = entries(node, path: "outputs", what: shown("outputs")) else { return outputs }
        if let node = fields["preview"], enabled(node, shown("outputs.preview")) { outputs.preview = readPreview(node) }
        if let node = fields["photo"], enabled(node, shown("outputs.photo")) { outputs.photo = readPhoto(node) }
        if let node = fields["movie"], enabled(node, shown("outputs.movie")) { outputs.movie = readMovie(node) }
        if let node = fields["frames"], enabled(node, shown("outputs.frames")) { outputs.frames = readFrames(node) }
        if let node = fields["stream"], enabled(node, shown("outputs.stream")) { outputs.stream = readStream(node) }
        if let node = fields["timelapse"], enabled(node, shown("outputs.timelapse")) { outputs.timelapse = readTimelapse(node) }
        if let node = fields["motion"], enabled(node, shown("outputs.motion")) {
            outputs.motion = readMotion(node)
            if outputs.motion?.triggersMovie == true, outputs.movie == nil {
                error(node["triggers"].map(at) ?? at(node), "\(shown("outputs.motion")) triggers the movie output's events, but there is no \(shown("outputs.movie")): add one, or leave out triggers")
            }
        }
        return outputs
    }

    /// `photo: true` (defaults), `photo: false` (off) or a mapping.
    private mutating func enabled(_ node: Node, _ path: String) -> Bool {
        if case .scalar = node {
            if DescriptionReader.isNull(node) {
                error(at(node), "\(path) has no value: write `true` for the defaults, or its keys indented below it")
                return false
            }
            return bool(node, path) ?? false
        }
        return true
    }

    private mutating func readPreview(_ node: Node) -> CaptureDescription.Preview {
        var preview = CaptureDescription.Preview()
        guard case .mapping = node, let fields = entries(node, path: "outputs.preview", what: shown("outputs.preview")) else { return preview }
        if let node = fields["sink"], let value = text(node, shown("outputs.preview.sink")) {
            // Kept even when refused: the machine check then knows the value was reported, and skips it.
            preview.sink = value
            if safe, let refusal = SafePreviewSink.refusal(of: value) { error(at(node), shown("outputs.preview.sink") + refusal) }
        }
        if let node = fields["gravity"], let value = choice(node, shown("outputs.preview.gravity"), among: Schema.gravities) { preview.gravity = value }
        if let node = fields["fullscreen"], let value = bool(node, shown("outputs.preview.fullscreen")) { preview.fullscreen = value }
        if let node = fields["mirror"], let value = choice(node, shown("outputs.preview.mirror"), among: Schema.previewMirroring) { preview.mirror = value }
        return preview
    }

    private mutating func readPhoto(_ node: Node) -> CaptureDescription.Photo {
        var photo = CaptureDescription.Photo()
        guard case .mapping = node, let fields = entries(node, path: "outputs.photo", what: shown("outputs.photo")) else { return photo }
        if let node = fields["quality"], let value = choice(node, shown("outputs.photo.quality"), among: Schema.qualities) { photo.quality = value }
        if let node = fields["zero-shutter-lag"], let value = bool(node, shown("outputs.photo.zero-shutter-lag")) { photo.zeroShutterLag = value }
        if let node = fields["deferred"], let value = bool(node, shown("outputs.photo.deferred")) {
            photo.deferred = value
            if value, !photo.qualityPrioritization.defersDelivery {
                error(at(node), "deferred photos are made only at `quality: quality` (the averaged frames are what is deferred); this output's quality is \(photo.quality)")
            }
        }
        if let node = fields["exif-orientation"], let value = bool(node, shown("outputs.photo.exif-orientation")) { photo.exifOrientation = value }
        if let node = fields["album"], let value = text(node, shown("outputs.photo.album")) {
            if value.trimmingCharacters(in: .whitespaces).isEmpty || value.count > 200
                || value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                error(at(node), "\(shown("outputs.photo.album")) is an album's title: 1 to 200 characters on one line, not \(describe(node))")
            } else {
                photo.album = value
            }
        }
        if let node = fields["folder"], let value = folder(node, shown("outputs.photo.folder")) { photo.folder = value }
        if let node = fields["name"], let value = pattern(node, shown("outputs.photo.name"), extensions: ["jpg", "jpeg"], what: " (photos are JPEG)") {
            photo.name = value
        }
        return photo
    }

    private mutating func readMovie(_ node: Node) -> CaptureDescription.Movie {
        var movie = CaptureDescription.Movie()
        guard case .mapping = node, let fields = entries(node, path: "outputs.movie", what: shown("outputs.movie")) else {
            if safe { movie.maxSize = SafeLimits.defaultMaxSize }
            return movie
        }
        let p = shown("outputs.movie")
        if let node = fields["audio"], let value = bool(node, "\(p).audio") { movie.audio = value }
        if let node = fields["format"], let value = choice(node, "\(p).format", among: Schema.movieFormats) { movie.format = value }
        if let node = fields["fragment-interval"], let value = seconds(node, "\(p).fragment-interval", in: 0.1...60) { movie.fragmentInterval = value }
        // Kept in memory all the time the session runs: a minute at most (at 8 Mbit/s, 60 MB).
        if let node = fields["pre-roll"], let value = seconds(node, "\(p).pre-roll", in: 0...60) { movie.preRoll = value }
        if let node = fields["post-roll"], let value = seconds(node, "\(p).post-roll", in: 0...3600) { movie.postRoll = value }
        if let node = fields["event-gap"], let value = seconds(node, "\(p).event-gap", in: 0...86_400) { movie.eventGap = value }
        if let node = fields["trigger-every"], let value = seconds(node, "\(p).trigger-every", in: 1...86_400) { movie.triggerEvery = value }
        let longest = safe ? SafeLimits.maxDuration : 86_400 * 365
        if let node = fields["max-duration"], let value = seconds(node, "\(p).max-duration", in: 0.1...longest) { movie.maxDuration = value }
        if let node = fields["max-size"], let value = bytes(node, "\(p).max-size", minimum: 1024) {
            if safe, value > SafeLimits.maxSize {
                error(at(node), "\(p).max-size may be at most 4GiB under --safe")
            } else {
                movie.maxSize = value
            }
        } else if safe {
            movie.maxSize = SafeLimits.defaultMaxSize
        }
        if let node = fields["min-free-disk"], let value = bytes(node, "\(p).min-free-disk", minimum: 0) { movie.minFreeDisk = value }
        if let node = fields["encoder"], let value = elementName(node, "\(p).encoder") { movie.encoder = value }
        if let node = fields["bit-rate"], let value = integer(node, "\(p).bit-rate", in: 16...1_000_000, unit: "kbit/s") { movie.bitRate = value }
        if let node = fields["folder"], let value = folder(node, "\(p).folder") { movie.folder = value }
        let extensions = movie.format == "mp4" ? ["mp4", "m4v", "mov"] : ["mkv"]
        if let node = fields["name"], let value = pattern(node, "\(p).name", extensions: extensions, what: " (format: \(movie.format))") {
            movie.name = value
        } else if fields["name"] == nil, movie.format == "matroska" {
            movie.name = try! FileNamePattern(parsing: "movie-{counter}.mkv")
        }
        return movie
    }

    /// One GStreamer element's name (an encoder), nothing that could be a pipeline fragment.
    private mutating func elementName(_ node: Node, _ path: String) -> String? {
        guard let value = text(node, path) else { return nil }
        guard !value.isEmpty, value.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            error(at(node), "\(path) needs one element name (like x264enc), not '\(value)'")
            return nil
        }
        return value
    }

    /// A mapping with at least a url: `stream: true` has nowhere to publish to.
    private mutating func readStream(_ node: Node) -> CaptureDescription.Stream? {
        let p = shown("outputs.stream")
        let missingURL = "\(p) needs a url: rtmp://HOST/APP/KEY, srt://HOST:PORT, rtsp://HOST:PORT/PATH or an HLS playlist's path (.m3u8)"
        guard case .mapping = node else {
            error(at(node), missingURL)
            return nil
        }
        guard let fields = entries(node, path: "outputs.stream", what: p) else { return nil }
        var stream = CaptureDescription.Stream()
        if let urlNode = fields["url"] {
            if let value = text(urlNode, "\(p).url") {
                if value.trimmingCharacters(in: .whitespaces).isEmpty { error(at(urlNode), missingURL) } else { stream.url = value }
            }
        } else {
            error(at(node), missingURL)
        }
        if let node = fields["bit-rate"], let value = integer(node, "\(p).bit-rate", in: 100...100_000, unit: "kbit/s") { stream.bitRate = value }
        if let node = fields["key-interval"], let value = seconds(node, "\(p).key-interval", in: 0.1...60) { stream.keyInterval = value }
        if let node = fields["profile"], let value = choice(node, "\(p).profile", among: Schema.streamProfiles) { stream.profile = value }
        if let node = fields["encoder"], let value = elementName(node, "\(p).encoder") { stream.encoder = value }
        if let node = fields["audio-codec"], let value = choice(node, "\(p).audio-codec", among: Schema.streamAudioCodecs) { stream.audioCodec = value }
        return stream
    }

    private mutating func readFrames(_ node: Node) -> CaptureDescription.Frames {
        var frames = CaptureDescription.Frames()
        guard case .mapping = node, let fields = entries(node, path: "outputs.frames", what: shown("outputs.frames")) else { return frames }
        if let node = fields["format"], let value = choice(node, shown("outputs.frames.format"), among: Schema.rawFormats) { frames.format = value }
        if let node = fields["width"], let value = integer(node, shown("outputs.frames.width"), in: 16...7680, unit: "pixels") { frames.width = value }
        if let node = fields["height"], let value = integer(node, shown("outputs.frames.height"), in: 16...4320, unit: "pixels") { frames.height = value }
        if (frames.width == nil) != (frames.height == nil), fields["width"] != nil || fields["height"] != nil {
            let given = frames.width == nil ? "outputs.frames.height" : "outputs.frames.width"
            if keyPositions[given] != nil, (fields["width"] == nil || fields["height"] == nil) {
                error(keyPositions[given]!, "\(shown("outputs.frames")) needs width and height together")
            }
        }
        if let node = fields["discard-late"], let value = bool(node, shown("outputs.frames.discard-late")) { frames.discardLate = value }
        return frames
    }

    mutating func readFilters(_ node: Node) -> [String] {
        if safe {
            error(keyPositions["filters"] ?? at(node), "filters are custom GStreamer fragments, which --safe does not allow")
            return []
        }
        guard case .sequence(let sequence) = node else {
            if case .scalar = node, !DescriptionReader.isNull(node) {
                error(at(node), "filters is a list: write each fragment on its own line starting with '- '")
            } else {
                error(at(node), "filters needs a list of GStreamer fragments, not \(describe(node))")
            }
            return []
        }
        var filters: [String] = []
        for (index, item) in sequence.enumerated() {
            guard let fragment = text(item, "filters[\(index)]") else { continue }
            if fragment.trimmingCharacters(in: .whitespaces).isEmpty {
                error(at(item), "filters[\(index)] is empty")
                continue
            }
            valuePositions["filters.\(index)"] = at(item)
            filters.append(fragment)
        }
        return filters
    }
}
