import Foundation

/// Figure 4: medians over the rounds per contestant, and the engine's ratios to the others.
struct RecordingReport: Codable {
    var seconds: Double
    var rounds: Int
    var expectedFrames: Int
    var videoBitRate: Int
    var audioBitRate: Int
    /// The commands, with a 10 s recording to /tmp/movie.mp4.
    var gstLaunchPipeline: String
    var gstLaunchSidecarPipeline: String
    var gstLaunchEngineGraphPipeline: String
    var ffmpegCommand: String
    var engine: RecordingSide
    var engineWithOutputs: RecordingSide
    var gstLaunch: RecordingSide
    var gstLaunchSidecar: RecordingSide
    var gstLaunchSidecarRemux: RecordingSide
    var gstLaunchEngineGraph: RecordingSide
    var swiftEngineGraph: RecordingSide
    var ffmpeg: RecordingSide
    var engineToGstLaunch: RecordingRatio
    var engineToGstLaunchSidecar: RecordingRatio
    /// The goal's ratio round by round.
    var engineToGstLaunchSidecarSpread: RoundRatioSpread?
    /// Against gst-launch making the same files (the movie copied into a plain MP4 after it): like for like.
    var engineToGstLaunchSidecarRemux: RecordingRatio
    /// Against the same graph in gst-launch: what the engine's Swift side costs.
    var engineToGstLaunchEngineGraph: RecordingRatio
    /// Against the same graph run by a program built as the engine is, without the engine: what the engine's own
    /// code and work cost beyond any such program.
    var engineToSwiftEngineGraph: RecordingRatio
    /// The same program against gst-launch running that graph: the floor of the memory goal for a program built
    /// with the Swift runtime and Foundation linked in.
    var swiftEngineGraphToGstLaunchEngineGraph: RecordingRatio
    var engineToFFmpeg: RecordingRatio
    /// What the photo and frame outputs add to the recording process.
    var engineWithOutputsToEngine: RecordingRatio
    /// On CPU seconds per video second, engine / gst-launch (no sidecar).
    var cpuGoal: Double
    var meetsCPUGoal: Bool
    /// On peak RSS, engine / gst-launch (no sidecar).
    var memoryGoal: Double
    var meetsMemoryGoal: Bool
    /// How the engine's program was linked: with the Swift runtime and Foundation in it (as
    /// scripts/build-release.sh builds it) or loading them from the toolchain's shared libraries.
    var engineLinkage: String
    /// The engine with the photo and frame outputs, its worst round (fewest frames in the file).
    var withOutputs: OutputsFigures
    /// Every engine+outputs recording has every expected frame in its file.
    var meetsFrameGoal: Bool
    var warnings: [String]
    var runs: [RecordingRun]
}

/// One contestant's medians.
struct RecordingSide: Codable {
    /// Frames are the video frames ffprobe counted in the file.
    var summary: FrameSummary
    var audioFrames: Double
    var fileSeconds: Double
    var fileMegabytes: Double
    /// Medians of the largest anonymous and file-backed parts of the resident set (ResidentSplit).
    var anonymousMiB: Double
    var mappedFilesMiB: Double

    init(_ runs: [RecordingRun]) {
        summary = FrameSummary(runs)
        anonymousMiB = Statistics.median(runs.map { Double($0.peakSplit.anonymousKiB) / 1024 })
        mappedFilesMiB = Statistics.median(runs.map { Double($0.peakSplit.fileKiB) / 1024 })
        audioFrames = Statistics.median(runs.map { Double($0.file.audioFrames) })
        fileSeconds = Statistics.median(runs.map(\.file.duration))
        fileMegabytes = Statistics.median(runs.map { Double($0.file.bytes) / 1e6 })
    }
}

/// A ratio of medians, one contestant's to another's.
struct RecordingRatio: Codable {
    /// Of CPU seconds per video second (frames in the file / 30): the goal's figure.
    var cpu: Double
    /// Of CPU seconds, whatever the frames.
    var cpuSeconds: Double
    var peakRSS: Double

    init(_ side: RecordingSide, to other: RecordingSide) {
        cpu = side.summary.cpuSecondsPerVideoSecond! / other.summary.cpuSecondsPerVideoSecond!
        cpuSeconds = side.summary.cpuSeconds / other.summary.cpuSeconds
        peakRSS = side.summary.peakRSSMiB / other.summary.peakRSSMiB
    }
}

/// The engine recording while a photo output and a frame output run on the same session.
struct OutputsFigures: Codable {
    var round: Int
    var fileFrames: Int
    var movieFrames: Int
    var movieDroppedFrames: Int
    var frameOutputFrames: Int
    /// Frame slots missing between the frame output's first and last frame.
    var frameOutputMissing: Int
    /// Frames its stream discarded because the reader was late.
    var frameOutputDropped: Int
    var photosRequested: Int
    var photosDelivered: Int
    var firstPhotoError: String?
}

extension RecordingReport {
    init(seconds: Double, rounds: Int, runs: [RecordingRun]) {
        func side(_ kind: RecordingBenchmark.Kind) -> RecordingSide { RecordingSide(runs.filter { $0.kind == kind }) }
        let expected = RecordingContestants.frames(seconds: seconds)
        let example = URL(fileURLWithPath: "/tmp/movie.mp4")
        let worst = runs.filter { $0.kind == .engineWithOutputs }.min { $0.frames < $1.frames }!
        let report = worst.engine!
        let engine = side(.engine), gstLaunch = side(.gstLaunch)
        let cpuRatio = RecordingRatio(engine, to: side(.gstLaunchSidecar))
        let memoryRatio = RecordingRatio(engine, to: side(.gstLaunchEngineGraph))
        self.init(
            seconds: seconds, rounds: rounds, expectedFrames: expected,
            videoBitRate: RecordingContestants.videoBitRate, audioBitRate: RecordingContestants.audioBitRate,
            gstLaunchPipeline: RecordingContestants.gstLaunchDescription(seconds: 10, file: example, sidecar: nil),
            gstLaunchSidecarPipeline: RecordingContestants.gstLaunchDescription(
                seconds: 10, file: example, sidecar: URL(fileURLWithPath: "/tmp/movie.mkv")),
            gstLaunchEngineGraphPipeline: RecordingContestants.gstLaunchDescription(
                seconds: 10, file: example, sidecar: URL(fileURLWithPath: "/tmp/movie.mkv"), engineGraph: true),
            ffmpegCommand: RecordingContestants.ffmpegCommand,
            engine: engine, engineWithOutputs: side(.engineWithOutputs), gstLaunch: gstLaunch,
            gstLaunchSidecar: side(.gstLaunchSidecar), gstLaunchSidecarRemux: side(.gstLaunchSidecarRemux),
            gstLaunchEngineGraph: side(.gstLaunchEngineGraph), swiftEngineGraph: side(.swiftEngineGraph), ffmpeg: side(.ffmpeg),
            engineToGstLaunch: RecordingRatio(engine, to: gstLaunch), engineToGstLaunchSidecar: cpuRatio,
            engineToGstLaunchSidecarSpread: RoundRatioSpread(cpuOf: runs.filter { $0.kind == .engine }, over: runs.filter { $0.kind == .gstLaunchSidecar }),
            engineToGstLaunchSidecarRemux: RecordingRatio(engine, to: side(.gstLaunchSidecarRemux)),
            engineToGstLaunchEngineGraph: memoryRatio,
            engineToSwiftEngineGraph: RecordingRatio(engine, to: side(.swiftEngineGraph)),
            swiftEngineGraphToGstLaunchEngineGraph: RecordingRatio(side(.swiftEngineGraph), to: side(.gstLaunchEngineGraph)),
            engineToFFmpeg: RecordingRatio(engine, to: side(.ffmpeg)),
            engineWithOutputsToEngine: RecordingRatio(side(.engineWithOutputs), to: engine),
            cpuGoal: RecordingBenchmark.cpuGoal, meetsCPUGoal: cpuRatio.cpu <= RecordingBenchmark.cpuGoal,
            memoryGoal: RecordingBenchmark.memoryGoal, meetsMemoryGoal: memoryRatio.peakRSS <= RecordingBenchmark.memoryGoal,
            engineLinkage: report.swiftRuntimeShared == false ? "Swift runtime and Foundation linked in (scripts/build-release.sh)"
                : "Swift runtime and Foundation loaded from the toolchain's shared libraries (not as shipped: scripts/build-release.sh)",
            withOutputs: OutputsFigures(
                round: worst.round, fileFrames: worst.frames, movieFrames: report.movieFrames,
                movieDroppedFrames: report.movieDroppedFrames, frameOutputFrames: report.frameOutputFrames ?? 0,
                frameOutputMissing: report.frameOutputMissing ?? 0, frameOutputDropped: report.frameOutputDropped ?? 0,
                photosRequested: report.photosRequested ?? 0, photosDelivered: report.photosDelivered ?? 0,
                firstPhotoError: report.firstPhotoError),
            meetsFrameGoal: worst.frames >= expected,
            warnings: Self.warnings(runs, expected: expected), runs: runs)
    }

    private static func warnings(_ runs: [RecordingRun], expected: Int) -> [String] {
        var warnings: [String] = []
        for run in runs {
            let name = "\(run.kind.rawValue) round \(run.round)"
            if run.frames != expected { warnings.append("\(name): \(run.frames) frames in the file, expected \(expected)") }
            if let engine = run.engine {
                if let error = engine.recordingError { warnings.append("\(name): the recording ended with \(error)") }
                if engine.movieDroppedFrames > 0 { warnings.append("\(name): the movie output dropped \(engine.movieDroppedFrames) frames") }
                if let missing = engine.frameOutputMissing, missing > 0 {
                    warnings.append("\(name): the frame output missed \(missing) frames (\(engine.frameOutputDropped ?? 0) discarded for a late reader)")
                }
                if let error = engine.firstPhotoError { warnings.append("\(name): a photo failed: \(error)") }
            }
        }
        return warnings
    }

    func table() -> [String] {
        func row(_ label: String, _ side: RecordingSide) -> String {
            let summary = side.summary
            return label.padding(48)
                + String(format: "%7.0f %7.2f %7.0f %8.3f", summary.frames, side.fileSeconds, side.audioFrames, summary.cpuSeconds)
                + (summary.cpuSecondsPerVideoSecond.map { String(format: "%15.4f", $0) } ?? "—".leftPadding(15))
                + String(format: "%8.1f %13.1f", summary.cpuPercent, summary.peakRSSMiB)
        }
        func splitRow(_ label: String, _ side: RecordingSide) -> String {
            "    " + label.padding(44) + String(format: "%6.1f + %5.1f", side.anonymousMiB, side.mappedFilesMiB)
        }
        func ratioRow(_ label: String, _ ratio: RecordingRatio) -> String {
            label.padding(48) + String(format: "CPU %.2f× (CPU s %.2f×)   peak RSS %.2f×", ratio.cpu, ratio.cpuSeconds, ratio.peakRSS)
        }
        let outputs = withOutputs
        var lines = [
            "4. Recording \(String(format: "%g", seconds)) s of 1080p30 with audio to fragmented MP4 (1 s fragments), one child "
                + "process per run (medians of \(rounds) rounds; expected \(expectedFrames) frames)",
            "   H.264 veryfast zerolatency \(videoBitRate / 1000) kbit/s CBR, key frame every \(Contestants.frameRate), no B-frames; "
                + "AAC \(audioBitRate / 1000) kbit/s; frames counted by ffprobe -count_frames",
            "".padding(48) + ["frames", "file s", "AAC fr", "CPU s", "CPU s/video s", "CPU %", "peak RSS MiB"]
                .enumerated().map { $1.leftPadding([7, 8, 8, 9, 15, 8, 14][$0]) }.joined(),
            row("  engine      CaptureMovieFileOutput", engine),
            row("  engine      + photo 1/s + frame output", engineWithOutputs),
            row("  gst-launch  same graph, no sidecar", gstLaunch),
            row("  gst-launch  + matroskamux sidecar (engine's)", gstLaunchSidecar),
            row("  gst-launch  + sidecar, then copied to plain MP4", gstLaunchSidecarRemux),
            row("  gst-launch  engine's graph: tees, leaky queues", gstLaunchEngineGraph),
            row("  swift       engine's graph, Pipeline.launch", swiftEngineGraph),
            row("  ffmpeg      libx264 + aac, -re lavfi testsrc2", ffmpeg),
            ratioRow("  engine / gst-launch", engineToGstLaunch),
            ratioRow("  engine / gst-launch + sidecar", engineToGstLaunchSidecar)
                + String(format: "   goal CPU ≤ %.2f×  ", cpuGoal) + (meetsCPUGoal ? "met" : "MISSED")
                + (engineToGstLaunchSidecarSpread.map { " (\($0.text))" } ?? ""),
            ratioRow("  engine / the same files (+ plain MP4 copy)", engineToGstLaunchSidecarRemux)
                + String(format: "   like for like: %@ %.2f×", engineToGstLaunchSidecarRemux.cpu <= cpuGoal ? "≤" : ">", cpuGoal),
            ratioRow("  engine / gst-launch, engine's graph", engineToGstLaunchEngineGraph)
                + String(format: "   goal peak RSS ≤ %.2f×  ", memoryGoal) + (meetsMemoryGoal ? "met" : "MISSED"),
            ratioRow("  engine / swift, engine's graph", engineToSwiftEngineGraph) + "   the engine beyond any program built as it is",
            ratioRow("  swift / gst-launch, engine's graph", swiftEngineGraphToGstLaunchEngineGraph)
                + "   the floor of a program with Swift linked in",
            ratioRow("  engine / ffmpeg", engineToFFmpeg),
            ratioRow("  engine + outputs / engine", engineWithOutputsToEngine),
            "  peak RSS in two parts (MiB): anonymous (heap, frames, stacks) + mapped files (code of the program and its libraries)",
            splitRow("engine", engine), splitRow("gst-launch", gstLaunch), splitRow("gst-launch, engine's graph", gstLaunchEngineGraph),
            splitRow("swift, engine's graph", swiftEngineGraph),
            "  engine built with: \(engineLinkage)",
            "  with photo and frame outputs (worst of \(rounds)): \(outputs.fileFrames) of \(expectedFrames) frames in the file, "
                + "movie dropped \(outputs.movieDroppedFrames); frame output \(outputs.frameOutputFrames) frames, "
                + "\(outputs.frameOutputMissing) missing, \(outputs.frameOutputDropped) discarded; "
                + "photos \(outputs.photosDelivered)/\(outputs.photosRequested)   goal \(expectedFrames) of \(expectedFrames): "
                + (meetsFrameGoal ? "met" : "MISSED"),
            "  engine: videotestsrc (NV12) ! tee ! queue ! videoconvert (passes NV12 through) ! x264enc ! h264parse ! tee ! queue ! h264parse ! tee → mp4mux "
                + "+ matroskamux sidecar; audio likewise",
            "  gst-launch: \(gstLaunchPipeline)",
            "  ffmpeg (its source differs: testsrc2 and a mono sine): \(ffmpegCommand)",
        ]
        lines += warnings.map { "  warning: \($0)" }
        return lines
    }
}
