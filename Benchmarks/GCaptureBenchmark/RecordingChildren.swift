import Foundation
import GCapture
import GStreamerKit
import Synchronization

// The recording benchmark's contestants: the engine recording in a child mode of this program, and the
// command lines of gst-launch-1.0 and ffmpeg that record the same thing.

/// What every contestant records: 1080p30 H.264 at the engine's bit rate with AAC audio, in fragmented MP4.
///
/// The engine's graph for a CaptureMovieFileOutput on the test camera and test microphone (SourceBuilder,
/// SessionGraph, MovieEncoding):
///
///     videotestsrc ! capsfilter(NV12) ! tee ! queue(leaky, 1 s) ! videoconvert ! NV12 ! x264enc ! h264parse
///         ! tee ! queue ! h264parse ! tee ┬ queue ! mp4mux ! filesink    (the encoder is the session's: SharedVideoEncoder)
///                                         └ queue ! matroskamux ! filesink          (the crash-recovery sidecar)
///     audiotestsrc ! audioconvert ! audioresample ! capsfilter(S16LE 48 kHz 2 ch) ! tee ! queue(leaky, 1 s)
///         ! audioconvert ! audioresample ! capsfilter ! voaacenc ! aacparse ! tee ┬ queue ! mp4mux
///                                                                                  └ queue ! matroskamux
///
/// (videoconvert passes the camera's NV12 through: x264enc takes it. Converting to I420, as the engine did
/// before, cost ~6% of the recording's CPU.) The plain gst-launch-1.0 pipeline is what one would write by
/// hand for the same source and encoders: the NV12 frames straight into x264enc, no sidecar. A second one
/// adds the sidecar, so the difference shows what crash safety costs.
enum RecordingContestants {
    /// The engine's default for 1080p (MovieEncoding.defaultBitRate: 4 bits per pixel per second), set
    /// explicitly on the engine's output so that all contestants encode at the same rate.
    static let videoBitRate = Contestants.width * Contestants.height * 4
    static let audioBitRate = 128_000
    static let audioRate = 48_000
    /// audiotestsrc's default buffer: 1024 samples.
    static let samplesPerAudioBuffer = 1024

    /// The test microphone (SourceBuilder): a live 440 Hz sine, in the format every engine source delivers.
    static let audioSource = "audiotestsrc is-live=true wave=sine freq=440 volume=0.3"
    static let audioCaps = "audio/x-raw,format=S16LE,rate=\(audioRate),channels=2,layout=interleaved"
    /// MovieEncoding's x264enc settings (VideoEncode: a key frame every second and none at scene cuts, Main
    /// profile; x264enc's default rate control is CBR with a 600 ms VBV buffer).
    static let videoEncoder = "x264enc speed-preset=veryfast tune=zerolatency bitrate=\(videoBitRate / 1000) "
        + "key-int-max=\(Contestants.frameRate) bframes=0 option-string=scenecut=0 ! video/x-h264,profile=main "
        + "! h264parse ! video/x-h264,stream-format=avc,alignment=au"
    static let audioEncoder = "voaacenc bitrate=\(audioBitRate) ! aacparse"
    static let muxer = "mp4mux name=mux fragment-duration=1000"

    static func frames(seconds: Double) -> Int { Int((seconds * Double(Contestants.frameRate)).rounded()) }

    /// gst-launch-1.0 recording `seconds` to `file` (num-buffers on both sources: it ends at EOS, finalized),
    /// with the engine's Matroska sidecar when `sidecar` is given.
    /// `engineGraph`: with the engine's tee and bounded leaky queue (VideoEncode.inputQueueBytes, 1 s) between
    /// each source and its encoder, as the session graph has them.
    static func gstLaunchDescription(seconds: Double, file: URL, sidecar: URL?, engineGraph: Bool = false) -> String {
        let audioBuffers = Int((seconds * Double(audioRate) / Double(samplesPerAudioBuffer)).rounded(.up))
        let decoupling = engineGraph
            ? "tee ! queue leaky=downstream max-size-buffers=0 max-size-bytes=\(16 << 20) max-size-time=1000000000 ! " : ""
        let video = "\(Contestants.source) num-buffers=\(frames(seconds: seconds)) ! \(Contestants.caps) ! \(decoupling)"
            + (engineGraph ? "videoconvert ! video/x-raw,format=NV12 ! " : "") + videoEncoder
        let audio = "\(audioSource) num-buffers=\(audioBuffers) ! \(audioCaps) ! \(decoupling)\(audioEncoder)"
        let sink = "\(muxer) ! filesink location=\(file.path)"
        guard let sidecar else {
            return "\(video) ! queue ! mux.video_0 \(audio) ! queue ! mux.audio_0 \(sink)"
        }
        return "\(video) ! tee name=vt ! queue ! mux.video_0 vt. ! queue ! sidecar.video_0 "
            + "\(audio) ! tee name=at ! queue ! mux.audio_0 at. ! queue ! sidecar.audio_0 "
            + "\(sink) matroskamux name=sidecar ! filesink location=\(sidecar.path)"
    }

    /// What the engine does at a clean stop, in gst-launch-1.0: the fragmented movie's streams copied, not
    /// re-encoded, into a plain MP4 with one index (MovieRemux's graph: qtdemux, a multiqueue reading about a
    /// second ahead, mp4mux). What gst-launch cannot do is MovieRemux's segment start moved to zero: without
    /// it mp4mux sometimes clips the first key frame, and the copy's first second cannot be decoded (270 of
    /// 300 frames for ffprobe in 1 of 8 runs here; MovieRemux copied the same file whole). The benchmark then
    /// warns of that round's frames, and the per-video-second ratio against this side reads low.
    static func remuxDescription(of file: URL, to plain: URL) -> String {
        "filesrc location=\(file.path) ! qtdemux name=demux mp4mux name=mux ! filesink location=\(plain.path) "
            + "multiqueue name=ahead max-size-buffers=32 max-size-bytes=0 max-size-time=0 "
            + "demux.video_0 ! ahead.sink_0 ahead.src_0 ! h264parse ! mux.video_0 "
            + "demux.audio_0 ! ahead.sink_1 ahead.src_1 ! aacparse ! mux.audio_0"
    }

    /// ffmpeg 5.1 with libx264 at the same settings (CBR as x264enc's: maxrate = bitrate, 600 ms buffer) and its
    /// own AAC encoder, fragments at every key frame (1 s). Its source differs: lavfi's testsrc2, paced to real
    /// time by -re, and a mono sine upmixed to stereo.
    static func ffmpegArguments(seconds: Double, file: URL) -> [String] {
        let rate = "\(videoBitRate / 1000)k"
        return ["-nostdin", "-hide_banner", "-loglevel", "error", "-y",
                "-re", "-f", "lavfi", "-i", "testsrc2=size=\(Contestants.width)x\(Contestants.height):rate=\(Contestants.frameRate)",
                "-re", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=\(audioRate)",
                "-t", String(format: "%g", seconds), "-map", "0:v", "-map", "1:a",
                "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency", "-pix_fmt", "yuv420p",
                "-b:v", rate, "-maxrate", rate, "-bufsize", "\(videoBitRate * 6 / 10 / 1000)k",
                "-g", String(Contestants.frameRate), "-sc_threshold", "0", "-profile:v", "main", "-bf", "0",
                "-c:a", "aac", "-b:a", String(audioBitRate), "-ac", "2",
                "-movflags", "+frag_keyframe+empty_moov+default_base_moof", file.path]
    }

    static var ffmpegCommand: String {
        "ffmpeg " + ffmpegArguments(seconds: 10, file: URL(fileURLWithPath: "/tmp/movie.mp4")).joined(separator: " ")
    }
}

/// What the engine's recording child prints (one JSON line).
struct RecordingChildReport: Codable {
    /// The movie output's own account (lastStatistics).
    var movieFrames: Int
    var movieDroppedFrames: Int
    var movieDuration: Double
    var movieAudioBuffers: Int
    /// The error the delegate heard, if any.
    var recordingError: String?
    /// With the other outputs: frames the CaptureVideoDataOutput delivered over the whole session, the frame
    /// slots missing between its first and last timestamp, and those its stream discarded for a late reader.
    var frameOutputFrames: Int?
    var frameOutputMissing: Int?
    var frameOutputDropped: Int?
    var photosRequested: Int?
    var photosDelivered: Int?
    var firstPhotoError: String?
    /// The child's VmHWM when done (KiB).
    var peakRSSKiB: Int?
    /// Whether libswiftCore was loaded as a shared library (a build without --static-swift-stdlib).
    var swiftRuntimeShared: Bool?
}

/// `gcapture-bench child record --seconds S --file F [--with-outputs]`: the engine records `seconds` of the
/// test camera at 1080p30 and the test microphone with a CaptureMovieFileOutput; with --with-outputs a
/// CapturePhotoOutput takes a photo every second and a CaptureVideoDataOutput's frames are read meanwhile.
enum RecordingChild {
    static let childMode = "record"
    /// The recording stops once this many frames are in; the last half second is watched closely.
    static let closeWatchSeconds = 0.5

    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 1,
              let file = arguments.value(after: "--file") else {
            printError("child \(childMode): needs --seconds (over 1) and --file")
            return 2
        }
        return await ChildProcess.serve(childMode) {
            var report = try await record(seconds: seconds, to: URL(fileURLWithPath: file),
                                          withOutputs: arguments.contains("--with-outputs"))
            report.peakRSSKiB = ChildProcess.highWaterMarkKiB("/proc/self/status")
            report.swiftRuntimeShared = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8))
                .map { $0.contains("/libswiftCore.so") }
            return report
        }
    }

    private static func record(seconds: Double, to url: URL, withOutputs: Bool) async throws -> RecordingChildReport {
        let session = CaptureSession(name: "bench-record")
        let movie = CaptureMovieFileOutput()
        movie.videoBitRate = RecordingContestants.videoBitRate
        let photos = CapturePhotoOutput(), frameOutput = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: Contestants.makeTestCamera()))
        try session.add(CaptureDeviceInput(device: CaptureDevice.testMicrophone))
        try session.add(movie)
        if withOutputs {
            try session.add(photos)
            try session.add(frameOutput)
        }
        session.sessionPreset = .hd1920x1080
        try session.commitAndWait()

        let frames = FrameTimes()
        // Read only when the output is on the session: otherwise its stream would never end.
        let stream = withOutputs ? frameOutput.sampleBuffers() : nil
        let consumer = Task {
            guard let stream else { return }
            for await frame in stream { frames.add(frame) }
        }
        try await session.start()
        let events = MovieEvents()
        var iterator = events.stream.makeAsyncIterator()
        movie.startRecording(to: url, recordingDelegate: events)
        var outcome = await iterator.next()
        var shotsTaken: (requested: Int, delivered: Int, firstError: String?)?
        if case .started = outcome {
            let shots = withOutputs ? Task { await takePhotos(photos, every: 1, for: seconds, directory: url.deletingLastPathComponent()) } : nil
            // A recording that loses frames stops a second late at most, short of its count.
            let deadline = ContinuousClock.now + .seconds(seconds + 1)
            try await Task.sleep(for: .seconds(seconds - closeWatchSeconds))
            let expected = RecordingContestants.frames(seconds: seconds)
            while movie.isRecording, movie.recordingStatistics.frames < expected, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(2))
            }
            movie.stopRecording()
            outcome = await iterator.next()
            shotsTaken = await shots?.value
        }
        await session.stop()
        await consumer.value  // the stream ends when the session stops

        guard case .finished(let error) = outcome else { throw BenchmarkError.setup("the recording did not finish") }
        let stats = movie.lastStatistics
        var report = RecordingChildReport(movieFrames: stats.frames, movieDroppedFrames: stats.droppedFrames,
                                          movieDuration: stats.duration, movieAudioBuffers: stats.audioBuffers,
                                          recordingError: error.map { "\($0)" })
        if withOutputs {
            let timestamps = frames.timestamps
            let window = PhotoBenchmark.missingFrames(timestamps, from: timestamps.min() ?? 0, to: timestamps.max() ?? 0,
                                                      intervalNanoseconds: 1e9 / Double(Contestants.frameRate))
            report.frameOutputFrames = timestamps.count
            report.frameOutputMissing = window.missing
            report.frameOutputDropped = frameOutput.droppedFrameCount
            (report.photosRequested, report.photosDelivered, report.firstPhotoError) =
                (shotsTaken?.requested ?? 0, shotsTaken?.delivered ?? 0, shotsTaken?.firstError)
        }
        return report
    }

    /// One photo to a file every `interval` seconds, from half an interval in, on a fixed schedule.
    private static func takePhotos(_ photos: CapturePhotoOutput, every interval: Double, for seconds: Double,
                                   directory: URL) async -> (requested: Int, delivered: Int, firstError: String?) {
        let clock = ContinuousClock()
        let start = clock.now
        var delivered = 0
        var firstError: String?
        let count = Int(seconds / interval)
        for index in 0..<count {
            try? await Task.sleep(until: start + .seconds(interval * (Double(index) + 0.5)), clock: clock)
            let settings = CapturePhotoSettings(fileURL: directory.appendingPathComponent("record-photo-\(index).jpg"))
            do {
                _ = try await photos.capturePhoto(with: settings)
                delivered += 1
            } catch {
                firstError = firstError ?? "\(error)"
            }
        }
        return (count, delivered, firstError)
    }
}

/// What the movie output tells its delegate, as a stream: started, then finished (or only finished).
final class MovieEvents: CaptureFileOutputRecordingDelegate {
    enum Event: Sendable {
        case started
        case finished(CaptureError?)
    }

    let stream: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream() }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        continuation.yield(.started)
    }

    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        continuation.yield(.finished(error.map { $0 as? CaptureError ?? .recordingFailed(reason: "\($0)", underlying: nil) }))
        continuation.finish()
    }
}

/// A gst-launch description run to its end by this program, as gst-launch-1.0 runs it: the same graph in a
/// process built like the engine's, without the engine.
enum LaunchedGraphChild {
    static let childMode = "launch"

    struct Report: Codable {
        var wallSeconds: Double
    }

    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let description = arguments.value(after: "--description"),
              let seconds = arguments.value(after: "--seconds").flatMap(Double.init) else {
            printError("child \(childMode): needs --seconds and --description")
            return 2
        }
        return await ChildProcess.serve(childMode) { () throws -> Report in
            let started = Monotonic.now
            let pipeline = try Pipeline.launch(description)
            defer { pipeline.shutDown() }
            try pipeline.setState(.playing)
            // Its sources stop after `seconds` (num-buffers): the graph then ends by itself, finalized.
            let deadline = Monotonic.now + UInt64((seconds + 30) * 1e9)
            while Monotonic.now < deadline {
                guard let message = pipeline.bus.pop(timeout: 200 * ClockTime.millisecond) else { continue }
                switch message.kind {
                case .endOfStream: return Report(wallSeconds: Double(Monotonic.now - started) / 1e9)
                case .error(let error): throw BenchmarkError.child("the graph failed: \(error.message)")
                default: continue
                }
            }
            throw BenchmarkError.child("the graph did not end within \(seconds + 30) s")
        }
    }
}
