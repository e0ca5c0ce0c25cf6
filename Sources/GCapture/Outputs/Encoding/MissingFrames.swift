/// Frames a busy encoder (or the shared one before it) let go of, read from the gap between two frames that
/// came through: a gap over a frame and a half stands for the frames in it. Rounded, not floored: a camera's
/// frames come a little early or late, and a gap of 3.9 intervals is three frames missing, not two (floored, a
/// busy encoder's 26 gaps in 4 s lost 12 frames of a recording's count).
enum MissingFrames {
    static func between(_ last: UInt64, and time: UInt64, interval: UInt64) -> Int {
        guard interval > 0, time > last + interval * 3 / 2 else { return 0 }
        return Int((time - last + interval / 2) / interval) - 1
    }
}
