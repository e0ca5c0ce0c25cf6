import ArgumentParser
import Foundation
import GCapture
import GCaptureDescription

struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Check a description file (YAML) and show the graph it would build, without starting it.",
        discussion: """
        Every mistake is reported at once, as FILE:LINE:COLUMN: error: ..., and the exit status is 1; a key \
        for a feature this engine does not have yet is a warning. A valid file prints the devices it would \
        open, where its files would go, and its graph in gst-launch syntax (built, no device opened). \
        A file listing several cameras (`cameras:`) has each camera checked and shown, its name first; \
        --dot then writes one graph per camera, the camera's name added to the file's (kiosk-door.dot). \
        The format: docs/description-files.md.

        Examples:
          gcapture inspect pipelines/photobooth.yaml
          gcapture inspect kiosk.yaml --dot kiosk.dot    (dot -Tpng kiosk.dot draws it)
          gcapture inspect upload.yaml --safe --root /srv/captures
        """)

    @OptionGroup var logging: LoggingOptions

    @Argument(help: "The description file.")
    var file: String

    @Option(help: "Also write the graph in Graphviz dot form to this file.")
    var dot: String?

    @Flag(help: "For descriptions from untrusted hands: no custom GStreamer fragments, a display sink for the preview, output folders inside --root, bounded sizes.")
    var safe = false

    @Option(help: "With --safe: the folder every output must stay inside (output folders are relative to it).")
    var root: String?

    func validate() throws {
        if safe, root == nil { throw ValidationError("--safe needs --root DIR: the folder outputs must stay inside") }
        if !safe, root != nil { throw ValidationError("--root applies with --safe") }
    }

    func run() throws {
        let cameras = try DescriptionCommandSupport.openCameras(file, safe: safe, root: root)
        let version = cameras[0].description.version
        guard cameras.count > 1 || cameras[0].description.cameraName != nil else {
            print((["\(file): valid (version \(version))"] + Self.lines(describing: cameras[0])).joined(separator: "\n"))
            if let dot { try Self.writeGraph(of: cameras[0], to: dot) }
            return
        }
        var lines = ["\(file): valid (version \(version)), \(cameras.count) cameras"]
        for described in cameras {
            lines.append("name: \(described.description.cameraName ?? "")")
            lines += Self.lines(describing: described)
        }
        print(lines.joined(separator: "\n"))
        if let dot {
            for described in cameras {
                try Self.writeGraph(of: described, to: Self.dotFile(dot, camera: described.description.cameraName ?? ""))
            }
        }
    }

    /// kiosk.dot for the camera door: kiosk-door.dot.
    private static func dotFile(_ path: String, camera: String) -> String {
        let url = URL(fileURLWithPath: path)
        let named = OutputPath.fileName(url.lastPathComponent, forCamera: camera)
        return path.contains("/") ? url.deletingLastPathComponent().appendingPathComponent(named).path : named
    }

    /// One camera's devices, files and graph.
    private static func lines(describing described: DescribedSession) -> [String] {
        let d = described.description
        var lines: [String] = []
        let camera = described.cameraInput.device
        let turned = described.effectiveRotation
        lines.append("camera: \(camera.description), preset \(d.camera.preset)"
                     + (d.camera.mount != 0 ? ", mounted at \(d.camera.mount)°" : ""))
        lines.append("microphone: " + (described.microphoneInput.map { $0.device.description } ?? "none"))
        lines.append("photos, movies and frames: turned \(turned)° clockwise" + (d.mirrored ? ", mirrored" : ""))
        if let photo = d.outputs.photo, let files = described.photoFiles {
            lines.append("photo: \(files.folder.appendingPathComponent(photo.name.text).path) — quality \(photo.quality)"
                         + (photo.zeroShutterLag ? ", zero shutter lag" : "") + (photo.deferred ? ", deferred" : "")
                         + (photo.exifOrientation ? ", EXIF orientation" : "") + (photo.album.map { ", album '\($0)'" } ?? ""))
        }
        if let movie = d.outputs.movie, let files = described.movieFiles, let output = described.movieOutput {
            var limits: [String] = []
            if let duration = movie.maxDuration { limits.append("at most \(duration) s") }
            if let size = movie.maxSize { limits.append("at most \(size) bytes") }
            lines.append("movie: \(files.folder.appendingPathComponent(movie.name.text).path) — \(movie.format)"
                         + (described.microphoneInput != nil ? " with audio" : " without audio")
                         + ", fragments of \(output.movieFragmentInterval) s" + (limits.isEmpty ? "" : ", " + limits.joined(separator: ", ")))
        }
        if let frames = d.outputs.frames {
            let size = frames.width.map { "\($0)x\(frames.height ?? 0)" }
            lines.append("frames: " + ([frames.format, size].compactMap { $0 }.joined(separator: " ").nonEmpty ?? "as the camera gives them")
                         + (frames.discardLate ? ", late frames discarded" : ""))
        }
        lines.append("graph (gst-launch syntax):")
        let graph = described.launchDescription ?? "(not built)"
        lines += graph.split(separator: "\n").map { "  \($0)" }
        if described.movieOutput != nil {
            lines.append("  (a recording adds the movie branch to video-tee" + (described.microphoneInput != nil ? " and audio-tee)" : ")"))
        }
        return lines
    }

    private static func writeGraph(of described: DescribedSession, to dot: String) throws {
        guard let graph = described.dotDescription else { throw CommandFailure("the graph could not be built, so there is no dot picture") }
        try write(graph, to: dot)
    }

    /// With the system's reason when it fails (Foundation's was "NSCocoaErrorDomain error 512" for a folder).
    private static func write(_ graph: String, to path: String) throws {
        func failure(_ reason: String) -> CommandFailure { CommandFailure("cannot write the graph into \(path): \(reason)") }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            throw failure("it is a folder; give a file's name, such as \(URL(fileURLWithPath: path).appendingPathComponent("graph.dot").path)")
        }
        guard let file = fopen(path, "w") else { throw failure(String(cString: strerror(errno))) }
        let written = fputs(graph, file) >= 0
        let reason = String(cString: strerror(errno))
        guard fclose(file) == 0, written else { throw failure(written ? String(cString: strerror(errno)) : reason) }
    }
}

/// Reading a description for the commands that take one: diagnostics on stderr in compiler form, and
/// exit status 1 when there is an error.
enum DescriptionCommandSupport {
    static func options(safe: Bool, root: String?) -> DescriptionOptions {
        DescriptionOptions(safe: safe, root: root.map { URL(fileURLWithPath: $0) }, fallsBackToTestDevices: true)
    }

    static func open(_ file: String, safe: Bool, root: String?) throws -> DescribedSession {
        try build(load(file, safe: safe, root: root) { url, options throws(DescriptionError) in try CaptureDescription.load(contentsOf: url, file: file, options: options) }, file: file)
    }

    /// Every camera of the description (one for a file of one camera), each its session built.
    static func openCameras(_ file: String, safe: Bool, root: String?) throws -> [DescribedSession] {
        let cameras = try load(file, safe: safe, root: root) { url, options throws(DescriptionError) in
            try CaptureDescription.loadCameras(contentsOf: url, file: file, options: options)
        }
        // The shared microphone's notice and the shared keys' warnings are each camera's: said once.
        var said = Set<String>()
        return try cameras.map { checked in try build(checked, file: file) { said.insert($0).inserted } }
    }

    /// Reads and checks the file; its errors and warnings on stderr with their positions, exit status 1.
    private static func load<Loaded>(_ file: String, safe: Bool, root: String?,
                                     _ read: (URL, DescriptionOptions) throws(DescriptionError) -> Loaded) throws -> Loaded {
        do {
            return try read(URL(fileURLWithPath: file), options(safe: safe, root: root))
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            throw ExitCode(1)
        }
    }

    private static func build(_ checked: CheckedDescription, file: String, unsaid: (String) -> Bool = { _ in true }) throws -> DescribedSession {
        let lines = checked.warnings.map { "\($0)" } + (checked.notices + [checked.waitingNotice].compactMap { $0 }).map { "gcapture: \($0)" }
        for line in lines where unsaid(line) { FileHandle.standardError.write(Data("\(line)\n".utf8)) }
        let camera = checked.description.cameraName.map { " (camera \($0))" } ?? ""
        do {
            return try DescribedSession(checked)
        } catch {
            throw CommandFailure("\(file)\(camera): the session cannot be built: \(error)")
        }
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
