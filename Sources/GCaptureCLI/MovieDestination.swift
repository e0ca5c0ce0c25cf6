import ArgumentParser
import Foundation
import GCapture
import GCaptureControl
import GCaptureDescription

/// A movie's path as the command line gives it: its type from its name, and the file already there.
struct MovieDestination {
    let url: URL
    let fileType: CaptureMovieFileOutput.FileType

    static let overwriteHelp: ArgumentHelp = "Replace a movie already at that path (and what a crash of its recording left beside it); without it, an existing file is left alone and the command stops."

    /// What a movie's name must end in, for every place that names one.
    static let namingRule = NamingRules.movie

    /// A name that is neither .mp4 nor .mkv is a mistake: the movie would not be what its name says.
    init(_ path: String, option: String) throws {
        url = URL(fileURLWithPath: path).standardizedFileURL
        try OutputPath.refuseFolder(url, option: option, what: "movie", example: "clip.mp4")
        guard let fileType = CaptureMovieFileOutput.FileType(fileExtension: url.pathExtension) else {
            throw ValidationError("\(option) \(path): \(Self.namingRule)")
        }
        self.fileType = fileType
    }

    /// The movie of one of several cameras: the camera's name before the extension (clip-video0.mp4).
    func forCamera(_ camera: CaptureDevice) -> MovieDestination {
        MovieDestination(url: OutputPath.forCamera(url, camera), fileType: fileType)
    }

    private init(url: URL, fileType: CaptureMovieFileOutput.FileType) {
        self.url = url
        self.fileType = fileType
    }

    /// Before any device is opened: a file already there is refused unless `overwrite` says to replace it
    /// (with what a crash of its recording left beside it).
    func makeRoom(overwrite: Bool, option: String) throws {
        try OutputPath.makeRoom(for: url, overwrite: overwrite, option: option) { try CaptureMovieFileOutput.removeMovie(at: $0) }
    }
}

/// Checks the output paths given on the command line share.
enum OutputPath {
    /// What a photo's name ends in, for every place that names one.
    static let photoNamingRule = NamingRules.photo

    /// The file of one of several cameras: `name` with the camera's short name before the extension, its node's
    /// (video0) or else its id's letters and digits (clip.jpg becomes clip-video0.jpg).
    static func forCamera(_ url: URL, _ camera: CaptureDevice) -> URL {
        url.deletingLastPathComponent().appendingPathComponent(fileName(url.lastPathComponent, forCamera: cameraLabel(camera)))
    }

    /// The one rule for naming one camera's file among several: its label before the extension (clip.mp4 and
    /// video0 give clip-video0.mp4; a naming pattern's text and a graph's file name alike).
    static func fileName(_ name: String, forCamera label: String) -> String {
        let fileExtension = URL(fileURLWithPath: name).pathExtension
        let stem = fileExtension.isEmpty ? name : String(name.dropLast(fileExtension.count + 1))
        return "\(stem)-\(label)" + (fileExtension.isEmpty ? "" : ".\(fileExtension)")
    }

    /// A camera's short name in file names and commands: its node's (video0), else its id's letters and digits.
    static func cameraLabel(_ camera: CaptureDevice) -> String {
        camera.nodePath.map { URL(fileURLWithPath: $0).lastPathComponent }
            ?? String(camera.uniqueID.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "-" })
    }

    /// A folder is not a file's name: the error names it and gives an example name inside it for a `what`
    /// ("movie", "photo").
    static func refuseFolder(_ url: URL, option: String, what: String, example: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ValidationError("\(option) \(url.path) is a directory: give a \(what)'s path, such as \(url.appendingPathComponent(example).path)")
        }
    }

    /// Before any device is opened: a file already at `url` is the user's, refused (exit status 64) unless
    /// `overwrite` says to replace it; then `remove` clears the way (the library never replaces a file).
    static func makeRoom(for url: URL, overwrite: Bool, option: String, remove: (URL) throws -> Void) throws {
        if overwrite {
            try remove(url)
        } else if FileManager.default.fileExists(atPath: url.path) {
            throw ValidationError("\(url.path) already exists: give another \(option), or add --overwrite to replace it")
        }
    }
}

extension FileNamePattern {
    /// The rule for one of several cameras sharing a folder: the camera's name before the extension
    /// (photo-{date}-{counter}.jpg becomes photo-{date}-{counter}-video1.jpg), so neither numbers over the other.
    func forCamera(_ name: String) throws -> FileNamePattern {
        try FileNamePattern(parsing: OutputPath.fileName(text, forCamera: name))
    }
}
