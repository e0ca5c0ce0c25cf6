import GStreamerKit
import Synchronization

/// The moment of a camera switch: the tee taken from the old source and given to the new one between two
/// buffers, on the new source's streaming thread, in the blocking probe of its first buffer. That buffer is
/// the first the outputs get, with no hop through the session's queue and no wait for the next frame (the
/// switch's gap was 2.6 frame intervals in the VM that way). The session's thread may still abandon the
/// switch when the new source fails: before the cut nothing happened; after it, the tee goes back.
/// Time never runs backwards across the cut. A camera stamps a frame with the time it was taken and delivers
/// it later (USB cameras 50-200 ms; a stream's first frames later still), so the new camera's first frames
/// may be older than the old camera's last. Two frames of one moment gave x264 and mp4mux a time going back:
/// samples of no duration in the movie, frames ffprobe discards, a copy into a plain MP4 that mp4mux refused
/// ("no PTS"). So the cut waits, with the old camera still feeding the outputs, for the new camera's first
/// frame newer than the old one's latest (vivid in the VM: ~100 ms of its first frames are older); a camera
/// that stays behind (slower to deliver than the old one) is cut to after `longestWaitForNewerFrame`, and its
/// frames older than the old one's last stay out. "Newer" means `cutSpacing` newer, not a whole moment to a
/// movie (`isNewMoment`): that was a quarter of an interval, and vivid's cameras, stamped by one timer, deliver
/// within it of each other, so a switch to a 25 fps camera waited two or three frames (108-121 ms against a
/// plain start's 27-29, in the VM; 37-45 ms now). The movie keeps its own rule (RecordingTimeline): a frame
/// closer than a moment to the one before goes in a moment after it.
/// A new camera's frame only a little older than the old one's latest is not waited past but goes out retimed
/// (`retimedAtTheCut`): two cameras' frames interleave, and one in three switches in the VM found the old
/// camera's frame of the same moment just ahead, and waited a whole interval more (75-110 ms, not 40).
final class SourceCut: Sendable {
    private enum Stage { case waiting, moved, abandoned }

    private struct State {
        var stage = Stage.waiting
        var linkFailure: GStreamerError?
        /// The probe that drops the old source's buffers once it no longer feeds the tee.
        var oldSourceProbe: UInt?
        /// The time of the old source's last frame, read at the cut.
        var previousLastTime: ClockTime?
        /// When the new source's first buffer came (it may be older than the old source's latest, and wait).
        var firstNewBuffer: ContinuousClock.Instant?
        /// Whether a frame of the new source reached the outputs retimed (the probe stays until one is newer).
        var newSourceDelivered = false
    }

    /// How long the cut waits for the new camera to catch up with the old one.
    static let longestWaitForNewerFrame = Duration.milliseconds(500)

    /// How much newer than the old camera's latest frame the new camera's must be to take the outputs: more
    /// than FLV's millisecond, the coarsest clock an output writes (a stream), so no output gets two frames
    /// of one time.
    static let cutSpacing: ClockTime = 2_000_000

    /// Whether the new camera's frame stamped `time` may follow the old camera's stamped `last` in the outputs.
    static func isNewerAtTheCut(_ time: ClockTime, than last: ClockTime) -> Bool { time > last + cutSpacing }

    /// The time the new camera's frame stamped `time`, not newer at the cut than the old camera's `last`, goes out
    /// with instead of being dropped: right after `last`, when that moves it by less than half its interval
    /// (`duration`), so its successor still comes well after it. Nil when it is older than that (a camera that
    /// delivers late: its first frames stay out), or says no interval.
    static func retimedAtTheCut(_ time: ClockTime, duration: ClockTime?, after last: ClockTime) -> ClockTime? {
        let retimed = last + cutSpacing + 1
        guard let duration, duration > 0, time < retimed, retimed - time < duration / 2 else { return nil }
        return retimed
    }

    /// Whether a frame stamped `time` is a moment after one stamped `last`, as a movie sees it. Newer by a
    /// nanosecond is not enough: mp4mux keeps a track's times in hundredths of the frame interval its caps give
    /// (1/3000 s at 30 fps), and a frame 100 µs after the one before became a second sample of the same decode
    /// time, the copy into a plain MP4 failed and the movie stayed fragmented (seen in the VM at a switch: two
    /// samples at 9.682333 s). A camera never delivers two frames within a quarter of its interval; two cameras
    /// at a switch, or a filler and the camera it stood in for, may.
    static func isNewMoment(_ time: ClockTime, after last: ClockTime, frameDuration: ClockTime?) -> Bool {
        time > last + oneMoment(frameDuration: frameDuration)
    }

    /// How close two frames are to be of one moment: a quarter of the frame's interval, and at least mp4mux's tick
    /// at 10 fps for a camera whose buffers give no duration.
    static func oneMoment(frameDuration: ClockTime?) -> ClockTime {
        max(frameDuration.map { $0 / 4 } ?? 0, 1_000_000)
    }

    private let state = Locked(State())
    private let previous: Bin
    private let next: Bin
    private let tee: Element
    /// The presentation time of the last frame the old source let through (its SourceWatch's), nil before any.
    private let previousLastTime: @Sendable () -> ClockTime?
    /// Marks a source's errors and end of stream as dealt with (true), or as the session's again (false).
    private let silence: @Sendable (_ path: String, _ silenced: Bool) -> Void

    init(previous: Bin, next: Bin, tee: Element, previousLastTime: @escaping @Sendable () -> ClockTime?,
         silence: @escaping @Sendable (String, Bool) -> Void) {
        self.previous = previous
        self.next = next
        self.tee = tee
        self.previousLastTime = previousLastTime
        self.silence = silence
    }

    /// Why the tee could not be linked to the new source, if it could not.
    var linkFailure: GStreamerError? { state.withLock { $0.linkFailure } }

    /// On the new source's streaming thread, at its buffers until the tee has moved and one of them came after
    /// the old source's last (then the probe goes). A buffer a little older than that last goes out retimed.
    func moveTee(_ buffer: Pad.ProbeInfo) -> Pad.ProbeReturn {
        let time = buffer.bufferPTS, duration = buffer.bufferDuration
        return state.withLock { state in
            switch state.stage {
            // An abandoned switch: the new source's buffers go nowhere until it is stopped.
            case .abandoned: return .drop
            case .moved: return passOrDrop(buffer, time: time, duration: duration, &state)
            case .waiting: break
            }
            // Not newer than what the old camera has already delivered, nor close enough to go out retimed: it
            // goes on delivering for now.
            let now = ContinuousClock.now
            if state.firstNewBuffer == nil { state.firstNewBuffer = now }
            if let time, let latest = previousLastTime(), !Self.isNewerAtTheCut(time, than: latest),
               Self.retimedAtTheCut(time, duration: duration, after: latest) == nil,
               now - state.firstNewBuffer! < Self.longestWaitForNewerFrame {
                return .drop
            }
            // The old source's buffers go nowhere from now on (unlinked, it would fail before it is stopped),
            // and whatever it says until it is stopped is dealt with.
            silence(previous.path, true)
            let previousPad = previous.staticPad("src")
            state.oldSourceProbe = previousPad?.addProbe(.buffer) { _ in .drop }
            previous.unlink(from: tee)
            do {
                // As negotiated: the new source settled its caps (pinned by its capsfilter) while it started, and
                // a plain link would query every branch behind the tee for caps (35-150 ms in the VM, here, on the
                // streaming thread, before this first buffer goes on) and make it negotiate again after this buffer
                // (v4l2src stops streaming for a new buffer pool: 100-250 ms without the second frame).
                try link(next, to: tee)
            } catch {
                // Nothing new reached the outputs: the old source goes on as it was.
                restorePrevious(&state)
                state.linkFailure = error as? GStreamerError ?? GStreamerError(kind: .link, message: "\(error)")
                state.stage = .abandoned
                return .drop
            }
            state.stage = .moved
            // Read once the old source can deliver no more (a frame it was pushing is counted already).
            state.previousLastTime = previousLastTime()
            return passOrDrop(buffer, time: time, duration: duration, &state)
        }
    }

    /// Once the tee has moved: a buffer newer than the last frame out goes on and ends the probe; the new source's
    /// first, if a little older, goes on retimed just after that frame (the probe stays, for the next); older
    /// ones, and a later one not newer than a retimed first, stay out.
    private func passOrDrop(_ buffer: Pad.ProbeInfo, time: ClockTime?, duration: ClockTime?, _ state: inout State) -> Pad.ProbeReturn {
        guard let time, let last = state.previousLastTime, !Self.isNewerAtTheCut(time, than: last) else { return .remove }
        guard !state.newSourceDelivered, let retimed = Self.retimedAtTheCut(time, duration: duration, after: last),
              buffer.replaceBufferWithRetimedCopy(pts: retimed, duration: duration ?? 0) else { return .drop }
        state.newSourceDelivered = true
        state.previousLastTime = retimed
        return .pass
    }

    /// The same rule where a source replaces another that already stopped (a filler and the camera coming back):
    /// the source's frames not a moment after `time` are dropped, until the first that is (then the probe goes).
    static func dropFrames(on output: Pad, notAfter time: ClockTime) {
        let dropped = Atomic<Int>(0)
        output.addProbe(.buffer) { info in
            guard let pts = info.bufferPTS, !isNewMoment(pts, after: time, frameDuration: info.bufferDuration) else {
                Log.session.debug("a source in place of another: \(dropped.load(ordering: .relaxed)) frames not after \(time) dropped; first kept at \(info.bufferPTS.map { "\($0)" } ?? "none")")
                return .remove
            }
            dropped.add(1, ordering: .relaxed)
            return .drop
        }
    }

    /// On the session's thread, when the new source failed: the tee goes back to the old one if it had moved.
    func abandon() {
        state.withLock { state in
            let moved = state.stage == .moved
            state.stage = .abandoned
            guard moved else { return }
            next.unlink(from: tee)
            restorePrevious(&state)
        }
    }

    private func restorePrevious(_ state: inout State) {
        // It goes on with the caps it had: no reason to negotiate again.
        try? link(previous, to: tee)
        if let probe = state.oldSourceProbe { previous.staticPad("src")?.removeProbe(probe) }
        state.oldSourceProbe = nil
        silence(previous.path, false)
    }

    private func link(_ source: Bin, to tee: Element) throws {
        guard let output = source.staticPad("src"), let input = tee.staticPad("sink") else {
            throw GStreamerError(kind: .link, message: "cannot link \(source) to \(tee): no pad")
        }
        try output.linkAsNegotiated(to: input)
    }
}
