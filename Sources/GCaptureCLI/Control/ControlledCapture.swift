import Foundation
import GCapture

/// A capture set-up `gcapture run` drives: a configured (committed, not yet started) session and the
/// outputs the commands act on. Made in `RunCommand.makeCapture`: from the command line's options, or from
/// a description file; whatever builds one, the controller runs it the same.
struct ControlledCapture: Sendable {
    var session: CaptureSession
    /// Nil when the set-up takes no photos: `photo` and SIGUSR1 then answer so.
    var photoOutput: CapturePhotoOutput?
    /// Nil when the set-up records no movies: `record` answers so.
    var movieOutput: CaptureMovieFileOutput?
    /// What may change while it runs (a `rotate`, a reload).
    var settings: ControlledCaptureSettings
    /// Said in the started event: the devices in use, and why a test device stands in when one does.
    var camera: String
    var microphone: String?
    var notices: [String] = []
}

/// The part of a set-up that changes on the live session, without stopping it: `CaptureController.apply`
/// compares two of these and applies only what differs.
struct ControlledCaptureSettings: Sendable, Equatable {
    /// Degrees clockwise to turn photos and movies upright: 0, 90, 180 or 270.
    var rotation = 0
    var mirrored = false
    var photoQuality: CapturePhotoOutput.QualityPrioritization = .balanced
    var photoFolder: URL
    var movieFolder: URL
    var photoNaming = FileNaming(pattern: "photo-{date}-{counter}.jpg")
    var movieNaming = FileNaming(pattern: "movie-{date}-{counter}.mp4")

    /// The names of the fields that differ, in a stable order, for the reload event.
    func changes(to other: ControlledCaptureSettings) -> [String] {
        var changed: [String] = []
        if rotation != other.rotation { changed.append("rotation") }
        if mirrored != other.mirrored { changed.append("mirrored") }
        if photoQuality != other.photoQuality { changed.append("photoQuality") }
        if photoFolder != other.photoFolder { changed.append("photoFolder") }
        if movieFolder != other.movieFolder { changed.append("movieFolder") }
        if photoNaming != other.photoNaming { changed.append("photoNaming") }
        if movieNaming != other.movieNaming { changed.append("movieNaming") }
        return changed
    }
}

/// How files are named when a command gives no path: a pattern with `{counter}` (the next free number,
/// zero-padded) and `{date}` (the local time, `dateFormat`), e.g. "photo-{date}-{counter}.jpg".
struct FileNaming: Sendable, Equatable {
    var pattern: String
    var counterDigits = 4
    var dateFormat = "yyyyMMdd-HHmmss"

    /// Why the pattern cannot name files in a folder, or nil.
    var problem: String? {
        if pattern.isEmpty { return "is empty" }
        if pattern.contains("/") { return "must be a file name, without /" }
        if pattern.replacingOccurrences(of: "{counter}", with: "").replacingOccurrences(of: "{date}", with: "").isEmpty,
           !pattern.contains("{counter}") {
            return "has no room for a counter"
        }
        return nil
    }

    /// The name for `counter` at `date`. Without {counter} in the pattern, numbers after the first are
    /// put before the extension ("shot-2.jpg"), so that two files never get one name.
    func name(counter: Int, date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = dateFormat
        let number = String(counter)
        let padded = String(repeating: "0", count: max(0, counterDigits - number.count)) + number
        var name = pattern.replacingOccurrences(of: "{date}", with: formatter.string(from: date))
        if name.contains("{counter}") { return name.replacingOccurrences(of: "{counter}", with: padded) }
        guard counter > 1 else { return name }
        let dot = name.lastIndex(of: ".") ?? name.endIndex
        name.insert(contentsOf: "-\(counter)", at: dot)
        return name
    }
}

/// Hands out the next free name of a naming rule: never one of a file already there, never one given
/// earlier in this run (a photo still being encoded has no file yet).
struct FileNamer: Sendable {
    private var counters: [String: Int] = [:]
    private var given: Set<String> = []

    mutating func next(_ naming: FileNaming, in folder: URL, date: Date = Date()) -> URL {
        let key = folder.path + "/" + naming.pattern
        var counter = counters[key] ?? 1
        while true {
            let url = folder.appendingPathComponent(naming.name(counter: counter, date: date))
            counter += 1
            if !given.contains(url.path), !FileManager.default.fileExists(atPath: url.path) {
                counters[key] = counter
                // Names whose file exists are guarded by that file: only those still being written stay,
                // so a kiosk's thousands of photos do not pile up here.
                if given.count >= 64 { given = given.filter { !FileManager.default.fileExists(atPath: $0) } }
                given.insert(url.path)
                return url
            }
        }
    }
}
