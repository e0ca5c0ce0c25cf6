import ArgumentParser
import Dispatch
import Foundation
import GCapture

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a movie with audio: H.264 and AAC in MP4, crash-safe.",
        discussion: """
        The movie is written in fragments of one second, so a crash or power cut costs at most that and the
        file plays as it is; the next recording in the same folder recovers it to within milliseconds.

        \(StopSignals.helpText)

        Examples:
          gcapture record --output clip.mp4 --duration 10
          gcapture record --camera /dev/video0 --microphone none --output clip.mp4 --max-size 50000000 --json
        """)

    @OptionGroup var logging: LoggingOptions

    @Option(help: "Camera id (see `gcapture devices`); default: the first real camera, else `test`.")
    var camera: String?

    @Option(help: "Microphone id, `none` for a silent movie; default: the first real microphone, else `test-microphone`.")
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

    @Option(help: "Session preset.")
    var preset: CaptureSession.Preset = .high

    @Option(parsing: .unconditional, help: "Degrees clockwise players turn the picture to show it upright: \(NumberRanges.rotation.accepted) (the MP4's display matrix; pixels are turned for .mkv; default: 0).",
            transform: NumberRanges.rotation.parser)
    var rotation: Int = 0

    @Option(parsing: .unconditional, help: "Sensor noise of the test camera in ± 8-bit steps, \(NumberRanges.noise.accepted) (default: 0).", transform: NumberRanges.noise.parser)
    var noise: Int = 0

    @Flag(help: "Print one JSON object per line: recordingStarted, progress, recordingFinished.")
    var json = false

    func run() async throws {
        // A file size limit of the process (ulimit -f) must end the recording with an error, not kill us.
        signal(SIGXFSZ, SIG_IGN)
        StopSignals.shared.install()
        let url = URL(fileURLWithPath: output).standardizedFileURL
        let cameraChoice = try DeviceChoice.camera(camera, noise: noise)
        let microphoneChoice = try DeviceChoice.microphone(microphone)
        let camera = cameraChoice.device, microphone = microphoneChoice?.device
        let movie = CaptureMovieFileOutput()
        movie.maxRecordedFileSize = maxSize
        movie.maxRecordedDuration = duration
        movie.fileType = url.pathExtension.lowercased() == "mkv" ? .matroska : .mp4
        movie.connection.videoRotationAngle = Double(rotation)

        let session = CaptureSession(name: "gcapture-record")
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: camera))
        if let microphone { try session.add(CaptureDeviceInput(device: microphone)) }
        try session.add(movie)
        session.sessionPreset = preset
        try session.commitAndWait()
        let pressure = PressureReport.follow(session, json: json)
        defer { pressure.cancel() }
        try await session.start()

        let events = EventPrinter(json: json)
        let recorder = RecordingObserver()
        movie.startRecording(to: url, recordingDelegate: recorder)
        StopSignals.shared.onStop { _ in movie.stopRecording() }

        var finished: (URL, CaptureError?)?
        var announced = false
        while finished == nil {
            try await Task.sleep(for: .milliseconds(200))
            if !announced, recorder.started != nil {
                announced = true
                events.emit(["event": "recordingStarted", "path": url.path, "camera": camera.description,
                             "microphone": microphone?.description ?? "none", "videoEncoder": movie.activeVideoEncoder ?? NSNull()]
                                .merging(DeviceChoice.startedFields([cameraChoice, microphoneChoice])) { $1 },
                            text: "recording \(url.path) from \(camera.localizedName)" + (microphone.map { " and \($0.localizedName)" } ?? ""))
            }
            finished = recorder.finished
            // Between the stop and the delegate's answer the file is being finalized: nothing to report.
            if finished == nil, announced, movie.isRecording { events.progress(movie) }
        }
        await session.stop()
        let stats = movie.lastStatistics
        let error = finished?.1
        let succeeded = error == nil || error!.recordingFinishedSuccessfully
        let signal = StopSignals.shared.receivedName
        var finishedEvent: [String: Any] = ["event": "recordingFinished", "path": url.path, "duration": stats.duration,
                                            "frames": stats.frames, "dropped": stats.droppedFrames,
                                            "error": error.map { "\($0)" } ?? NSNull()]
        if let signal { finishedEvent["stoppedBy"] = signal }
        events.emit(finishedEvent,
                    text: "\n" + (succeeded ? "finished" : "stopped") + " \(url.path): \(String(format: "%.2f", stats.duration)) s, "
                        + "\(stats.frames) frames, \(stats.droppedFrames) dropped" + (error.map { " (\($0))" } ?? "")
                        + (signal.map { " (stopped by \($0))" } ?? ""))
        if let error, !succeeded { throw error }
    }
}

/// Collects what the movie output tells its delegate.
final class RecordingObserver: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var startedURL: URL?
    private var result: (URL, CaptureError?)?
    var started: URL? { lock.withLock { startedURL } }
    var finished: (URL, CaptureError?)? { lock.withLock { result } }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        lock.withLock { startedURL = fileURL }
    }
    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        let failure = error.map { $0 as? CaptureError ?? .recordingFailed(reason: "\($0)", underlying: nil) }
        lock.withLock { result = (outputFileURL, failure) }
    }
}

extension EventPrinter {
    func progress(_ movie: CaptureMovieFileOutput) {
        let stats = movie.recordingStatistics
        let elapsed = movie.recordedDuration
        let size = movie.recordedFileSize
        let fps = elapsed > 0 ? Double(stats.frames) / elapsed : 0
        if json {
            emit(["event": "progress", "elapsed": elapsed, "frames": stats.frames, "fps": fps,
                  "dropped": stats.droppedFrames, "bytes": size], text: "")
        } else {
            Console.write(String(format: "\r%6.1f s  %5.1f fps  %d dropped  %.1f MB", elapsed, fps, stats.droppedFrames,
                                 Double(size) / 1e6), terminator: "")
        }
    }
}
