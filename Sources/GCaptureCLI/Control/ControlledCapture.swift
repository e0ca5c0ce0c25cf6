import Foundation
import GCapture
import GCaptureDescription
import GCaptureWeb

/// A capture set-up `gcapture run` drives: a configured (committed, not yet started) session and the
/// outputs the commands act on. Made in `RunCommand.makeCapture`: from the command line's options, or from
/// a description file; whatever builds one, the controller runs it the same.
struct ControlledCapture: Sendable {
    var session: CaptureSession
    /// Nil when the set-up takes no photos: `photo` and SIGUSR1 then answer so.
    var photoOutput: CapturePhotoOutput?
    /// Nil when the set-up records no movies: `record` answers so.
    var movieOutput: CaptureMovieFileOutput?
    /// A description's stream: published from the start of the run to its end, its states reported.
    var streamOutput: CaptureStreamOutput?
    var streamLocation: String?
    /// What may change while it runs (a `rotate`, a reload).
    var settings: ControlledCaptureSettings
    /// Said in the started event: the devices in use, and why a test device stands in when one does.
    var camera: String
    var microphone: String?
    var notices: [String] = []
    /// A description's certificate for the web page (`web.tls-cert`/`web.tls-key`), read and checked;
    /// --tls-cert/--tls-key take precedence.
    var webTLS: WebTLSIdentity?
    /// Where the paths commands name go (under --safe: inside the root).
    var paths = CommandPaths()
}

/// The part of a set-up that changes on the live session, without stopping it: `CaptureController.apply`
/// compares two of these and applies only what differs.
struct ControlledCaptureSettings: Sendable, Equatable {
    /// Degrees clockwise to turn photos and movies upright: 0, 90, 180 or 270.
    var rotation = 0
    var mirrored = false
    var photoQuality: CapturePhotoOutput.QualityPrioritization = .balanced
    /// Photos keep their pixels as the camera gives them and say how to turn them in EXIF.
    var photoEXIFOrientation = false
    var photoFolder: URL
    var movieFolder: URL
    /// How files are named when a command gives no path (the description files' rule: {counter}, {date}).
    var photoNaming = defaultPhotoNaming
    var movieNaming = defaultMovieNaming

    // Literal patterns, checked by the tests.
    static let defaultPhotoNaming = try! FileNamePattern(parsing: "photo-{date}-{counter}.jpg")
    static let defaultMovieNaming = try! FileNamePattern(parsing: "movie-{date}-{counter}.mp4")

    /// The names of the fields that differ, in a stable order, for the reload event.
    func changes(to other: ControlledCaptureSettings) -> [String] {
        var changed: [String] = []
        if rotation != other.rotation { changed.append("rotation") }
        if mirrored != other.mirrored { changed.append("mirrored") }
        if photoQuality != other.photoQuality { changed.append("photoQuality") }
        if photoEXIFOrientation != other.photoEXIFOrientation { changed.append("photoEXIFOrientation") }
        if photoFolder != other.photoFolder { changed.append("photoFolder") }
        if movieFolder != other.movieFolder { changed.append("movieFolder") }
        if photoNaming != other.photoNaming { changed.append("photoNaming") }
        if movieNaming != other.movieNaming { changed.append("movieNaming") }
        return changed
    }
}

extension ControlledCapture {
    /// The `started` event: the devices, and the folders of the outputs there are only (a recorder has no
    /// photos to put anywhere, and said where they went).
    func startedEvent(camera: String, settings: ControlledCaptureSettings) -> (fields: ControlFields, text: String) {
        var fields: ControlFields = ["camera": camera, "microphone": microphone ?? "none", "rotation": settings.rotation,
                                     "photos": photoOutput != nil, "movies": movieOutput != nil, "testDevice": !notices.isEmpty]
        if !notices.isEmpty { fields["notice"] = notices.joined(separator: "; ") }
        var destinations: [String] = []
        if photoOutput != nil {
            fields["photoFolder"] = settings.photoFolder.path
            destinations.append("photos go to \(settings.photoFolder.path)")
        }
        if movieOutput != nil {
            fields["movieFolder"] = settings.movieFolder.path
            destinations.append("movies go to \(settings.movieFolder.path)")
        }
        return (fields, "running with \(camera)" + (microphone.map { " and \($0)" } ?? "") + destinations.map { "; " + $0 }.joined())
    }
}

/// What a reload read: the settings to apply live, and the changes left as they were because they need a
/// new run (an output added, the microphone changed), which the reloaded event names: without them an
/// added movie output was "nothing changed".
struct ReloadedSetUp: Sendable {
    var settings: ControlledCaptureSettings
    var needsNewRun: [String] = []

    func eventFields(changed: [String]) -> ControlFields {
        var fields: ControlFields = ["changed": changed]
        if !needsNewRun.isEmpty { fields["needsNewRun"] = needsNewRun }
        return fields
    }

    func eventText(changed: [String]) -> String {
        "reloaded: " + (changed.isEmpty ? "nothing changed" : "changed " + changed.joined(separator: ", "))
            + (needsNewRun.isEmpty ? "" : "; \(needsNewRun.joined(separator: ", ")) changed, which needs a new run: left as it was")
    }
}
