import ArgumentParser
import Foundation
import GCapture

/// A movie's path as the command line gives it: its type from its name, and the file already there.
struct MovieDestination {
    let url: URL
    let fileType: CaptureMovieFileOutput.FileType

    static let overwriteHelp: ArgumentHelp = "Replace a movie already at that path (and what a crash of its recording left beside it); without it, an existing file is left alone and the command stops."

    /// What a movie's name must end in, for every place that names one.
    static let namingRule = "a movie's name ends in .mp4 (H.264 and AAC) or .mkv (Matroska: H.264 and Opus)"

    /// A name that is neither .mp4 nor .mkv is a mistake: the movie would not be what its name says.
    init(_ path: String, option: String) throws {
        url = URL(fileURLWithPath: path).standardizedFileURL
        try OutputPath.refuseFolder(url, option: option, what: "movie", example: "clip.mp4")
        guard let fileType = CaptureMovieFileOutput.FileType(fileExtension: url.pathExtension) else {
            throw ValidationError("\(option) \(path): \(Self.namingRule)")
        }
        self.fileType = fileType
    }

    /// Before any device is opened: a file already there is the user's, refused unless `overwrite` says to
    /// replace it.
    func makeRoom(overwrite: Bool, option: String) throws {
        if overwrite {
            try CaptureMovieFileOutput.removeMovie(at: url)
        } else if FileManager.default.fileExists(atPath: url.path) {
            throw ValidationError("\(url.path) already exists: give another \(option), or add --overwrite to replace it")
        }
    }
}

/// Checks the output paths given on the command line share.
enum OutputPath {
    /// A folder is not a file's name: the error names it and gives an example name inside it for a `what`
    /// ("movie", "photo").
    static func refuseFolder(_ url: URL, option: String, what: String, example: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ValidationError("\(option) \(url.path) is a directory: give a \(what)'s path, such as \(url.appendingPathComponent(example).path)")
        }
    }
}
