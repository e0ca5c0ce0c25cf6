import Dispatch
import Foundation
import GStreamerKit

/// Records movies from a running session (AVCaptureMovieFileOutput): H.264 and AAC in MP4 by default,
/// attached to the running session when recording starts and detached, finalized, when it stops, while the
/// session's other outputs run on without a gap. Crash-safe: the MP4 is written in fragments of
/// `movieFragmentInterval` (a kill loses at most that and the file plays as it is), and a Matroska sidecar
/// of the same encoded frames lets the next start recover all but the last few milliseconds.
public final class CaptureMovieFileOutput: CaptureFileOutput, @unchecked Sendable {
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
    }

    /// A recording, from startRecording to its end; with `.finalizeAndResume` it spans several files, and
    /// what describes the file being written (url to sidecarLock) is replaced at each.
    private struct Recording {
        /// The file startRecording named; the files after interruptions are named after it.
        let requestedURL: URL
        var url: URL
        let delegate: any CaptureFileOutputRecordingDelegate
        var encoding: MovieEncoding
        let interruptionBehavior: InterruptionBehavior
        var timeline: RecordingTimeline?
        var bin: Bin?
        /// The encoder the file's video comes from when it is shared (else it is in `bin`).
        var sharedEncoder: SharedVideoEncoder?
        var monitor: RecordingLimitMonitor?
        var sidecarLock: SidecarLock?
        var stopping = false
        /// Files begun so far.
        var filesStarted = 0
        /// Identifies the file being written, so that work queued for one file never touches the next.
        var fileID: UInt64 = 0
        /// The file is being finalized at a video interruption (its branch not yet drained).
        var splitting = false
        /// Between files: no file is open until the interruption ends.
        var waitingFor: CaptureSession.InterruptionReason?
        /// The file ended at the interruption was paused: so is the next.
        var pausedAcrossFiles = false
    }

    private let lock = NSLock()
    private var context: OutputContext?
    private var recording: Recording?
    private var settings = (fragmentInterval: 1.0, maxDuration: Double?.none, maxFileSize: Int64?.none,
                            minFreeDisk: Int64(0), fileType: FileType.mp4, videoBitRate: Int?.none, defragments: true,
                            videoEncoder: String?.none, interruptionBehavior: InterruptionBehavior.continueThroughGap)
    /// The session's camera is interrupted now (set and cleared by the session's hooks, on its queue).
    private var videoInterruption: CaptureSession.InterruptionReason?
    private var fileCounter: UInt64 = 0
    private let workQueue = DispatchQueue(label: "gcapture.movie")
    public let delegateQueue = DispatchQueue(label: "gcapture.movie.delegate")

    public override init() {}

    override class var turnsCapturedFrames: Bool { true }

    private func locked<R>(_ body: () throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Settings (take effect at the next recording)

    /// Seconds of movie written per fragment: the most a crash can cost before recovery. Default 1.
    public var movieFragmentInterval: TimeInterval {
        get { locked { settings.fragmentInterval } } set { locked { settings.fragmentInterval = max(0.1, newValue) } }
    }
    public override var maxRecordedDuration: TimeInterval? { get { locked { settings.maxDuration } } set { locked { settings.maxDuration = newValue } } }
    /// Bytes; the recording stops before the file would grow past it.
    public override var maxRecordedFileSize: Int64? { get { locked { settings.maxFileSize } } set { locked { settings.maxFileSize = newValue } } }
    /// Bytes of free space to leave on the file's disk.
    public override var minFreeDiskSpaceLimit: Int64 { get { locked { settings.minFreeDisk } } set { locked { settings.minFreeDisk = newValue } } }
    /// MP4 (H.264 + AAC, the default) or Matroska (H.264 + Opus).
    public var fileType: FileType { get { locked { settings.fileType } } set { locked { settings.fileType = newValue } } }
    /// Whether a clean stop rewrites the fragmented MP4 as a plain one (a single index, what every editor
    /// expects), which copies the file once before the delegate hears it finished. Off, the fragmented file
    /// stays: it plays and seeks as well, with an index of its fragments at the end. Default true.
    public var defragmentsMovieOnStop: Bool { get { locked { settings.defragments } } set { locked { settings.defragments = newValue } } }
    /// The GStreamer element that encodes H.264. nil (the default) picks a hardware encoder where GStreamer
    /// has one (vah264enc, vaapih264enc, nvh264enc, qsvh264enc, v4l2h264enc), else x264enc, else openh264enc.
    public var videoEncoder: String? { get { locked { settings.videoEncoder } } set { locked { settings.videoEncoder = newValue } } }
    /// Video bits per second; nil picks one from the frame size (1080p: 8 Mbit/s), or takes a running
    /// stream's when the recording joins its encode (one encode for both; see StreamingLive).
    public var videoBitRate: Int? { get { locked { settings.videoBitRate } } set { locked { settings.videoBitRate = newValue } } }
    /// What a recording does across an interruption of the session's camera: `.continueThroughGap` (the
    /// default: one file, the gap filled with black frames and silence) or `.finalizeAndResume`
    /// (AVFoundation's: the file ends at the interruption, the recording goes on in clip-2.mp4 after it).
    public var interruptionBehavior: InterruptionBehavior {
        get { locked { settings.interruptionBehavior } } set { locked { settings.interruptionBehavior = newValue } }
    }

    // MARK: State

    /// True from startRecording until the recording's last file is finished, including the time between
    /// files of a `.finalizeAndResume` recording while the camera is interrupted.
    public override var isRecording: Bool { locked { recording != nil } }
    public override var isRecordingPaused: Bool {
        locked { recording?.timeline?.isPaused ?? (recording?.waitingFor != nil && recording?.pausedAcrossFiles == true) }
    }
    /// The file being written; nil between the files of a recording that waits for the camera to come back.
    public override var outputFileURL: URL? { locked { recording?.waitingFor == nil ? recording?.url : nil } }
    /// The element encoding the current recording's video (see `videoEncoder`).
    public var activeVideoEncoder: String? { locked { recording?.timeline == nil ? nil : recording?.encoding.videoEncoder.factory } }
    /// Seconds recorded so far, pauses excluded.
    public override var recordedDuration: Double { Double(locked { recording?.timeline?.stats.duration } ?? 0) / 1e9 }
    /// Bytes written so far.
    public override var recordedFileSize: Int64 {
        guard let url = outputFileURL else { return 0 }
        return ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? 0
    }
    public var recordingStatistics: Statistics {
        Self.statistics(locked { recording?.timeline?.stats } ?? RecordingTimeline.Statistics())
    }

    /// The current recording's branch (for tests that make it misbehave).
    var recordingBin: Bin? { locked { recording?.bin } }
    /// The element encoding the current recording's video: its own, or the one it shares.
    var recordingVideoEncoderElement: Element? {
        locked { recording?.sharedEncoder?.encoderElement ?? recording?.bin?.element(named: VideoEncode.encoderName) }
    }

    /// The statistics of the last recording that finished.
    public var lastStatistics: Statistics { locked { finishedStatistics } }
    private var finishedStatistics = CaptureMovieFileOutput.statistics(RecordingTimeline.Statistics())

    private static func statistics(_ stats: RecordingTimeline.Statistics) -> Statistics {
        Statistics(duration: Double(stats.duration) / 1e9, frames: stats.frames, droppedFrames: stats.droppedFrames, audioBuffers: stats.audioBuffers,
                          firstVideoTime: stats.firstVideoTime.map { Double($0) / 1e9 },
                          firstAudioTime: stats.firstAudioTime.map { Double($0) / 1e9 })
    }

    override var drainsOnDetach: Bool { true }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        locked {
            self.context = context
            videoInterruption = nil
        }
    }

    override func didDetach() { didDetach(drained: true) }

    override func didDetach(drained: Bool) {
        locked { context = nil }
        // The graph tried to drain the recording before it stopped; only a complete drain finalized the file.
        complete(error: nil, drained: drained)
    }

    override func didFail(_ error: GStreamerError) {
        let folder = locked { recording?.url.deletingLastPathComponent().path } ?? "the movie's folder"
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
        // and in step with the video, and its end-of-stream never reaches the file (see attachRecording).
        guard reason.affectsVideo else { return }
        let split: (OutputContext, UInt64)? = locked {
            videoInterruption = reason
            guard let current = recording, current.interruptionBehavior == .finalizeAndResume, !current.stopping,
                  !current.splitting, current.waitingFor == nil, let timeline = current.timeline, let context else { return nil }
            // Frames from now on are the session's filler, not this file's; the branch drains just after.
            timeline.end()
            recording?.splitting = true
            recording?.pausedAcrossFiles = timeline.isPaused
            recording?.monitor?.cancel()
            return (context, current.fileID)
        }
        guard let (context, fileID) = split else { return }
        context.onSessionQueue { graph in
            let drained = graph?.detachBranch(of: self, drain: true) ?? false
            self.finishFileAtInterruption(fileID, reason: reason, drained: drained, graph: graph)
        }
    }

    override func sessionInterruptionEnded(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        let context: OutputContext? = locked {
            videoInterruption = nil
            return recording?.waitingFor != nil ? self.context : nil
        }
        context?.onSessionQueue { graph in self.resumeIfCameraIsBack(in: graph) }
    }

    /// On the session queue, once the file cut at an interruption has drained: it is settled and the
    /// delegate hears why it ended; the recording then waits for the camera, or goes on at once when the
    /// interruption ended meanwhile. A stop asked for meanwhile ends the recording with this file.
    private func finishFileAtInterruption(_ fileID: UInt64, reason: CaptureSession.InterruptionReason, drained: Bool,
                                          graph: SessionGraph?) {
        guard let file = locked({ () -> Recording? in
            guard let current = recording, current.fileID == fileID, current.splitting else { return nil }
            if current.stopping {
                recording = nil
            } else {
                recording?.splitting = false
                recording?.waitingFor = reason
                recording?.timeline = nil
                recording?.bin = nil
                recording?.sharedEncoder = nil
                recording?.monitor = nil
                recording?.sidecarLock = nil
            }
            return current
        }) else { return }
        finishFile(file, error: .sessionWasInterrupted(reason), drained: drained)
        resumeIfCameraIsBack(in: graph)
    }

    /// On the session queue: a recording waiting between files opens its next one if the camera delivers
    /// again (no interruption is going on).
    private func resumeIfCameraIsBack(in graph: SessionGraph?) {
        guard locked({ recording?.waitingFor != nil && recording?.stopping == false && videoInterruption == nil }) else { return }
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
        let (context, busy) = locked { (self.context, recording != nil) }
        let fail: @Sendable (CaptureError) -> Void = { error in
            self.delegateQueue.async { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: error) }
        }
        if busy { return fail(.recordingFailed(reason: "already recording to \(outputFileURL?.path ?? "a file")", underlying: nil)) }
        guard let context else { return fail(.sessionNotRunning) }
        do throws(CaptureError) { try PhotoProcessor.checkWritable(url) } catch { return fail(error) }
        let encoding: MovieEncoding
        do throws(CaptureError) { encoding = try encodingSettings() } catch { return fail(error) }
        let reserved: Bool = locked {
            guard recording == nil else { return false }
            recording = Recording(requestedURL: url, url: url, delegate: delegate, encoding: encoding,
                                  interruptionBehavior: settings.interruptionBehavior)
            return true
        }
        guard reserved else { return fail(.recordingFailed(reason: "already recording", underlying: nil)) }
        workQueue.async {
            // Work a crash left behind in this folder is finished first, and told (see didRecoverMovieNotification);
            // it may take the very name asked for.
            if self.recoverInterruptedRecordings(before: url) {
                self.locked { self.recording = nil }
                return fail(.recoveredTakeExists(path: url.path))
            }
            context.onSessionQueue { graph in
                // Asked for while the camera is interrupted, a recording that keeps filler out of its files
                // begins when the camera is back.
                let waits: Bool = self.locked {
                    guard let reason = self.videoInterruption, self.recording?.interruptionBehavior == .finalizeAndResume,
                          self.recording?.filesStarted == 0 else { return false }
                    self.recording?.waitingFor = reason
                    return true
                }
                if !waits { self.beginFile(in: graph) }
            }
        }
    }

    /// On the session queue: opens the recording's next file (the first: the one asked for), attaches its
    /// branch and tells the delegate it started, or why it could not (which ends the recording).
    private func beginFile(in graph: SessionGraph?) {
        guard let (requested, number) = locked({ recording.map { ($0.requestedURL, $0.filesStarted + 1) } }) else { return }
        let url = number == 1 ? requested : Self.nextFileURL(after: requested, number: number)
        if FileManager.default.fileExists(atPath: url.path) {
            let delegate = locked { () -> (any CaptureFileOutputRecordingDelegate)? in
                defer { recording = nil }
                return recording?.delegate
            }
            workQueue.async {
                self.delegateQueue.async {
                    delegate?.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: CaptureError.fileAlreadyExists(path: url.path))
                }
            }
            return
        }
        guard let delegate = locked({ () -> (any CaptureFileOutputRecordingDelegate)? in
            guard recording != nil else { return nil }
            fileCounter += 1
            recording?.url = url
            recording?.fileID = fileCounter
            recording?.filesStarted = number
            recording?.waitingFor = nil
            return recording?.delegate
        }) else { return }
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
            let lock = locked { () -> SidecarLock? in
                defer { recording = nil }
                return recording?.sidecarLock
            }
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
        guard let (url, delegate) = locked({ () -> (URL, any CaptureFileOutputRecordingDelegate)? in
            guard let current = recording else { return nil }
            if let timeline = current.timeline {
                if paused { timeline.pause() } else { timeline.resume() }
            } else if current.waitingFor != nil {
                recording?.pausedAcrossFiles = paused
            } else {
                return nil
            }
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

    private func encodingSettings() throws(CaptureError) -> MovieEncoding {
        let settings = locked { self.settings }
        return MovieEncoding(container: settings.fileType == .mp4 ? .mp4 : .matroska, videoBitRate: settings.videoBitRate ?? 0,
                             frameRate: 30, fragmentInterval: settings.fragmentInterval, withAudio: false,
                             videoEncoder: try H264Encoder.choose(settings.videoEncoder))
    }

    /// The recording's bin, with its encoder configured when it has its own.
    private func makeRecordingBin(_ encoding: inout MovieEncoding, in graph: SessionGraph) throws(CaptureError) -> Bin {
        let asked = encoding
        let (bin, encoder) = try asked.videoEncoder.withSoftwareFallback(videoEncoder == nil) { encoder in
            var attempt = asked
            attempt.videoEncoder = encoder
            let bin = try graph.makeBin(try attempt.description(), for: self, ghostUnlinkedPads: false)
            try attempt.videoEncode.configureEncoder(in: bin)
            return bin
        }
        encoding.videoEncoder = encoder
        return bin
    }

    /// On the session queue: builds the recording's branch and links it to the running tees.
    private func attachRecording(to graph: SessionGraph, url: URL) throws(CaptureError) {
        guard var encoding = locked({ recording?.encoding }) else { throw .sessionNotRunning }
        let selection = graph.videoSource?.selection
        encoding.withAudio = graph.hasSource(.audio)
        encoding.frameRate = Int((selection?.frameRate.doubleValue ?? 30).rounded())
        encoding.rotation = Int(connection.videoRotationAngle)
        encoding.mirrored = connection.mirrorsCapturedFrames
        encoding.cameraPixelFormat = selection?.format.pixelFormat
        encoding.frameSize = selection.map { ($0.format.width, $0.format.height) }
        let bitRateIsDefault = encoding.videoBitRate == 0
        if bitRateIsDefault {
            encoding.videoBitRate = MovieEncoding.defaultBitRate(width: selection?.format.width ?? 1280, height: selection?.format.height ?? 720)
        }
        let (limits, behavior, paused) = locked { (settings, recording?.interruptionBehavior, recording?.pausedAcrossFiles ?? false) }
        encoding.sharesEncoder = encoding.canShareEncoder(dropsFillerFrames: behavior == .finalizeAndResume)
        try MovieFiles.checkCreatable(url)
        let bin = try makeRecordingBin(&encoding, in: graph)
        var inputs: [MediaType: String] = [:]
        var pads: [Pad] = []
        do {
            try bin.element(named: "file")?.set("location", url.path)
            if let sidecar = bin.element(named: "sidecar_file") {
                let sidecarURL = MovieRecovery.sidecarURL(for: url)
                let lock: SidecarLock
                do throws(SidecarLock.Failure) { lock = try SidecarLock(on: sidecarURL) } catch {
                    switch error {
                    case .held: throw CaptureError.recordingFailed(reason: "\(url.path) is being recorded already", underlying: nil)
                    case .cannotCreate(let code): throw MovieFiles.cannotWrite(url, code)
                    }
                }
                locked { recording?.sidecarLock = lock }
                try sidecar.set("location", sidecarURL.path)
            }
            if let file = bin.element(named: "file")?.staticPad("sink") {
                MP4DisplayMatrix.apply(rotation: encoding.displayRotation, toMoviesPassing: file)
            }
            let exposed = try EncodingInputs(exposedOn: bin)
            exposed.decoupleFromUpstream()
            (pads, inputs) = (exposed.pads, exposed.names)
        } catch let error as CaptureError {
            throw error
        } catch {
            throw .configurationFailed(reason: "cannot set up the recording", underlying: error as? GStreamerError)
        }
        let timeline = RecordingTimeline(
            limits: .init(maxDuration: limits.maxDuration.map { UInt64(($0 * 1e9).rounded()) }, maxFileSize: limits.maxFileSize),
            size: MovieSizeEstimate(fragmentDuration: UInt64(encoding.fragmentInterval * 1e9), withAudio: encoding.withAudio),
            dropsFillerFrames: behavior == .finalizeAndResume,
            onLimit: { [weak self] reason in self?.stop(with: reason) })
        if paused { timeline.pause() }
        // Frames from a shared encoder arrive as H.264 in the encoder's time: the file starts (and resumes)
        // at a key frame, and their running time is what the audio's is compared with.
        let encoder = encoding.sharesEncoder
            ? try graph.sharedVideoEncoder(for: VideoEncodeRequest(encode: encoding.videoEncode, acceptsAnyBitRate: bitRateIsDefault,
                                                                   longestKeyInterval: encoding.longestSharedKeyInterval,
                                                                   mayFallBackToSoftware: videoEncoder == nil))
            : nil
        if let encoder {
            // A running encode joined (a stream's) may have another rate and key interval than this file's own.
            encoding.videoEncoder = encoder.activeEncoder
            encoding.videoBitRate = encoder.encode.bitRate
            let gate = KeyFrameGate(encoder: encoder, queue: bin.element(named: "video_in"))
            pads.first?.addProbe(.buffer) { info in
                guard gate.admits(isDeltaFrame: info.isDeltaFrame) else { return .drop }
                guard let shift = timeline.admitVideo(info.bufferRunningTime, duration: info.bufferDuration,
                                                      isKeyFrame: !info.isDeltaFrame) else {
                    if timeline.isResuming { encoder.requestKeyFrame() }
                    return .drop
                }
                info.shiftBufferTimestamps(earlierBy: shift)
                return .ok
            }
        } else {
            pads.first?.addProbe(.buffer) { info in
                guard let shift = timeline.admitVideo(info.bufferPTS, duration: info.bufferDuration, isFiller: info.isGapBuffer) else {
                    return .drop
                }
                info.shiftBufferTimestamps(earlierBy: shift)
                return .ok
            }
        }
        if pads.count > 1 {
            pads[1].addProbe(.buffer) { info in
                guard let admitted = timeline.admitAudio(info.bufferPTS, duration: info.bufferDuration) else { return .drop }
                info.trimBufferStart(by: admitted.trim, frameBytes: SourceBuilder.audioFrameBytes)
                info.extendBufferStartWithSilence(by: admitted.silence, frameBytes: SourceBuilder.audioFrameBytes)
                info.shiftBufferTimestamps(earlierBy: admitted.shift)
                return .ok
            }
        }
        // Past the leaky input queue and the encoders: what is counted and sized here is what the files get.
        bin.element(named: MovieEncoding.encodedVideo)?.staticPad("sink")?.addProbe(.buffer) { info in
            timeline.muxVideo(info.bufferPTS, duration: info.bufferDuration, bytes: info.bufferSize ?? 0,
                              isKeyFrame: !info.isDeltaFrame) ? .ok : .drop
        }
        bin.element(named: MovieEncoding.encodedAudio)?.staticPad("sink")?.addProbe(.buffer) { info in
            timeline.muxAudio(duration: info.bufferDuration, bytes: info.bufferSize ?? 0) ? .ok : .drop
        }
        locked {
            recording?.encoding = encoding
            recording?.timeline = timeline
            recording?.bin = bin
            recording?.sharedEncoder = encoder
        }
        try graph.attachBranch(bin, of: self, inputs: inputs, encodedVideo: encoder)
        startMonitoring(url: url)
    }

    // MARK: Limits

    private func startMonitoring(url: URL) {
        let monitor = RecordingLimitMonitor(
            folder: url.deletingLastPathComponent(), queue: workQueue,
            read: { [weak self] in self?.limitReading() }, reached: { [weak self] limit in self?.stop(with: limit) })
        locked { recording?.monitor = monitor }
        monitor.start()
    }

    private func limitReading() -> RecordingLimitMonitor.Reading? {
        let (limits, encoding) = locked { (settings, recording?.encoding) }
        guard let encoding else { return nil }
        return .init(maxDuration: limits.maxDuration, minFreeDisk: limits.minFreeDisk, encoding: encoding,
                     recordedDuration: recordedDuration)
    }

    // MARK: Finishing

    private func stop(with error: CaptureError?) {
        let (context, proceed, unstarted, timeline, withAudio) = locked { () -> (OutputContext?, Bool, Recording?, RecordingTimeline?, Bool) in
            guard let current = recording, !current.stopping else { return (nil, false, nil, nil, false) }
            recording?.stopping = true
            recording?.monitor?.cancel()
            // Between files nothing is open (the delegate has heard the last file end): the recording just
            // ends. A file being cut at an interruption ends the recording once it is finalized.
            if current.waitingFor != nil { recording = nil }
            return (self.context, current.waitingFor == nil && !current.splitting,
                    current.waitingFor != nil && current.filesStarted == 0 ? current : nil, current.timeline, current.encoding.withAudio)
        }
        if let unstarted { endUnstarted(unstarted, error: error) }
        guard proceed else { return }
        guard let context else { return complete(error: error, drained: false) }
        // No frame enters from now on, whatever the session's queue is busy with before it gets to the drain;
        // the audio, which lags the video, is let in up to the last frame's end before the drain (off the
        // session's queue, which must not wait for it).
        timeline?.end()
        workQueue.async {
            if withAudio { timeline?.waitForAudioToReachVideoEnd(timeout: .milliseconds(500)) }
            context.onSessionQueue { graph in
                let drained = graph?.detachBranch(of: self, drain: true) ?? false
                self.complete(error: error, drained: drained)
            }
        }
    }

    /// Ends the recording once: settles the files (off the session's queue) and tells the delegate.
    private func complete(error: CaptureError?, drained: Bool) {
        guard let finished = locked({ () -> Recording? in
            defer { recording = nil }
            return recording
        }) else { return }
        // Between files nothing is open: the delegate has heard the last file end already.
        guard finished.waitingFor == nil else {
            if finished.filesStarted == 0 { endUnstarted(finished, error: error) }
            return
        }
        finishFile(finished, error: error, drained: drained)
    }

    /// A recording asked for while the camera was interrupted ended before its first file began: its
    /// delegate hears that no frame was recorded (the one answer to its startRecording).
    private func endUnstarted(_ recording: Recording, error: CaptureError?) {
        let url = recording.requestedURL, delegate = recording.delegate
        let outcome = error.flatMap { $0.recordingFinishedSuccessfully ? nil : $0 } ?? .noFramesRecorded
        workQueue.async { self.delegateQueue.async { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: outcome) } }
    }

    /// Settles the recording's current file (off the session's queue) and tells the delegate it finished.
    private func finishFile(_ finished: Recording, error: CaptureError?, drained: Bool) {
        finished.monitor?.cancel()
        let stats = finished.timeline?.stats ?? RecordingTimeline.Statistics()
        let defragments = locked { () -> Bool in
            finishedStatistics = Self.statistics(stats)
            return settings.defragments
        }
        // The next recording's start waits on this queue, so it never mistakes these files for a crash's.
        let url = finished.url, encoding = finished.encoding, delegate = finished.delegate, lock = finished.sidecarLock
        workQueue.async {
            // Held until the files are settled, so that no one recovers them meanwhile.
            let outcome = withExtendedLifetime(lock) {
                Self.settleFiles(of: url, encoding: encoding, stats: stats, error: error, drained: drained, defragment: defragments)
            }
            self.delegateQueue.async { delegate.fileOutput(self, didFinishRecordingTo: url, from: [self.connection], error: outcome) }
            // The recording's encoders, muxers and the copy have all been freed by now.
            ProcessHeap.release()
        }
    }
}
