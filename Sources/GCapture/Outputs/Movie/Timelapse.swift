/// A timelapse recording's pace: one camera frame kept every `interval` of capture time, the kept frames
/// played `frameRate` a second (one a second at 30 fps: ten minutes make twenty seconds of movie).
struct Timelapse: Sendable, Equatable {
    /// Capture time between the frames kept, nanoseconds (pauses excluded).
    var interval: UInt64
    /// Frames a second of the movie.
    var frameRate: Int

    init(interval seconds: Double, frameRate: Int) {
        interval = max(1, UInt64((seconds * 1e9).rounded()))
        self.frameRate = max(1, frameRate)
    }

    /// Where the `index`th kept frame (from 0) starts in the movie, nanoseconds: from the index, so that no
    /// rounding of a frame's duration adds up over hours of frames.
    func movieTime(ofFrame index: UInt64) -> UInt64 { index * 1_000_000_000 / UInt64(frameRate) }

    /// The muxer's fragment, in movie time, that holds about `captured` seconds of capture time, at least
    /// one frame: `movieFragmentInterval` keeps meaning what a crash may cost of what was captured, not
    /// of the much shorter movie (a second of 30 fps movie is 30 s of capture at one frame a second).
    func fragmentDuration(holdingCaptureOf captured: Double) -> UInt64 {
        let frames = max(1, UInt64((captured * 1e9 / Double(interval)).rounded(.down)))
        return movieTime(ofFrame: frames)
    }
}

/// Which frames a timelapse keeps, and where they go in the movie. Capture time is cut into slots of the
/// timelapse's interval, from the file's first frame (pauses excluded); the first frame of each slot is
/// kept. A slot no frame fell into (the camera stalled) is skipped, not made up later, and the camera's
/// jitter never accumulates: the kept frames stay on the grid.
struct TimelapseSelection: Sendable {
    let timelapse: Timelapse
    private var lastSlot: UInt64?
    /// Frames kept so far.
    private(set) var kept: UInt64 = 0

    init(_ timelapse: Timelapse) { self.timelapse = timelapse }

    /// Where a frame captured at `captureTime` (the file's capture time, pauses excluded) goes in the movie,
    /// nil when it is not the first of its slot.
    func placement(at captureTime: UInt64) -> (pts: UInt64, duration: UInt64)? {
        let slot = captureTime / timelapse.interval
        if let lastSlot, slot <= lastSlot { return nil }
        let pts = timelapse.movieTime(ofFrame: kept)
        return (pts, timelapse.movieTime(ofFrame: kept + 1) - pts)
    }

    /// Keeps the frame captured at `captureTime`, which `placement` placed.
    mutating func keep(at captureTime: UInt64) {
        lastSlot = captureTime / timelapse.interval
        kept += 1
    }
}
