import Foundation

/// Figure 4: CPU time and peak memory of recording 1080p30 with audio to MP4, the engine against the
/// gst-launch-1.0 pipeline with the same source and encoder settings (without and with the engine's Matroska
/// sidecar) and against ffmpeg. Every recording is a child process of its own, measured as the frames part
/// measures its children (CPU from wait4, peak RSS from VmHWM); every file is checked with ffprobe. A second
/// engine recording runs with a CapturePhotoOutput (a photo every second) and a CaptureVideoDataOutput on the
/// same session: the frame goal is every frame in the file while they run.
enum RecordingBenchmark {
    /// Issue 26's goals. CPU: against gst-launch-1.0 writing what the engine writes (the movie and its Matroska
    /// sidecar), the engine's own work (tees, leaky queues, its probes) must cost nothing measurable.
    static let cpuGoal = 1.00
    /// Peak memory: against gst-launch-1.0 running the engine's own graph, so that what is compared is the
    /// process around the graph (the Swift runtime's and the program's code, see scripts/build-release.sh).
    static let memoryGoal = 1.10

    /// What runs in a child process.
    enum Kind: String, Codable, CaseIterable, Sendable {
        /// CaptureMovieFileOutput on the test camera and microphone (`gcapture-bench child record`).
        case engine
        /// The same, with a photo output taking a photo every second and a frame output being read.
        case engineWithOutputs = "engine+outputs"
        /// gst-launch-1.0, the same source and encoders, one muxer.
        case gstLaunch = "gst-launch"
        /// gst-launch-1.0 with the engine's Matroska sidecar teed off the encoded streams.
        case gstLaunchSidecar = "gst-launch+sidecar"
        /// gst-launch-1.0 with the sidecar, then a second gst-launch-1.0 copying the fragmented movie into a plain
        /// MP4 as the engine does at a clean stop (their CPU summed): the same files made, like for like.
        case gstLaunchSidecarRemux = "gst-launch+sidecar+remux"
        /// gst-launch-1.0 with the engine's whole graph: the sources' tees, the bounded leaky queues that keep
        /// the camera from waiting for the encoder, and the sidecar. Same work, no Swift: the memory reference.
        case gstLaunchEngineGraph = "gst-launch+engine-graph"
        /// The same graph run by this Swift program (`Pipeline.launch`, no engine): what any program built as the
        /// engine is (the Swift runtime and Foundation linked in) holds around the graph. The memory floor.
        case swiftEngineGraph = "swift+engine-graph"
        /// ffmpeg with libx264 at the same settings, its own test source paced by -re.
        case ffmpeg
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> RecordingReport {
        var runs: [RecordingRun] = []
        for round in 1...rounds {
            // The engine and its reference alternate who goes first; the others follow in turn.
            let order: [Kind] = round % 2 == 1
                ? [.engine, .gstLaunch, .gstLaunchSidecar, .gstLaunchSidecarRemux, .gstLaunchEngineGraph, .swiftEngineGraph, .ffmpeg,
                   .engineWithOutputs]
                : [.gstLaunch, .engine, .ffmpeg, .swiftEngineGraph, .gstLaunchEngineGraph, .gstLaunchSidecarRemux, .gstLaunchSidecar,
                   .engineWithOutputs]
            for kind in order {
                let run = try record(kind, seconds: seconds, round: round)
                runs.append(run)
                progress("record: round \(round)/\(rounds)  " + kind.rawValue.padding(18)
                         + String(format: " %4d frames  %.2f s  %.3f CPU s  %.1f MiB", run.frames, run.file.duration,
                                  run.cpuSeconds, run.peakRSSMiB))
            }
        }
        return RecordingReport(seconds: seconds, rounds: rounds, runs: runs)
    }

    private static func record(_ kind: Kind, seconds: Double, round: Int) throws -> RecordingRun {
        let directory = try PhotoBenchmark.temporaryDirectory("record-\(kind.rawValue)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var file = directory.appendingPathComponent("movie.mp4")
        let timeout = seconds + 60
        var usage: ChildUsage
        var engine: RecordingChildReport?
        switch kind {
        case .engine, .engineWithOutputs:
            let arguments = [RecordingChild.childMode, "--seconds", String(seconds), "--file", file.path]
                + (kind == .engineWithOutputs ? ["--with-outputs"] : [])
            (usage, engine) = try ChildProcess.runChild(arguments, timeout: timeout, label: "recording (\(kind.rawValue))",
                                                        as: RecordingChildReport.self)
        case .gstLaunch, .gstLaunchSidecar, .gstLaunchSidecarRemux, .gstLaunchEngineGraph:
            let sidecar = kind == .gstLaunch ? nil : directory.appendingPathComponent("movie.mkv")
            usage = try ChildProcess.gstLaunch(
                RecordingContestants.gstLaunchDescription(seconds: seconds, file: file, sidecar: sidecar,
                                                          engineGraph: kind == .gstLaunchEngineGraph), timeout: timeout)
            if kind == .gstLaunchSidecarRemux {
                let plain = directory.appendingPathComponent("plain.mp4")
                usage.add(try ChildProcess.gstLaunch(RecordingContestants.remuxDescription(of: file, to: plain), timeout: timeout))
                file = plain
            }
        case .swiftEngineGraph:
            let description = RecordingContestants.gstLaunchDescription(
                seconds: seconds, file: file, sidecar: directory.appendingPathComponent("movie.mkv"), engineGraph: true)
            (usage, _) = try ChildProcess.runChild([LaunchedGraphChild.childMode, "--seconds", String(seconds), "--description", description],
                                                   timeout: timeout, label: "recording (\(kind.rawValue))",
                                                   as: LaunchedGraphChild.Report.self)
        case .ffmpeg:
            usage = try ChildProcess.run("ffmpeg", RecordingContestants.ffmpegArguments(seconds: seconds, file: file),
                                         searchPath: true, timeout: timeout)
            guard usage.succeeded else { throw BenchmarkError.child("ffmpeg ended with \(usage.endDescription)") }
        }
        let probe = try MovieProbe(file)
        guard probe.width == Contestants.width, probe.height == Contestants.height else {
            throw BenchmarkError.child("\(kind.rawValue) recorded \(probe.width)x\(probe.height)")
        }
        return RecordingRun(kind: kind, round: round, wallSeconds: usage.wallSeconds, userSeconds: usage.userSeconds,
                            systemSeconds: usage.systemSeconds,
                            peakRSSMiB: Double(max(usage.peakRSSKiB, engine?.peakRSSKiB ?? 0)) / 1024, peakSplit: usage.peakSplit,
                            file: probe, engine: engine)
    }
}

/// One recording, as the parent measured it.
struct RecordingRun: Codable, FrameCountingRun {
    var kind: RecordingBenchmark.Kind
    var round: Int
    var wallSeconds: Double
    var userSeconds: Double
    var systemSeconds: Double
    /// The larger of the parent's VmHWM samples and the child's own report (the engine's).
    var peakRSSMiB: Double
    /// The parent's samples of the anonymous and file-backed parts.
    var peakSplit: ResidentSplit
    var file: MovieProbe
    /// The engine's own account of its recording.
    var engine: RecordingChildReport?

    var cpuSeconds: Double { userSeconds + systemSeconds }
    /// Video frames in the file.
    var frames: Int { file.videoFrames }
}

/// What ffprobe finds in a movie: frames counted by decoding them (-count_frames), the container's duration.
struct MovieProbe: Codable {
    var videoFrames: Int
    var audioFrames: Int
    var width: Int
    var height: Int
    var duration: Double
    var bytes: Int

    private struct Output: Decodable {
        struct Stream: Decodable {
            var codec_type: String
            var width: Int?
            var height: Int?
            var nb_read_frames: String?
        }
        struct Format: Decodable {
            var duration: String?
            var size: String?
        }
        var streams: [Stream]
        var format: Format
    }

    init(_ file: URL) throws {
        let usage = try ChildProcess.run(
            "ffprobe", ["-v", "error", "-count_frames", "-show_entries",
                        "stream=codec_type,width,height,nb_read_frames:format=duration,size", "-of", "json", file.path],
            searchPath: true, timeout: 120)
        guard usage.succeeded,
              let output = try? JSONDecoder().decode(Output.self, from: Data(usage.stdout.utf8)),
              let video = output.streams.first(where: { $0.codec_type == "video" }) else {
            throw BenchmarkError.child("ffprobe found no video in \(file.path) (\(usage.endDescription)): \(usage.stdout)")
        }
        let audio = output.streams.first { $0.codec_type == "audio" }
        videoFrames = video.nb_read_frames.flatMap { Int($0) } ?? 0
        audioFrames = audio?.nb_read_frames.flatMap { Int($0) } ?? 0
        width = video.width ?? 0
        height = video.height ?? 0
        duration = output.format.duration.flatMap { Double($0) } ?? 0
        bytes = output.format.size.flatMap { Int($0) } ?? 0
    }
}
