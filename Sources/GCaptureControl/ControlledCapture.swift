import Foundation
import GCapture
import GCaptureDescription

/// A capture set-up `gcapture run` drives: a configured (committed, not yet started) session and the
/// outputs the commands act on. Made by the program (the CLI's `RunCommand.makeCapture`): from the command
/// line's options, or from a description file; whatever builds one, the controller runs it the same.
public struct ControlledCapture: Sendable {
    public var session: CaptureSession
    /// Nil when the set-up takes no photos: `photo` and SIGUSR1 then answer so.
    public var photoOutput: CapturePhotoOutput?
    /// Nil when the set-up records no movies: `record` answers so.
    public var movieOutput: CaptureMovieFileOutput?
    /// A description's stream: published from the start of the run to its end, its states reported.
    public var streamOutput: CaptureStreamOutput?
    public var streamLocation: String?
    /// What may change while it runs (a `rotate`, a reload).
    public var settings: ControlledCaptureSettings
    /// Said in the started event: the devices in use, and why a test device stands in when one does.
    public var camera: String
    public var microphone: String?
    public var notices: [String]
    /// Where the paths commands name go (under --safe: inside the root).
    public var paths: CommandPaths
    /// Motion detection: its motionBegan/motionEnded events, and, with `motionTriggersEvents`, the movie
    /// output's event clips (as `trigger`, held while the motion goes on).
    public var motionOutput: CaptureMotionOutput?
    public var motionTriggersEvents = false
    /// A description's timelapse: its files told as recordingStarted/recordingFinished with `timelapse: true`.
    public var timelapse: DescribedTimelapse?

    public init(session: CaptureSession, photoOutput: CapturePhotoOutput? = nil, movieOutput: CaptureMovieFileOutput? = nil,
                streamOutput: CaptureStreamOutput? = nil, streamLocation: String? = nil, settings: ControlledCaptureSettings,
                camera: String, microphone: String? = nil, notices: [String] = [], paths: CommandPaths = CommandPaths()) {
        self.session = session
        self.photoOutput = photoOutput
        self.movieOutput = movieOutput
        self.streamOutput = streamOutput
        self.streamLocation = streamLocation
        self.settings = settings
        self.camera = camera
        self.microphone = microphone
        self.notices = notices
        self.paths = paths
    }
}

/// The part of a set-up that changes on the live session, without stopping it: `CaptureController.apply`
/// compares two of these and applies only what differs.
public struct ControlledCaptureSettings: Sendable, Equatable {
    /// Degrees clockwise to turn photos and movies upright: 0, 90, 180 or 270.
    public var rotation: Int
    public var mirrored: Bool
    public var photoQuality: CapturePhotoOutput.QualityPrioritization
    /// Photos keep their pixels as the camera gives them and say how to turn them in EXIF.
    public var photoEXIFOrientation: Bool
    public var photoFolder: URL
    public var movieFolder: URL
    /// The photo-library album each photo goes to (the photo folder is then a library); nil: none.
    public var photoAlbum: String?
    /// How files are named when a command gives no path (the description files' rule: {counter}, {date}).
    public var photoNaming: FileNamePattern
    public var movieNaming: FileNamePattern
    /// An event's clip ends this many seconds after its last trigger (`trigger`).
    public var postRoll: Double
    /// Seconds after the last trigger during which another continues the same clip (paused meanwhile when
    /// longer than the post-roll); nil: the post-roll.
    public var eventGap: Double?
    /// A schedule: an event is triggered every this many seconds (source "schedule"); nil: none.
    public var triggerInterval: Double?

    public init(rotation: Int = 0, mirrored: Bool = false, photoQuality: CapturePhotoOutput.QualityPrioritization = .balanced,
                photoEXIFOrientation: Bool = false, photoFolder: URL, movieFolder: URL,
                photoNaming: FileNamePattern = defaultPhotoNaming, movieNaming: FileNamePattern = defaultMovieNaming,
                postRoll: Double = CaptureEventRecorder.defaultPostRoll, eventGap: Double? = nil, triggerInterval: Double? = nil,
                photoAlbum: String? = nil) {
        self.photoAlbum = photoAlbum
        self.rotation = rotation
        self.mirrored = mirrored
        self.photoQuality = photoQuality
        self.photoEXIFOrientation = photoEXIFOrientation
        self.photoFolder = photoFolder
        self.movieFolder = movieFolder
        self.photoNaming = photoNaming
        self.movieNaming = movieNaming
        self.postRoll = postRoll
        self.eventGap = eventGap
        self.triggerInterval = triggerInterval
    }

    // Literal patterns, checked by the tests.
    public static let defaultPhotoNaming = try! FileNamePattern(parsing: "photo-{date}-{counter}.jpg")
    public static let defaultMovieNaming = try! FileNamePattern(parsing: "movie-{date}-{counter}.mp4")

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
        if photoAlbum != other.photoAlbum { changed.append("photoAlbum") }
        if movieNaming != other.movieNaming { changed.append("movieNaming") }
        if postRoll != other.postRoll { changed.append("postRoll") }
        if eventGap != other.eventGap { changed.append("eventGap") }
        if triggerInterval != other.triggerInterval { changed.append("triggerInterval") }
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
            destinations.append("photos go to \(settings.photoFolder.path)" + (settings.photoAlbum.map { ", album '\($0)'" } ?? ""))
            if let album = settings.photoAlbum { fields["photoAlbum"] = album }
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
public struct ReloadedSetUp: Sendable {
    public var settings: ControlledCaptureSettings
    public var needsNewRun: [String]

    public init(settings: ControlledCaptureSettings, needsNewRun: [String] = []) {
        self.settings = settings
        self.needsNewRun = needsNewRun
    }

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
