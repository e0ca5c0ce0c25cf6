/// When motion begins and ends, from each frame's verdict: a couple of frames with motion before it begins
/// (one frame of flicker is not motion), and half a second of quiet before it ends (a person pausing mid-walk
/// is still one motion). Between the two thresholds nothing changes, so a score near the line does not make
/// motion flicker on and off.
struct MotionHysteresis {
    enum Transition { case began, ended }

    /// Consecutive frames at or above the minimum area that begin motion.
    static let framesToBegin = 2
    /// Consecutive quiet frames (below half the minimum area) that end it.
    static let quietFramesToEnd = 15

    private(set) var isMoving = false
    private var movingRun = 0
    private var quietRun = 0

    mutating func update(score: Double, minimumArea: Double) -> Transition? {
        let moving = score >= minimumArea && score > 0
        let quiet = score < minimumArea / 2
        movingRun = moving ? movingRun + 1 : 0
        quietRun = quiet ? quietRun + 1 : 0
        if !isMoving, movingRun >= Self.framesToBegin {
            isMoving = true
            return .began
        }
        if isMoving, quietRun >= Self.quietFramesToEnd {
            isMoving = false
            return .ended
        }
        return nil
    }

    /// Forgets everything (motion, if any, is taken to have ended by the caller).
    mutating func reset() { self = MotionHysteresis() }
}
