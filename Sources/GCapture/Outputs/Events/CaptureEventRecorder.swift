import Dispatch
import Foundation
import GCaptureSupport

/// Event recording, what people run motion or Frigate for (a Linux addition in the engine's style): a
/// trigger starts a clip on a movie output, which begins the output's `preRollDuration` before it; each
/// further trigger within the event extends it; the clip ends `postRoll` after the last trigger.
///
/// With an `eventGap` longer than the post-roll, the clip pauses when the post-roll is over, and a trigger
/// within the gap resumes the same file (one clip per event, as motion's `event_gap`); the end of the gap
/// stops it. Each clip gets a record beside it (`clip.json` for `clip.mp4`, EventClipRecord): its start, end
/// and triggers, written open from the clip's first frame and at each trigger (a crash leaves it for the
/// recovery to close), and closed when the clip is finished. A trigger while a clip is being finalized starts the next clip once it is.
///
///     trigger ─▶ startRecording (pre-roll) ─ trigger ─ … ─ last trigger ─ post-roll ─▶ stop
///                                                                        └ (gap > post-roll) pause ─ gap ─▶ stop
public final class CaptureEventRecorder: @unchecked Sendable {
    // @unchecked Sendable: every var is in `state` (Locked); the rest are lets of Sendable types.

    /// Why a clip was started or extended.
    public struct Trigger: Sendable, Codable, Equatable {
        /// Where it came from: "motion", "stdin", "web", "signal", "schedule", or any name the app gives.
        public var source: String
        public var date: Date
        /// What the source says of it (a motion box, a sensor's name), if anything.
        public var detail: String?

        public init(source: String, date: Date = Date(), detail: String? = nil) {
            self.source = source
            self.date = date
            self.detail = detail
        }
    }

    /// One event's clip.
    public struct Clip: Sendable {
        public var url: URL
        public var triggers: [Trigger]
    }

    public enum Event: Sendable {
        /// The clip's file is being written (its pre-roll in it already).
        case began(Clip)
        /// A trigger while the clip records (or waits in its gap) made it longer.
        case extended(Clip, by: Trigger)
        /// The clip is finished: `record` says what is in it; `error` is nil, or why it ended early.
        case ended(Clip, record: EventClipRecord, error: CaptureError?)
    }

    /// What a trigger did.
    public enum TriggerOutcome: Sendable, Equatable {
        case began(URL)
        case extended(URL)
        /// The clip before is being finalized: this trigger begins the next one as soon as it is.
        case queued
    }

    /// Frigate's: five seconds after the last trigger.
    public static let defaultPostRoll: TimeInterval = 5

    public let movieOutput: CaptureMovieFileOutput
    public let postRoll: TimeInterval
    public let eventGap: TimeInterval
    private let nextFileURL: @Sendable () throws -> URL
    private let queue = DispatchQueue(label: "gcapture.events")
    /// Writes the records in the order they were made (each is enqueued under `state`'s lock): an open record
    /// never lands after the closed one.
    private let recordWriting = DispatchQueue(label: "gcapture.events.records")
    private let broadcast = Broadcast<Event>()

    private enum Phase { case starting, recording, paused, stopping }
    private struct Current {
        var clip: Clip
        var phase: Phase
        var lastTrigger: DispatchTime
        /// Where the file's picture ends: the pause at the post-roll's end, else the stop.
        var fileEnd: Date?
        var timer = 0
        /// Sources whose trigger lasts until they release it (motion, while it goes on).
        var holds: Set<String> = []
        /// The record written beside the file while it is recorded (nil until its first frame is in it).
        var openRecord: EventClipRecord?
    }
    private struct State {
        var current: Current?
        /// Triggers that came while the last clip was finalized (and whether each holds).
        var pending: [(trigger: Trigger, holding: Bool)] = []
        var timers = 0
        var closed = false
    }
    private let state = Locked(State())

    /// `nextFileURL` names each clip (the app's naming rule); `eventGap` nil (or not over `postRoll`): the
    /// clip stops when its post-roll is over.
    public init(movieOutput: CaptureMovieFileOutput, postRoll: TimeInterval = defaultPostRoll, eventGap: TimeInterval? = nil,
                nextFileURL: @escaping @Sendable () throws -> URL) {
        self.movieOutput = movieOutput
        self.postRoll = max(0, postRoll)
        self.eventGap = max(self.postRoll, eventGap ?? 0)
        self.nextFileURL = nextFileURL
    }

    /// The events of every clip from now on.
    public func events() -> AsyncStream<Event> { broadcast.makeStream() }

    /// The clip being recorded, if an event is going on.
    public var currentClip: Clip? { state.withLock { $0.current?.clip } }

    /// Starts a clip, or extends the one going on. Any thread; returns at once (the clip's start is told
    /// as `.began`). Throws when no clip can start: the file cannot be named, the output records something
    /// else, or the recorder was closed.
    /// `holding`: the trigger lasts until `release(source:)` (motion while it goes on), and the post-roll
    /// counts from the release.
    @discardableResult
    public func trigger(_ trigger: Trigger, holding: Bool = false) throws(CaptureError) -> TriggerOutcome {
        enum Step { case start(URL), extend(Clip, resume: Bool), queued }
        let step = try state.withLock { state throws(CaptureError) -> Step in
            guard !state.closed else { throw .recordingFailed(reason: "event recording has ended", underlying: nil) }
            if var current = state.current {
                guard current.phase != .stopping else {
                    state.pending.append((trigger, holding))
                    return .queued
                }
                let resume = current.phase == .paused
                current.clip.triggers.append(trigger)
                current.openRecord?.triggers = current.clip.triggers
                if let record = current.openRecord { writeRecord(record, beside: current.clip.url) }
                if holding { current.holds.insert(trigger.source) }
                current.lastTrigger = .now()
                if resume { (current.phase, current.fileEnd) = (.recording, nil) }
                state.current = current
                schedule(&state, at: current.lastTrigger + postRoll)
                return .extend(current.clip, resume: resume)
            }
            guard !movieOutput.isRecording else {
                throw .recordingFailed(reason: "the movie output is recording \(movieOutput.outputFileURL?.path ?? "a file") already", underlying: nil)
            }
            let url: URL
            do { url = try nextFileURL() } catch {
                throw error as? CaptureError ?? .recordingFailed(reason: "cannot name the event's clip: \(error)", underlying: nil)
            }
            state.current = Current(clip: Clip(url: url, triggers: [trigger]), phase: .starting, lastTrigger: .now(),
                                    holds: holding ? [trigger.source] : [])
            schedule(&state, at: .now() + postRoll)
            return .start(url)
        }
        switch step {
        case .start(let url):
            movieOutput.startRecording(to: url, recordingDelegate: ClipDelegate(recorder: self))
            return .began(url)
        case .extend(let clip, let resume):
            if resume { movieOutput.resumeRecording() }
            broadcast.yield(.extended(clip, by: trigger))
            return .extended(clip.url)
        case .queued:
            return .queued
        }
    }

    /// A holding trigger of `source` is over: the clip ends a post-roll from now unless something else
    /// holds it or triggers again. Any thread; nothing happens when `source` holds nothing.
    public func release(source: String) {
        state.withLock { state in
            state.pending.removeAll { $0.holding && $0.trigger.source == source }
            guard var current = state.current, current.holds.remove(source) != nil else { return }
            current.lastTrigger = .now()
            state.current = current
            if current.phase == .recording || current.phase == .starting { schedule(&state, at: current.lastTrigger + postRoll) }
        }
    }

    /// Ends the event going on now (its clip finalized as after its post-roll) and takes no more triggers
    /// when `closing`. Returns once the clip is finished, or at `timeout`.
    public func endEvent(closing: Bool = false, timeout: Duration = .seconds(30)) async {
        let stopping = state.withLock { state -> Bool in
            if closing { (state.closed, state.pending) = (true, []) }
            guard var current = state.current, current.phase != .stopping else { return state.current != nil }
            current.phase = .stopping
            current.fileEnd = current.fileEnd ?? Date()
            state.current = current
            return true
        }
        guard stopping else { return }
        movieOutput.stopRecording()
        let deadline = ContinuousClock.now + timeout
        while state.withLock({ $0.current != nil }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: The clip's course (on `queue`, and the delegate's queue)

    private func schedule(_ state: inout State, at time: DispatchTime) {
        state.timers += 1
        let number = state.timers
        state.current?.timer = number
        queue.asyncAfter(deadline: time) { [weak self] in self?.timerFired(number) }
    }

    /// The post-roll (or the gap) after the last trigger may be over: pause or stop the clip.
    private func timerFired(_ number: Int) {
        enum Step { case pause, stop }
        let step = state.withLock { state -> Step? in
            guard var current = state.current, current.timer == number, current.phase != .stopping else { return nil }
            // Not started yet (a short post-roll, a slow start): looked at again shortly.
            guard current.phase != .starting else {
                schedule(&state, at: .now() + 0.05)
                return nil
            }
            // Held (motion going on): nothing ends until the release, which schedules the post-roll.
            guard current.holds.isEmpty else { return nil }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - current.lastTrigger.uptimeNanoseconds) / 1e9
            if elapsed >= eventGap || (current.phase == .recording && eventGap <= postRoll) {
                current.phase = .stopping
                current.fileEnd = current.fileEnd ?? Date()
                state.current = current
                return .stop
            }
            if current.phase == .recording {
                current.phase = .paused
                current.fileEnd = Date()
                state.current = current
                schedule(&state, at: current.lastTrigger + eventGap)
                return .pause
            }
            return nil
        }
        switch step {
        case .pause?: movieOutput.pauseRecording()
        case .stop?: movieOutput.stopRecording()
        case nil: break
        }
    }

    /// Writes `record` beside the clip on `recordWriting`; called under `state`'s lock, which orders the writes.
    private func writeRecord(_ record: EventClipRecord, beside url: URL) {
        recordWriting.async { record.write(beside: url) }
    }

    fileprivate func clipDidStart(_ url: URL) {
        let preRoll = movieOutput.recordingStatistics.preRollDuration
        let clip = state.withLock { state -> Clip? in
            guard var current = state.current, current.clip.url == url, current.phase == .starting else { return nil }
            current.phase = .recording
            let record = EventClipRecord(clip: current.clip, preRoll: preRoll, postRoll: postRoll)
            current.openRecord = record
            writeRecord(record, beside: url)
            state.current = current
            return current.clip
        }
        if let clip { broadcast.yield(.began(clip)) }
    }

    fileprivate func clipDidFinish(_ url: URL, error: CaptureError?) {
        let (finished, pending) = state.withLock { state -> (Current?, [(trigger: Trigger, holding: Bool)]) in
            guard let current = state.current, current.clip.url == url else { return (nil, []) }
            state.current = nil
            defer { state.pending = [] }
            return (current, state.pending)
        }
        guard let finished else { return }
        let stats = movieOutput.lastStatistics
        let started = finished.openRecord != nil
        let record = EventClipRecord(clip: finished.clip, statistics: stats, fileEnd: finished.fileEnd ?? Date(), postRoll: postRoll,
                                     complete: started && (error == nil || error!.recordingFinishedSuccessfully), error: error?.description)
        // A clip that never started has no file to describe. Written before `.ended` is told, after any
        // open record (enqueued before `current` went).
        if started { recordWriting.sync { record.write(beside: url) } }
        broadcast.yield(.ended(finished.clip, record: record, error: error))
        // Triggers that came during the finalization: the next event, its first trigger the first of them.
        guard !pending.isEmpty else { return }
        do {
            for (trigger, holding) in pending { try self.trigger(trigger, holding: holding) }
        } catch {
            Log.session.error("the event after \(url.lastPathComponent) cannot start: \(error)")
        }
    }
}

/// The recorder's delegate for its clips (a separate object: the recorder is not a delegate to anyone else).
private final class ClipDelegate: CaptureFileOutputRecordingDelegate, Sendable {
    private weak let recorder: CaptureEventRecorder?
    init(recorder: CaptureEventRecorder) { self.recorder = recorder }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        recorder?.clipDidStart(fileURL)
    }

    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        recorder?.clipDidFinish(outputFileURL, error: error.map { $0 as? CaptureError ?? .recordingFailed(reason: "\($0)", underlying: nil) })
    }
}

extension CaptureEventRecorder {
    /// Motion triggers events: its start starts (or extends) a clip and holds it while the motion goes on;
    /// its end releases it, and the clip ends a post-roll later. Replaces the output's hooks.
    public func follow(_ motion: CaptureMotionOutput) {
        motion.onMotionBegan = { [weak self] found in
            let box = found.boundingBox
            let detail = String(format: "box %.3f %.3f %.3f %.3f, score %.3f", box.minX, box.minY, box.width, box.height, found.score)
            do { try self?.trigger(.init(source: Self.motionSource, detail: detail), holding: true) } catch {
                Log.session.error("motion could not start an event: \(error)")
            }
        }
        motion.onMotionEnded = { [weak self] _ in self?.release(source: Self.motionSource) }
    }

    /// The source of the triggers motion makes.
    public static let motionSource = "motion"
}
