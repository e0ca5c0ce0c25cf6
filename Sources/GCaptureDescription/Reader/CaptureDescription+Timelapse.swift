extension CaptureDescription {
    /// A timelapse recorded for the whole run (a second CaptureMovieFileOutput with `timelapseInterval`):
    /// one frame every `interval` seconds, played `frameRate` a second, video only.
    public struct Timelapse: Sendable, Equatable {
        /// Seconds of capture between the frames kept.
        public var interval: Double = 1
        /// Frames a second of the movie.
        public var frameRate = 30
        /// Seconds of capture after which the timelapse ends (complete); none: the run's end.
        public var maxDuration: Double?
        /// Bytes; set under --safe only (SafeLimits.defaultMaxSize).
        public var maxSize: Int64?
        /// Relative to the description file's folder (or to the root under --safe).
        public var folder = "."
        public var name = FileNamePattern.defaultTimelapse
    }
}

extension FileNamePattern {
    public static let defaultTimelapse = try! FileNamePattern(parsing: "timelapse-{counter}.mp4")
}
