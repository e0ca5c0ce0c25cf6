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
        Ctrl-C or SIGTERM stops the recording and finalizes the file.

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

    @Option(help: "Seconds to record; without it, until Ctrl-C or SIGTERM.")
    var duration: Double?

    @Option(help: "Stop before the file grows past this many bytes.")
    var maxSize: Int64?

    @Option(help: "Session preset.")
    var preset: CaptureSession.Preset = .high

    @Option(help: "Degrees clockwise players turn the picture to show it upright: 0, 90, 180, 270 (the MP4's display matrix; pixels are turned for .mkv).")
    var rotation: Int = 0

    @Option(help: "Sensor noise of the test camera, ± 8-bit steps.")
    var noise: Int = 0

    @Flag(help: "Print one JSON object per line: recordingStarted, progress, recordingFinished.")
    var json = false

    func validate() throws {
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        try RotationChoice.validate(rotation)
    }

    func run() async throws {
        // A file size limit of the process (ulimit -f) must end the recording with an error, not kill us.
        signal(SIGXFSZ, SIG_IGN)
        let url = URL(fileURLWithPath: output).standardizedFileURL
        let camera = try CameraChoice.device(camera, noise: noise)
        let microphone: CaptureDevice? = switch self.microphone {
        case "none": nil
        case let id?: try CaptureDevice.requireDevice(withUniqueID: id)
        case nil: CaptureDevice.default(for: .audio) ?? .testMicrophone
        }
        let movie = CaptureMovieFileOutput()
        movie.maxRecordedFileSize = maxSize
        movie.maxRecordedDuration = duration
        movie.fileType = url.pathExtension.lowercased() == "mkv" ? .matroska : .mp4
        movie.connection.videoRotationAngle = Double(rotation)

        let session = CaptureSession(name: "gcapture-record")
        session.beginConfiguration()
        try session.addInput(CaptureDeviceInput(device: camera))
        if let microphone { try session.addInput(CaptureDeviceInput(device: microphone)) }
        try session.addOutput(movie)
        session.sessionPreset = preset
        try session.commitConfiguration()
        try await session.start()

        let events = EventPrinter(json: json)
        let recorder = RecordingObserver()
        movie.startRecording(to: url, recordingDelegate: recorder)
        let stopSignals = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
            source.setEventHandler { movie.stopRecording() }
            source.resume()
            return source
        }
        defer { stopSignals.forEach { $0.cancel() } }

        var finished: (URL, CaptureError?)?
        var announced = false
        while finished == nil {
            try await Task.sleep(for: .milliseconds(200))
            if !announced, recorder.started != nil {
                announced = true
                events.emit(["event": "recordingStarted", "path": url.path, "camera": camera.description,
                             "microphone": microphone?.description ?? "none", "videoEncoder": movie.activeVideoEncoder ?? NSNull()],
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
        events.emit(["event": "recordingFinished", "path": url.path, "duration": stats.duration, "frames": stats.frames,
                     "dropped": stats.droppedFrames, "error": error.map { "\($0)" } ?? NSNull()],
                    text: "\n" + (succeeded ? "finished" : "stopped") + " \(url.path): \(String(format: "%.2f", stats.duration)) s, "
                        + "\(stats.frames) frames, \(stats.droppedFrames) dropped" + (error.map { " (\($0))" } ?? ""))
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

    func fileOutput(_ output: CaptureMovieFileOutput, didStartRecordingTo fileURL: URL) {
        lock.withLock { startedURL = fileURL }
    }
    func fileOutput(_ output: CaptureMovieFileOutput, didFinishRecordingTo outputFileURL: URL, error: CaptureError?) {
        lock.withLock { result = (outputFileURL, error) }
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
            print(String(format: "\r%6.1f s  %5.1f fps  %d dropped  %.1f MB", elapsed, fps, stats.droppedFrames,
                         Double(size) / 1e6), terminator: "")
            fflush(nil)
        }
    }
}
