/// A capture set-up as a description file declares it, already checked against the schema: every value
/// here has the right type and range. Whether the devices, elements and folders it names exist on this
/// machine is checked separately (`CaptureDescription.check`), because that depends on the machine.
///
/// Plain values only (no engine types), so that the reader can be built and fuzzed on its own.
public struct CaptureDescription: Sendable, Equatable {
    /// The file's name as given (used in every diagnostic).
    public var file: String
    public var version: Int
    public var camera: Camera
    public var microphone: Microphone
    /// Degrees clockwise, on top of the camera's mount angle (0, 90, 180, 270).
    public var rotation: Int
    /// Whether photos and movies are mirrored.
    public var mirrored: Bool
    public var outputs: Outputs
    /// GStreamer fragments meant to go between the camera and the outputs.
    public var filters: [String]
    /// The operator's web page, when `gcapture run FILE --http ADDR:PORT` serves it.
    public var web = Web()
    /// The camera's `name` in a file listing `cameras:`; nil for a one-camera file.
    public var cameraName: String?
    /// Where this camera's keys sit, as messages name them ("cameras[1]."; "" for a one-camera file).
    var pathScope = ""
    /// Where each key and value was written, by dotted path ("outputs.photo.folder"): later checks report
    /// their findings there.
    public var valuePositions: [String: SourcePosition]
    public var keyPositions: [String: SourcePosition]

    /// The position of a value, else of its key, else the file's start.
    public func position(of path: String) -> SourcePosition {
        valuePositions[path] ?? keyPositions[path] ?? .start
    }

    public func keyPosition(of path: String) -> SourcePosition {
        keyPositions[path] ?? valuePositions[path] ?? .start
    }

    public struct Camera: Sendable, Equatable {
        public enum Choice: Sendable, Equatable {
            /// The system's default camera (preferring `position` when given).
            case auto
            /// The built-in test camera.
            case test
            /// A camera by its stable id (`gcapture devices`) or node path.
            case id(String)
            /// A GStreamer source fragment (gst-launch syntax) ending in raw video.
            case source(String)
        }
        public var choice: Choice = .auto
        /// front, back or unspecified: which camera `auto` prefers (any camera when none faces that way).
        public var position: String = "unspecified"
        /// A CaptureSession.Preset name.
        public var preset: String = "high"
        /// How the camera is mounted, degrees clockwise (0, 90, 180, 270): photos and movies are turned by it.
        public var mount: Int = 0
        /// The test camera's look.
        public var pattern: String?
        public var noise: Int?
    }

    public enum Microphone: Sendable, Equatable {
        case none
        /// The audio server's default source.
        case `default`
        case id(String)
    }

    public struct Outputs: Sendable, Equatable {
        public var preview: Preview?
        public var photo: Photo?
        public var movie: Movie?
        public var frames: Frames?
        public var stream: Stream?
        public var timelapse: Timelapse?
        public var motion: Motion?
        public var isEmpty: Bool {
            preview == nil && photo == nil && movie == nil && frames == nil && stream == nil && timelapse == nil && motion == nil
        }
    }

    /// A window showing the camera (CapturePreviewOutput).
    public struct Preview: Sendable, Equatable {
        /// `auto` (Wayland, X or KMS, as the preview output chooses) or a sink: a factory name, or a
        /// fragment ending in one.
        public var sink: String = "auto"
        /// resize-aspect, resize-aspect-fill or resize (CapturePreviewOutput.VideoGravity).
        public var gravity: String = "resize-aspect"
        public var fullscreen = false
        /// auto (a front camera's preview is mirrored, as a mirror), on or off.
        public var mirror: String = "auto"
    }

    public struct Photo: Sendable, Equatable {
        /// speed, balanced or quality (CapturePhotoOutput.QualityPrioritization).
        public var quality: String = "balanced"
        public var zeroShutterLag = true
        public var deferred = false
        /// Relative to the description file's folder (or to the root under --safe).
        public var folder = "."
        public var name = FileNamePattern.defaultPhoto
        /// EXIF Orientation instead of turned pixels.
        public var exifOrientation = false
        /// The photo-library album (GCapturePhotos) each photo goes to; the photo folder is then a library.
        public var album: String?
    }

    public struct Movie: Sendable, Equatable {
        public var audio = true
        /// mp4 or matroska.
        public var format = "mp4"
        /// Seconds between MP4 fragments (what a crash costs at most).
        public var fragmentInterval: Double = 1
        /// Seconds of the session each recording begins before its start (CaptureMovieFileOutput.preRollDuration).
        public var preRoll: Double = 0
        /// Seconds an event's clip goes on after its last trigger; nil: the engine's default.
        public var postRoll: Double?
        /// Seconds after an event's last trigger within which another continues its clip; nil: the post-roll.
        public var eventGap: Double?
        /// A schedule: an event every this many seconds; nil: none.
        public var triggerEvery: Double?
        public var maxDuration: Double?
        public var maxSize: Int64?
        public var minFreeDisk: Int64?
        public var encoder: String?
        public var bitRate: Int?
        public var folder = "."
        public var name = FileNamePattern.defaultMovie
    }

    public struct Frames: Sendable, Equatable {
        /// A raw pixel format to convert to (NV12, I420, RGBx, ...); nil: as the camera gives them.
        public var format: String?
        public var width: Int?
        public var height: Int?
        public var discardLate = true
    }

    /// The session published live (CaptureStreamOutput) from the start of the run to its end.
    public struct Stream: Sendable, Equatable {
        /// rtmp://, srt://, rtsp:// or an HLS playlist's path (relative to the folder the run starts in, or
        /// to the root under --safe, where publishing is refused).
        public var url = ""
        /// Kbit/s; nil: from the frame size.
        public var bitRate: Int?
        /// Seconds between key frames.
        public var keyInterval: Double = 2
        /// main or constrained-baseline (CaptureStreamOutput.Profile).
        public var profile = "main"
        public var encoder: String?
        /// aac, or opus where the protocol carries it (srt://, rtsp://).
        public var audioCodec = "aac"
    }

    /// The web page's settings (the address is `--http`'s).
    public struct Web: Sendable, Equatable {
        /// HTTPS: the certificate (PEM or DER) and its unencrypted private key, relative to the description's
        /// folder (the root under --safe). Both or neither.
        public var tlsCertificate: String?
        public var tlsKey: String?
    }

    /// The rotation photos and movies get: the mount angle plus the extra rotation, in quarter turns.
    public var effectiveRotation: Int { (camera.mount + rotation) % 360 }
}

/// Limits under `--safe` (descriptions from untrusted hands).
public enum SafeLimits {
    /// The largest description file read.
    public static let fileBytes = 64 * 1024
    /// Nodes in the YAML tree (aliases count each time they are used).
    public static let nodes = 2_000
    public static let maxDuration: Double = 3_600
    public static let maxSize: Int64 = 4 * 1024 * 1024 * 1024
    /// What a movie may grow to when the description gives no max-size.
    public static let defaultMaxSize: Int64 = 1024 * 1024 * 1024
    public static let nameLength = 200
}
