import Synchronization

extension CaptureSession {
    /// Video frames that have entered the running session since it started: the camera's, and the black
    /// frames that stand in for an unplugged one. A supervisor (the CLI's systemd watchdog) reads it twice
    /// and calls the session alive only when it grew: `isRunning` stays true through a wedged driver, a
    /// stall or a deadlocked pipeline, where no frame moves. 0 when the session is not running; it starts
    /// again from 0 with each start, so compare for a change, not for growth alone.
    public var videoFramesDelivered: Int { runningGraph?.videoFramesIn.count.load(ordering: .relaxed) ?? 0 }
}
