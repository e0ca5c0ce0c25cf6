import Dispatch
import Foundation
import GStreamerKit

/// Records movies from a running session (AVCaptureMovieFileOutput): H.264 and AAC in MP4 by default,
/// attached to the running session when recording starts and detached, finalized, when it stops, while the
/// session's other outputs run on without a gap. Crash-safe: the MP4 is written in fragments of
/// `movieFragmentInterval` (a kill loses at most that and the file plays as it is), and a Matroska sidecar
/// of the same encoded frames lets the next start recover all but the last few milliseconds.
public final class CaptureMovieFileOutput: CaptureFileOutput, @unchecked Sendable {
    // @unchecked Sendable: every var is behind `state`'s lock; the rest are lets of Sendable types.
    public enum FileType: String, Sendable, Codable {
        case mp4, matroska

        /// The type a movie file's name says: .mp4 or .mkv (any case); nil for any other.
        public init?(fileExtension: String) {
            switch fileExtension.lowercased() {
            case "mp4": self = .mp4
            case "mkv": self = .matroska
            default: return nil
            }
        }
    }

    /// What a recording does when the session's camera is interrupted (unplugged, held by another program,
    /// stalled) and comes back. Either way nothing captured is lost and the recording goes on by itself
    /// after recovery; an interrupted microphone never ends a recording (the session's silence fills the
    /// audio track, which stays in sync).
    public enum InterruptionBehavior: String, Sendable, Codable, CaseIterable {
        /// The default: one file on one timeline. The session fills the gap with black frames and silence,
        /// so the movie shows how long the camera was gone and plays on when it is back.
        case continueThroughGap
        /// AVFoundation's: the file is finalized at the interruption (the delegate hears
        /// `didFinishRecordingTo` with `CaptureError.sessionWasInterrupted(reason)`, whose
        /// `recordingFinishedSuccessfully` is true: the file is complete), and when the interruption ends the
        /// recording goes on in the next file beside it (clip.mp4, then clip-2.mp4, clip-3.mp4..., the first
        /// name no file has), announced by `didStartRecordingTo`. No filler frame enters either file.
        case finalizeAndResume
    }

    public struct Statistics: Sendable {
        /// Seconds recorded, pauses excluded.
        public var duration: Double
        public var frames: Int
        public var droppedFrames: Int
        public var audioBuffers: Int
        /// Where audio and video start in the file, seconds.
        public var firstVideoTime: Double?
        public var firstAudioTime: Double?
        /// Seconds of the file before the startRecording call (its pre-roll; 0 without one).
        public var preRollDuration: Double = 0
    }

    private let state = Locked(MovieOutputState())
    private let workQueue = DispatchQueue(label: "gcapture.movie")
    public let delegateQueue = DispatchQueue(label: "gcapture.movie.delegate")

    public override init() {}

    override class var turnsCapturedFrames: Bool { true }

    // MARK: Settings (take effect at the next recording)

    private var settings: MovieOutputSettings { state.withLock { $0.settings } }
    private func changeSettings(_ change: (inout MovieOutputSettings) -> Void) { state.withLock { change(&$0.settings) } }

    /// Seconds of movie written per fragment: the most a crash can cost before recovery. Default 1.
    public var movieFragmentInterval: TimeInterval {
        get { settings.fragmentInterval } set { changeSettings { $0.fragmentInterval = max(0.1, newValue) } }
    }
    public override var maxRecordedDuration: TimeInterval? { get { settings.maxDuration } set { changeSettings { $0.maxDuration = newValue } } }
    /// Bytes; the recording stops before the file would grow past it.
    public override var maxRecordedFileSize: Int64? { get { settings.maxFileSize } set { changeSettings { $0.maxFileSize = newValue } } }
    /// Bytes of free space to leave on the file's disk.
    public override var minFreeDiskSpaceLimit: Int64 { get { settings.minFreeDisk } set { changeSettings { $0.minFreeDisk = newValue } } }
    /// MP4 (H.264 + AAC, the default) or Matroska (H.264 + Opus).
    public var fileType: FileType { get { settings.fileType } set { changeSettings { $0.fileType = newValue } } }
    /// Whether a clean stop rewrites the fragmented MP4 as a plain one (a single index, what every editor
    /// expects), which copies the file once before the delegate hears it finished. Off, the fragmented file
    /// stays: it plays and seeks as well, with an index of its fragments at the end. Default true.
    public var defragmentsMovieOnStop: Bool { get { settings.defragments } set { changeSettings { $0.defragments = newValue } } }
    /// Seconds the copy into a plain MP4 at a clean stop (`defragmentsMovieOnStop`) may take; default 600.
    /// Past them it is abandoned and the complete fragmented movie stays, as with `defragmentsMovieOnStop`
    /// off: the copy of a long recording is gigabytes, and a stop that must end in time (a service being
    /// stopped) ends with a finished movie, not one to recover.
    public var defragmentTimeLimit: TimeInterval {
        get { settings.defragmentTimeLimit } set { changeSettings { $0.defragmentTimeLimit = max(0, newValue) } }
    }
    /// The GStreamer element that encodes H.264. nil (the default) picks a hardware encoder where GStreamer
    /// has one (vah264enc, vaapih264enc, nvh264enc, qsvh264enc, v4l2h264enc), else x264enc, else openh264enc.
    public var videoEncoder: String? { get { settings.videoEncoder } set { changeSettings { $0.videoEncoder = newValue } } }
    /// Video bits per second; nil picks one from the frame size (1080p: 8 Mbit/s), or takes a running
    /// stream's when the recording joins its encode (one encode for both; see StreamingLive).
    public var videoBitRate: Int? { get { settings.videoBitRate } set { changeSettings { $0.videoBitRate = newValue } } }
    /// What a recording does across an interruption of the session's camera: `.continueThroughGap` (the
    /// default: one file, the gap filled with black frames and silence) or `.finalizeAndResume`
    /// (AVFoundation's: the file ends at the interruption, the recording goes on in clip-2.mp4 after it).
    public var interruptionBehavior: InterruptionBehavior {
        get { settings.interruptionBehavior } set { changeSettings { $0.interruptionBehavior = newValue } }
    }

    /// Seconds of the session kept before every recording's start (default 0: none). While it is over 0 and
    /// the session runs, its video is encoded all the time (a key frame every second) and the last seconds of
    /// it, with the audio encoded as AAC, stay in memory (`preRollHolding`: about the bit rates × the seconds);
    /// a recording then begins at the newest key frame at least this long before its `startRecording` call,
    /// so the moment that made someone press record is in the file. Its audio is the ring's AAC, a Matroska
    /// file's too (without a pre-roll, Opus). The files after an interruption (`.finalizeAndResume`) begin
    /// live. Setting it while the session runs starts (or drops) the ring at once.
    public var preRollDuration: TimeInterval {
        get { settings.preRollDuration }
        set {
            let context = state.withLock { state -> OutputContext? in
                state.settings.preRollDuration = max(0, newValue.isFinite ? newValue : 0)
                return state.context
            }
            context?.onSessionQueue { graph in self.updatePreRoll(in: graph) }
        }
    }

    /// Timelapse: seconds of capture between the frames a recording keeps (nil, the default: every frame).
    /// Set, a recording keeps the camera's first frame, then the first of every following `timelapseInterval`
    /// of capture (by the session's running time, pauses excluded), and writes them `timelapseFrameRate` a
    /// second: ten minutes at 1 s make 600 frames, 20 s of movie at 30 fps. No audio track; the recording's
    /// own encoder (never one shared with a stream, never the pre-roll ring: no pre-roll is kept while it is
    /// set), which never sees the frames left out; every frame a key frame. In a timelapse
    /// `maxRecordedDuration` and `movieFragmentInterval` (what a crash may cost) count capture time, pauses
    /// excluded, as for any recording: "shoot for 8 hours"; `recordedDuration` and the statistics describe
    /// the file, so they count the movie's time. An interval shorter than the camera's frame interval keeps
    /// every frame. Takes effect at the next recording.
    public var timelapseInterval: TimeInterval? {
        get { settings.timelapseInterval }
        set {
            let context = state.withLock { state -> OutputContext? in
                state.settings.timelapseInterval = newValue.flatMap { $0.isFinite && $0 > 0 ? $0 : nil }
                return state.context
            }
            context?.onSessionQueue { graph in self.updatePreRoll(in: graph) }
        }
    }

    /// Frames a second of a timelapse's movie (see `timelapseInterval`). Default 30.
    public var timelapseFrameRate: Int {
        get { settings.timelapseFrameRate } set { changeSettings { $0.timelapseFrameRate = max(1, newValue) } }
    }

    /// What the pre-roll ring holds: H.264 video and AAC audio, by reference.
    public struct PreRollHolding: Sendable, Equatable, Codable {
        public var videoBytes = 0
        public var audioBytes = 0
        /// From the oldest frame kept to the end of the newest.
        public var seconds = 0.0
        public var bytes: Int { videoBytes + audioBytes }

        public init(videoBytes: Int = 0, audioBytes: Int = 0, seconds: Double = 0) {
            (self.videoBytes, self.audioBytes, self.seconds) = (videoBytes, audioBytes, seconds)
        }
    }

    /// What the pre-roll ring holds now (nothing while there is none).
    public var preRollHolding: PreRollHolding { state.withLock { $0.preRoll }?.holding ?? PreRollHolding() }

    /// On the session's queue: the ring as `preRollDuration` asks, for the graph running now (nil: none).
    private func updatePreRoll(in graph: (any OutputGraph)?) {
        // A timelapse takes no pre-roll: the ring would encode every frame all the time for nothing.
        let (wanted, current) = state.withLock {
            ($0.context == nil || $0.settings.timelapseInterval != nil ? 0 : $0.settings.preRollDuration, $0.preRoll)
        }
        let nanoseconds = UInt64((wanted * 1e9).rounded())
        if let current, current.duration == nanoseconds { return }
        if let current {
            state.withLock { $0.preRoll = nil }
            current.remove(from: graph)
        }
        guard nanoseconds > 0, let graph, graph.hasSource(.video) else { return }
        do throws(CaptureError) {
            let ring = try PreRollRing.start(duration: nanoseconds, for: self, in: graph, settings: settings)
            state.withLock { $0.preRoll = ring }
        } catch {
            Log.session.error("the movie output's pre-roll cannot start: \(error)")
        }
    }

    override func branchWillDetach() {
        state.withLock { $0.recording?.branch }?.endFeed()
    }

    // MARK: State

    /// True from startRecording until the recording's last file is finished, including the time between
    /// files of a `.finalizeAndResume` recording while the camera is interrupted.
    public override var isRecording: Bool { state.withLock { $0.recording != nil } }
    public override var isRecordingPaused: Bool { state.withLock { $0.recording?.isPaused ?? false } }
    /// The file being written; nil between the files of a recording that waits for the camera to come back.
    public override var outputFileURL: URL? { state.withLock { $0.recording?.waitingFor == nil ? $0.recording?.url : nil } }
    /// The element encoding the current recording's video (see `videoEncoder`).
    public var activeVideoEncoder: String? {
        state.withLock { $0.recording?.timeline == nil ? nil : $0.recording?.encoding.videoEncoder.factory }
    }
    /// Seconds recorded so far, pauses excluded.
    public override var recordedDuration: Double { Double(state.withLock { $0.recording?.timeline?.stats.duration } ?? 0) / 1e9 }
    /// Bytes written so far.
    public override var recordedFileSize: Int64 {
        guard let url = outputFileURL else { return 0 }
        return ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? 0
    }
    public var recordingStatistics: Statistics {
        let (stats, requested) = state.withLock { ($0.recording?.timeline?.stats, $0.recording?.requestRunningTime) }
        return Statistics(stats ?? RecordingTimeline.Statistics(), requestRunningTime: requested)
    }

    /// The current recording's branch (for tests that make it misbehave).
    var recordingBin: Bin? { state.withLock { $0.recording?.branch?.bin } }
    /// The element encoding the current recording's video: its own, or the one it shares.
    var recordingVideoEncoderElement: Element? {
        let branch = state.withLock { $0.recording?.branch }
        return branch?.sharedEncoder?.encoderElement ?? branch?.bin.element(named: VideoEncode.encoderName)
    }

    /// The statistics of the last recording that finished.
    public var lastStatistics: Statistics { state.withLock { $0.finishedStatistics } }

    override var drainsOnDetach: Bool { true }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        let preRoll = state.withLock {
            $0.context = context
            $0.videoInterruption = nil
            return $0.settings.preRollDuration > 0
        }
        // Joined a session that runs already; else the ring starts with the session.
        if preRoll { context.onSessionQueue { graph in self.updatePreRoll(in: graph) } }
    }

    override func sessionDidStartRunning(_ graph: any OutputGraph) { updatePreRoll(in: graph) }

    override func didDetach() { didDetach(drained: true) }

    override func didDetach(drained: Bool) {
        // The graph and its encoders are gone: the ring only lets go of what it kept.
        state.withLock { state in
            defer { state.preRoll = nil }
            state.context = nil
            return state.preRoll
        }?.remove(from: nil)
        // The graph tried to drain the recording before it stopped; only a complete drain finalized the file.
        complete(error: nil, drained: drained)
    }

    override func didFail(_ error: GStreamerError) {
        let folder = state.withLock { $0.recording?.url.deletingLastPathComponent().path } ?? "the movie's folder"
        let failure: CaptureError = switch error.resourceCode {
        case .noSpaceLeft?: .recordingFailed(reason: "the disk of \(folder) is full", underlying: nil)
        case .write?, .openWrite?: .recordingFailed(reason: "cannot write in \(folder): \(error.message)", underlying: nil)
        default: .recordingFailed(reason: "writing the movie failed", underlying: error)
        }
        complete(error: failure, drained: false)
    }

    /// A microphone that failed in a way the session could not call an interruption (it fills no gap for
    /// it): the recording ends, finalized up to that moment.
    override func audioSourceDidFail(_ device: CaptureDevice, error: GStreamerError) {
        stop(with: .audioDeviceFailed(device: device.description, underlying: error))
    }

    // MARK: Interruptions (the session's hooks, on its queue)

    override func sessionWasInterrupted(_ reason: CaptureSession.InterruptionReason) {
        // An interrupted microphone needs nothing here: the session's silence keeps the audio track going
        // and in step with the video, and its end-of-stream never reaches the file (see MovieRecordingBranch).
        guard reason.affectsVideo, let (context, fileID) = state.withLock({ $0.cameraWasInterrupted(reason) }) else { return }
        // The branch drains just after its timeline ended, so the session's filler stays out of the file.
        context.onSessionQueue { graph in
            let drained = graph?.detachBranch(of: self, drain: true) ?? false
            self.finishFileAtInterruption(fileID, reason: reason, drained: drained, graph: graph)
        }
    }

    override func sessionInterruptionEnded(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        let context = state.withLock { $0.cameraInterruptionEnded() }
        context?.onSessionQueue { graph in self.resumeIfCameraIsBack(in: graph) }
    }

    /// On the session queue, once the file cut at an interruption has drained: it is settled and the
    /// delegate hears why it ended; the recording then waits for the camera, or goes on at once when the
    /// interruption ended meanwhile. A stop asked for meanwhile ends the recording with this file.
    private func finishFileAtInterruption(_ fileID: UInt64, reason: CaptureSession.InterruptionReason, drained: Bool,
                                          graph: (any OutputGraph)?) {
        guard let file = state.withLock({ $0.fileWasCut(fileID, at: reason) }) else { return }
        finishFile(file, error: .sessionWasInterrupted(reason), drained: drained)
        resumeIfCameraIsBack(in: graph)
    }

    /// On the session queue: a recording waiting between files opens its next one if the camera delivers
    /// again (no interruption is going on).
    private func resumeIfCameraIsBack(in graph: (any OutputGraph)?) {
        guard state.withLock({ $0.mayOpenNextFile }) else { return }
        beginFile(in: graph)
    }

    /// The file after `url` for a recording resumed after an interruption: clip.mp4 → clip-`number`.mp4,
    /// or the first number after it that names neither a file nor a recovery sidecar, so that no file the
    /// app did not name is ever replaced.
    static func nextFileURL(after url: URL, number: Int) -> URL {
        let folder = url.deletingLastPathComponent(), base = url.deletingPathExtension().lastPathComponent
        let suffix = url.pathExtension.isEmpty ? "" : "." + url.pathExtension
        var number = max(2, number)
        while true {
            let candidate = folder.appendingPathComponent("\(base)-\(number)\(suffix)")
            if !FileManager.default.fileExists(atPath: candidate.path),
               !FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: candidate).path) { return candidate }
            number += 1
        }
    }

    // MARK: Recording

    /// Starts recording to `url`. Returns at once; the delegate hears when the recording really started, or
    /// why it could not. As in AVFoundation, a file already at `url` is never replaced: the recording fails
    /// with `CaptureError.fileAlreadyExists` (a recording a crash interrupted in that folder is recovered
    /// first and announced, and when it is that very file: `.recoveredTakeExists`); `removeMovie(at:)`
    /// clears the way when replacing is meant.
    public override func startRecording(to url: URL, recordingDelegate delegate: any CaptureFileOutputRecordingDelegate) {
        let (context, busy) = state.withLock { ($0.context, $0.recording != nil) }
        let fail: @Sendable (CaptureError) -> Void = { error in
            self.delegateQueue.async { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: error) }
        }
        if busy { return fail(.recordingFailed(reason: "already recording to \(outputFileURL?.path ?? "a file")", underlying: nil)) }
        guard let context else { return fail(.sessionNotRunning) }
        // The moment asked for, from the caller's side: a pre-roll counts back from it, and the ring keeps
        // what it needs for that until the recording attaches.
        let requestRunningTime = context.runningTime()
        if let requestRunningTime { state.withLock { $0.preRoll }?.pin(requestedAt: requestRunningTime) }
        do throws(CaptureError) { try PhotoProcessor.checkWritable(url) } catch { return fail(error) }
        let encoding: MovieEncoding
        do throws(CaptureError) { encoding = try settings.encoding() } catch { return fail(error) }
        let reserved: Bool = state.withLock {
            guard $0.recording == nil else { return false }
            $0.recording = MovieRecording(to: url, delegate: delegate, encoding: encoding,
                                          interruptionBehavior: $0.settings.interruptionBehavior)
            $0.recording?.requestRunningTime = requestRunningTime
            return true
        }
        guard reserved else { return fail(.recordingFailed(reason: "already recording", underlying: nil)) }
        workQueue.async {
            // Work a crash left behind in this folder is finished first, and told (see didRecoverMovieNotification);
            // it may take the very name asked for.
            if self.recoverInterruptedRecordings(before: url) {
                self.state.withLock { $0.recording = nil }
                return fail(.recoveredTakeExists(path: url.path))
            }
            context.onSessionQueue { graph in
                // Asked for while the camera is interrupted, a recording that keeps filler out of its files
                // begins when the camera is back.
                if !self.state.withLock({ $0.waitForCameraBeforeFirstFile() }) { self.beginFile(in: graph) }
            }
        }
    }

    /// On the session queue: opens the recording's next file (the first: the one asked for), attaches its
    /// branch and tells the delegate it started, or why it could not (which ends the recording).
    private func beginFile(in graph: (any OutputGraph)?) {
        guard let (requested, number) = state.withLock({ $0.recording.map { ($0.requestedURL, $0.filesStarted + 1) } }) else { return }
        let url = number == 1 ? requested : Self.nextFileURL(after: requested, number: number)
        if FileManager.default.fileExists(atPath: url.path) {
            let delegate = state.withLock { $0.takeRecording()?.delegate }
            workQueue.async {
                self.delegateQueue.async {
                    delegate?.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: CaptureError.fileAlreadyExists(path: url.path))
                }
            }
            return
        }
        guard let delegate = state.withLock({ $0.openFile(url, number: number) }) else { return }
        // Told through the queue that settles finished files, so that after a brief interruption the delegate
        // hears the previous file end before this one start.
        let tell: @Sendable (@escaping @Sendable () -> Void) -> Void = { callback in
            self.workQueue.async { self.delegateQueue.async(execute: callback) }
        }
        do throws(CaptureError) {
            guard let graph else { throw .sessionNotRunning }
            try attachRecording(to: graph, url: url)
            tell { delegate.fileOutput(self, didStartRecordingTo: url, from: [self.connection]) }
        } catch {
            let lock = state.withLock { $0.takeRecording()?.sidecarLock }
            // A recording that did not start leaves nothing: the sidecar this attempt created and
            // locked holds nothing, and neither does a movie no frame reached.
            if lock != nil { try? FileManager.default.removeItem(at: MovieRecovery.sidecarURL(for: url)) }
            MovieFiles.removeIfEmpty(url)
            tell { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: error) }
        }
    }

    /// Stops and finalizes the file; the delegate hears when it is complete.
    public override func stopRecording() { stop(with: nil) }

    /// Between the files of a recording that waits for the camera, pausing (and resuming) applies to the
    /// next file; the delegate hears of it with the last file's URL.
    public override func pauseRecording() { setPaused(true) }

    public override func resumeRecording() { setPaused(false) }

    private func setPaused(_ paused: Bool) {
        guard let (url, delegate) = state.withLock({ state -> (URL, any CaptureFileOutputRecordingDelegate)? in
            guard let current = state.recording, state.recording?.setPaused(paused) == true else { return nil }
            return (current.url, current.delegate)
        }) else { return }
        delegateQueue.async {
            if paused {
                delegate.fileOutput(self, didPauseRecordingTo: url, from: [self.connection])
            } else {
                delegate.fileOutput(self, didResumeRecordingTo: url, from: [self.connection])
            }
        }
    }

    /// On the session queue: builds the recording's branch and links it to the running tees.
    private func attachRecording(to graph: any OutputGraph, url: URL) throws(CaptureError) {
        guard let (recording, settings, preRoll) = state.withLock({ state in
            state.recording.map { ($0, state.settings, $0.encoding.timelapse == nil ? state.preRoll : nil) }
        }) else {
            throw .sessionNotRunning
        }
        let branch = try MovieRecordingBranch(
            recording: url, for: self, in: graph, encoding: recording.encoding, settings: settings,
            dropsFillerFrames: recording.interruptionBehavior == .finalizeAndResume, paused: recording.pausedAcrossFiles, preRoll: preRoll,
            sidecarLocked: { lock in state.withLock { $0.recording?.sidecarLock = lock } },
            onLimit: { [weak self] reason in self?.stop(with: reason) })
        state.withLock { $0.recording?.attach(branch) }
        try graph.attachBranch(branch.bin, of: self, inputs: branch.inputs, encodedVideo: branch.sharedEncoder)
        // Only the first file reaches back; one after an interruption would begin with the filler.
        branch.startFeed(requestedAt: recording.filesStarted <= 1 ? recording.requestRunningTime : nil)
        startMonitoring(url: url)
    }

    // MARK: Limits

    private func startMonitoring(url: URL) {
        let monitor = RecordingLimitMonitor(
            folder: url.deletingLastPathComponent(), queue: workQueue,
            read: { [weak self] in self?.limitReading() }, reached: { [weak self] limit in self?.stop(with: limit) })
        let owned = state.withLock { state -> Bool in
            state.recording?.monitor = monitor
            return state.recording != nil
        }
        monitor.start()
        // A recording that ended meanwhile cannot cancel it: it would tick for the rest of the process.
        if !owned { monitor.cancel() }
    }

    private func limitReading() -> RecordingLimitMonitor.Reading? {
        let (settings, encoding) = state.withLock { ($0.settings, $0.recording?.encoding) }
        guard let encoding else { return nil }
        // A timelapse's duration limit counts capture time, which only its timeline sees (frame by frame;
        // the session's filler keeps frames coming while the camera is away); recordedDuration is the movie's.
        return .init(maxDuration: encoding.timelapse == nil ? settings.maxDuration : nil, minFreeDisk: settings.minFreeDisk, encoding: encoding,
                     recordedDuration: recordedDuration)
    }

    // MARK: Finishing

    private func stop(with error: CaptureError?) {
        guard let found = state.withLock({ $0.beginStop() }) else { return }
        if let unstarted = found.unstarted { endUnstarted(unstarted, error: error) }
        guard found.drainsFile else { return }
        guard let context = found.context else { return complete(error: error, drained: false) }
        // A stop asked for ends the file at the moment it was asked, whatever the session's queue is busy with
        // before it gets to the drain: the frames the camera took until then still enter (they may be a second
        // late on a slow machine), and none after. A limit or an error ends it where the frames are. Then the
        // audio, which lags the video, is let in up to the last frame's end before the drain (off the session's
        // queue, which must not wait for either).
        let timeline = found.timeline, withAudio = found.withAudio
        let stopTime = error == nil ? context.runningTime() : nil
        if let stopTime { timeline?.end(after: stopTime) } else { timeline?.end() }
        workQueue.async {
            if stopTime != nil { timeline?.waitForVideoToReachEnd(idle: .milliseconds(500), timeout: .seconds(3)) }
            if withAudio { timeline?.waitForAudioToReachVideoEnd(timeout: .milliseconds(500)) }
            context.onSessionQueue { graph in
                let drained = graph?.detachBranch(of: self, drain: true) ?? false
                self.complete(error: error, drained: drained)
            }
        }
    }

    /// Ends the recording once: settles the files (off the session's queue) and tells the delegate.
    private func complete(error: CaptureError?, drained: Bool) {
        guard let finished = state.withLock({ $0.takeRecording() }) else { return }
        // Between files nothing is open: the delegate has heard the last file end already.
        guard finished.waitingFor == nil else {
            if finished.filesStarted == 0 { endUnstarted(finished, error: error) }
            return
        }
        finishFile(finished, error: error, drained: drained)
    }

    /// A recording asked for while the camera was interrupted ended before its first file began: its
    /// delegate hears that no frame was recorded (the one answer to its startRecording).
    private func endUnstarted(_ recording: MovieRecording, error: CaptureError?) {
        let url = recording.requestedURL, delegate = recording.delegate
        let outcome = error.flatMap { $0.recordingFinishedSuccessfully ? nil : $0 } ?? .noFramesRecorded
        workQueue.async { self.delegateQueue.async { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: outcome) } }
    }

    /// Settles the recording's current file (off the session's queue) and tells the delegate it finished.
    private func finishFile(_ finished: MovieRecording, error: CaptureError?, drained: Bool) {
        finished.monitor?.cancel()
        let stats = finished.timeline?.stats ?? RecordingTimeline.Statistics()
        let defragmentWithin = state.withLock { state -> TimeInterval? in
            state.finishedStatistics = Statistics(stats, requestRunningTime: finished.filesStarted <= 1 ? finished.requestRunningTime : nil)
            return state.settings.defragments ? state.settings.defragmentTimeLimit : nil
        }
        // The next recording's start waits on this queue, so it never mistakes these files for a crash's.
        let url = finished.url, encoding = finished.encoding, delegate = finished.delegate, lock = finished.sidecarLock
        workQueue.async {
            // Held until the files are settled, so that no one recovers them meanwhile.
            let outcome = withExtendedLifetime(lock) {
                Self.settleFiles(of: url, encoding: encoding, stats: stats, error: error, drained: drained, defragmentWithin: defragmentWithin)
            }
            self.delegateQueue.async { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: outcome) }
            // The recording's encoders, muxers and the copy have all been freed by now.
            ProcessHeap.release()
        }
    }
}
