import ArgumentParser
import Dispatch
import Foundation
import GCapture
import GCaptureSupport

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a movie with audio: H.264 and AAC in MP4, crash-safe.",
        discussion: """
        The movie is written in fragments of one second, so a crash or power cut costs at most that and the \
        file plays as it is; the next recording in the same folder recovers it to within milliseconds and says so \
        (a `recovered` line). A finished movie is synced to disk before it is reported finished.

        When the camera is interrupted (unplugged, taken by another program, stalled), the recording goes on \
        through the gap in the same file with black frames and silence (--on-interruption continue), or the \
        file is finalized at the interruption and recording goes on in the next file beside it once the \
        camera is back: clip.mp4, clip-2.mp4, ... (--on-interruption split). Each finished file is printed. \
        A file already at --output is never replaced unless --overwrite says so.

        A timelapse (--timelapse SECONDS) keeps one camera frame every SECONDS of capture and plays them \
        --timelapse-frame-rate a second (default 30): an hour at --timelapse 2 makes 1800 frames, a minute of \
        movie. It records no audio, and --duration counts capture time ("shoot for an hour"), not the movie's.

        \(StopSignals.helpText)

        Examples:
          gcapture record --output clip.mp4 --duration 10
          gcapture record --camera /dev/video0 --microphone none --output clip.mp4 \\
              --max-size 50000000 --json
          gcapture record --camera /dev/video0 --output clip.mp4 \\
              --on-interruption split
          gcapture record --camera /dev/video0 --camera /dev/video1 --output clip.mp4
              (clip-video0.mp4 and clip-video1.mp4, recorded at once)
          gcapture record --camera /dev/video0 --camera /dev/video1 --layout pip \\
              --output room.mp4
          gcapture record --output sky.mp4 --timelapse 5 --duration 3600
          gcapture record --output door.mp4 --pre-roll 5 --duration 20
              (Enter starts it; the movie begins 5 s before)
        """)

    @OptionGroup var logging: LoggingOptions

    @OptionGroup var device: SeveralCameraOptions<HighestQuality>

    @Option(help: DeviceChoice.microphoneHelp(none: "for a silent movie"))
    var microphone: String?

    @Option(help: "Where to write the movie (.mp4, or .mkv for Matroska with Opus).")
    var output: String

    static let durationRange = NumberRange(0.1...86_400.0, "seconds")
    // Any positive size: one no frame fits in is the movie output's to refuse, in its own words.
    static let sizeRange = NumberRange(Int64(1)...1_000_000_000_000, "bytes")

    @Option(parsing: .unconditional, help: "Seconds to record, \(durationRange.accepted); without it, until Ctrl-C or another signal.",
            transform: durationRange.parser)
    var duration: Double?

    @Option(parsing: .unconditional, help: "Stop before the file grows past this many bytes, \(sizeRange.accepted).", transform: sizeRange.parser)
    var maxSize: Int64?

    @Option(parsing: .unconditional, help: "Degrees clockwise players turn the picture to show it upright: \(NumberRanges.rotation.accepted) (the MP4's display matrix; pixels are turned for .mkv; default: 0).",
            transform: NumberRanges.rotation.parser)
    var rotation: Int = 0

    @Option(help: "What a camera interruption does: `continue` (one file, the gap filled with black frames and silence) or `split` (the file ends at the interruption, recording goes on in clip-2.mp4 ... once the camera is back).")
    var onInterruption: InterruptionChoice = .continue

    @Option(parsing: .unconditional,
            help: "Wait for a trigger (Enter on stdin, or SIGUSR2) and record from this many seconds before it, \(NumberRanges.preRoll.accepted): meanwhile the last seconds stay in memory, encoded. --duration then counts from the trigger.",
            transform: NumberRanges.preRoll.parser)
    var preRoll: Double?

    static let timelapseRange = NumberRange(0.02...86_400.0, "seconds")
    static let timelapseFrameRateRange = NumberRange(1...120, "frames a second")

    @Option(parsing: .unconditional, help: "Record a timelapse: one frame every this many seconds of capture, \(timelapseRange.accepted); no audio.",
            transform: timelapseRange.parser)
    var timelapse: Double?

    @Option(parsing: .unconditional, help: "Frames a second the timelapse plays at, \(timelapseFrameRateRange.accepted) (default: 30).",
            transform: timelapseFrameRateRange.parser)
    var timelapseFrameRate: Int?

    @Option(help: "With several --camera: one movie of them all, `side-by-side` (left to right, each at the first camera's size) or `pip` (the first camera fills the picture, the others inset in its bottom-right corner).")
    var layout: CaptureMultiCamSession.CompositeLayout?

    @Flag(help: MovieDestination.overwriteHelp)
    var overwrite = false

    @Flag(help: "Print one JSON object per line: recovered (a take an earlier crash interrupted), recordingStarted, progress, recordingFinished (one per file).")
    var json = false

    @Option(help: ArgumentHelp("Put each finished movie in this album of its folder's photo library (made when missing; see `gcapture library`).",
                               valueName: "name"))
    var album: String?

    func validate() throws {
        try AlbumFiling.validate(album)
        if let layout, device.camera.count < 2 {
            throw ValidationError("--layout \(layout.rawValue) arranges several cameras in one movie: give --camera once for each")
        }
        if timelapseFrameRate != nil, timelapse == nil {
            throw ValidationError("--timelapse-frame-rate is the rate of a timelapse: give --timelapse SECONDS too")
        }
        if timelapse != nil, let microphone, microphone != "none" {
            throw ValidationError("a timelapse (--timelapse) records no audio: leave out --microphone \(microphone)")
        }
        if timelapse != nil, preRoll != nil {
            throw ValidationError("a timelapse (--timelapse) keeps no pre-roll: leave out --pre-roll")
        }
    }

    func run() async throws {
        // A file size limit of the process (ulimit -f) must end the recording with an error, not kill us.
        signal(SIGXFSZ, SIG_IGN)
        let trigger = preRoll.map { _ in TriggerWait() }
        StopSignals.shared.install(actions: trigger.map { [SIGUSR2: $0.signalAction] } ?? [:])
        let destination = try MovieDestination(output, option: "--output")
        let cameraChoices = try device.cameraChoices()
        // Several cameras: one movie each, named after its camera; with --layout one movie of them all.
        let groups = layout != nil || cameraChoices.count == 1 ? [cameraChoices] : cameraChoices.map { [$0] }
        let destinations = groups.count == 1 ? [destination] : groups.map { destination.forCamera($0[0].device) }
        for destination in destinations { try destination.makeRoom(overwrite: overwrite, option: "--output") }
        // A timelapse has no audio track: no microphone is opened for it.
        let microphoneChoice = timelapse == nil ? try DeviceChoice.microphone(microphone) : nil
        let microphone = microphoneChoice?.device
        let takes = zip(groups, destinations).map { cameras, destination in
            Take(cameras: cameras, url: destination.url, movie: makeMovie(fileType: destination.fileType), several: groups.count > 1)
        }
        let capture = try await CommandCapture.start(name: "gcapture-record", takes.map { ($0.cameras.map(\.device), $0.movie) },
                                                     layout: layout, microphone: microphone, preset: device.preset, json: json)

        let events = EventPrinter(json: json)
        let filing = AlbumFiling(title: album, folder: destination.url.deletingLastPathComponent())
        let recoveries = takes.map { RecoveryReporter($0.movie, json: json) }
        defer { withExtendedLifetime(recoveries) {} }
        if let trigger, let preRoll {
            events.emit(["event": "waitingForTrigger", "preRoll": preRoll],
                        text: "waiting for a trigger (Enter, or SIGUSR2); the recording will begin \(Self.seconds(preRoll)) s before it")
            guard case .triggered(let source) = await trigger.wait() else {
                await capture.stop()
                events.emit(["event": "stoppedBeforeTrigger", "signal": StopSignals.shared.receivedName ?? NSNull()],
                            text: "stopped before any trigger: nothing recorded")
                return
            }
            events.emit(["event": "triggered", "source": source], text: "triggered (\(source))")
        }
        for take in takes { take.movie.startRecording(to: take.url, recordingDelegate: take.recorder) }
        let movies = takes.map(\.movie)
        StopSignals.shared.onStop { _ in for movie in movies { movie.stopRecording() } }
        if preRoll != nil, let duration {
            Task {
                try? await Task.sleep(for: .milliseconds(Int(duration * 1000)))
                for movie in movies { movie.stopRecording() }
            }
        }

        var following = takes
        while following.contains(where: { !$0.ended }) {
            try await Task.sleep(for: .milliseconds(200))
            for index in following.indices where !following[index].ended {
                await follow(&following[index], microphone: microphoneChoice, events: events, filing: filing)
            }
        }
        await capture.stop()
        let lasts = following.compactMap(\.last)
        if let path = lasts.lazy.compactMap({ if case .recoveredTakeExists(let path)? = $0.error { path } else { nil } }).first {
            throw ValidationError("\(path) is a take recovered from an interrupted recording; give another --output or --overwrite")
        }
        if let error = lasts.lazy.compactMap(\.error).first(where: { !$0.recordingFinishedSuccessfully }) { throw error }
        if let failure = filing?.failure { throw failure }
    }

    /// A movie output with the command's settings.
    private func makeMovie(fileType: CaptureMovieFileOutput.FileType) -> CaptureMovieFileOutput {
        let movie = CaptureMovieFileOutput()
        movie.maxRecordedFileSize = maxSize
        // With a pre-roll the file is longer than what --duration counts (from the trigger): a timer stops it.
        movie.maxRecordedDuration = preRoll == nil ? duration : nil
        movie.preRollDuration = preRoll ?? 0
        movie.fileType = fileType
        movie.connection.videoRotationAngle = Double(rotation)
        movie.interruptionBehavior = onInterruption.behavior
        movie.timelapseInterval = timelapse
        if let timelapseFrameRate { movie.timelapseFrameRate = timelapseFrameRate }
        return movie
    }

    /// One camera's movie as it is recorded: what its delegate said so far.
    struct Take {
        /// Its camera, or the cameras of its composite picture (--layout).
        let cameras: [DeviceChoice]
        let url: URL
        let movie: CaptureMovieFileOutput
        /// Whether the command records several cameras (events then say which camera).
        let several: Bool
        let recorder = RecordingObserver()
        /// The recording's last word: a file that ended for any reason but an interruption (after which the
        /// recording goes on in the next file), or none at all when it was stopped between files.
        var last: (url: URL, error: CaptureError?)?
        var ended = false
        var filesStarted = 0
        var idlePolls = 0
    }

    /// Reports what a take's movie said since the last poll, and whether its recording ended.
    private func follow(_ take: inout Take, microphone: DeviceChoice?, events: EventPrinter, filing: AlbumFiling?) async {
        let movie = take.movie
        let cameraNames = take.cameras.map(\.device.description).joined(separator: ", ")
        let cameraField: [String: Any] = take.several ? ["camera": cameraNames] : [:]
        for event in take.recorder.takeEvents() {
            switch event {
            case .started(let file):
                take.filesStarted += 1
                if take.filesStarted == 1 {
                    events.emit(["event": "recordingStarted", "path": file.path, "camera": cameraNames,
                                 "microphone": microphone?.device.description ?? "none", "videoEncoder": movie.activeVideoEncoder ?? NSNull()]
                                    .merging(DeviceChoice.startedFields(take.cameras + [microphone])) { $1 },
                                text: "recording \(file.path) from \(take.cameras.map(\.device.localizedName).joined(separator: " and "))"
                                    + (microphone.map { " and \($0.device.localizedName)" } ?? ""))
                } else {
                    events.emit(["event": "recordingStarted", "path": file.path, "file": take.filesStarted].merging(cameraField) { $1 },
                                text: "the camera is back: recording goes on in \(file.path)")
                }
            case .finished(let file, let error):
                take.last = (file, error)
                report(finished: file, error: error, stats: movie.lastStatistics, extra: cameraField, events: events)
                // A movie that ended on an error is finalized up to it, and is the library's as well.
                if let filing, FileManager.default.fileExists(atPath: file.path) { await filing.file(file, events: events) }
                if case .sessionWasInterrupted? = error {} else { take.ended = true }
            }
        }
        // Stopped between files (the camera still away): no callback is due, the last file has been reported.
        // Two quiet polls in a row, since a recording that ends tells its delegate just after.
        take.idlePolls = !movie.isRecording && take.recorder.isIdle ? take.idlePolls + 1 : 0
        if take.idlePolls >= 2 { take.ended = true }
        // Between the stop and the delegate's answer the file is being finalized: nothing to report.
        if !take.ended, take.filesStarted > 0, movie.outputFileURL != nil {
            events.progress(movie, camera: take.several ? take.cameras[0].device : nil)
        }
    }

    /// 2.5 rather than 2.500000.
    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// One line (or JSON object) per finished file, with what the recording's statistics say of it.
    private func report(finished file: URL, error: CaptureError?, stats: CaptureMovieFileOutput.Statistics, extra: [String: Any],
                        events: EventPrinter) {
        let succeeded = error == nil || error!.recordingFinishedSuccessfully
        let signal = StopSignals.shared.receivedName
        var finishedEvent: [String: Any] = ["event": "recordingFinished", "path": file.path, "duration": stats.duration,
                                            "frames": stats.frames, "dropped": stats.droppedFrames, "preRoll": stats.preRollDuration,
                                            "error": error.map { "\($0)" } ?? NSNull()]
        if case .sessionWasInterrupted(let reason)? = error { finishedEvent["interruption"] = reason.rawValue }
        if let signal { finishedEvent["stoppedBy"] = signal }
        finishedEvent.merge(extra) { $1 }
        let figures = "\(String(format: "%.2f", stats.duration)) s, \(stats.frames) frames, \(stats.droppedFrames) dropped"
        let why = (error.map { " (\($0))" } ?? "") + (signal.map { " (stopped by \($0))" } ?? "")
        events.emit(finishedEvent, text: (succeeded ? "finished" : "stopped") + " \(file.path): " + figures + why)
    }
}

extension CaptureMultiCamSession.CompositeLayout: ExpressibleByArgument {}

/// `--on-interruption`: the movie output's InterruptionBehavior in a word.
enum InterruptionChoice: String, CaseIterable, ExpressibleByArgument {
    case `continue`, split

    var behavior: CaptureMovieFileOutput.InterruptionBehavior {
        switch self {
        case .continue: .continueThroughGap
        case .split: .finalizeAndResume
        }
    }
}

/// Collects what the movie output tells its delegate, in order: a recording split at interruptions
/// starts and finishes several files.
final class RecordingObserver: CaptureFileOutputRecordingDelegate, Sendable {
    enum Event {
        case started(URL)
        case finished(URL, CaptureError?)
    }

    private let state = Locked((pending: [Event](), open: 0))

    /// The events since the last call.
    func takeEvents() -> [Event] {
        state.withLock { state in
            defer { state.pending = [] }
            return state.pending
        }
    }

    /// No file started is waiting for its end, and nothing is left to take.
    var isIdle: Bool { state.withLock { $0.open == 0 && $0.pending.isEmpty } }

    /// A file started whose end the delegate has not been told yet (it is being written or settled).
    var hasFileOpen: Bool { state.withLock { $0.open > 0 } }

    /// Takes the events since the last call: why the last file among them that finished did not finish
    /// successfully, or nil.
    func takeFailure() -> CaptureError? {
        for case .finished(_, let error) in takeEvents().reversed() {
            guard let error, !error.recordingFinishedSuccessfully else { return nil }
            return error
        }
        return nil
    }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        state.withLock { state in
            state.open += 1
            state.pending.append(.started(fileURL))
        }
    }
    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        let failure = error.map { $0 as? CaptureError ?? .recordingFailed(reason: "\($0)", underlying: nil) }
        state.withLock { state in
            state.open = max(0, state.open - 1)
            state.pending.append(.finished(outputFileURL, failure))
        }
    }
}

extension EventPrinter {
    /// A recording's progress: a JSON event, or the status line (with several cameras, each camera's in turn).
    func progress(_ movie: CaptureMovieFileOutput, camera: CaptureDevice? = nil) {
        let stats = movie.recordingStatistics
        let elapsed = movie.recordedDuration
        let size = movie.recordedFileSize
        let fps = elapsed > 0 ? Double(stats.frames) / elapsed : 0
        if json {
            var object: [String: Any] = ["event": "progress", "elapsed": elapsed, "frames": stats.frames, "fps": fps,
                                         "dropped": stats.droppedFrames, "bytes": size]
            if let camera { object["camera"] = camera.description }
            emit(object, text: "")
        } else {
            Console.progress((camera.map { "\($0.localizedName): " } ?? "")
                             + String(format: "%6.1f s  %5.1f fps  %d dropped  %.1f MB", elapsed, fps, stats.droppedFrames, Double(size) / 1e6))
        }
    }
}
