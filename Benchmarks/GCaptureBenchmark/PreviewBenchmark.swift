import Foundation
import GCapture
import GStreamerKit

/// The preview's branch against the plain X branch it amounts to, on the same source and tee, under one X
/// display (DISPLAY, else an Xvfb of its own): each side's CPU minus the same side without the branch, so
/// the figure is the branch alone. The target: the preview ≤ 1.10x the plain branch.
enum PreviewBenchmark {
    static let childMode = "preview-engine"

    struct Result: Codable, Sendable {
        var display: String
        var seconds: Double
        var rounds: Int
        var sink: String
        var engineBranchCPUSeconds: Double
        var plainBranchCPUSeconds: Double
        var ratio: Double
        var framesShownPerSecond: Double
        /// A 1080p30 recording made while the preview runs: the frames in its file (ffprobe) against its duration.
        var recordedFrames: Int
        var recordedSeconds: Double
        var recordedFramesExpected: Int { Int((recordedSeconds * Double(Contestants.frameRate)).rounded()) }
    }

    struct ChildReport: Codable, Sendable { var sink: String?; var shown: Int; var seconds: Double; var recordingError: String? }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> Result {
        var xvfb: Process?
        var display = ProcessInfo.processInfo.environment["DISPLAY"] ?? ""
        defer {
            if let xvfb {
                if xvfb.isRunning { xvfb.terminate() }
                xvfb.waitUntilExit()
                // Xvfb started by a Swift program may leave its lock and socket behind; ours to remove.
                let number = display.dropFirst()
                let lock = "/tmp/.X\(number)-lock"
                if (try? String(contentsOfFile: lock, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
                    == String(xvfb.processIdentifier) {
                    try? FileManager.default.removeItem(atPath: lock)
                    try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(number)")
                }
            }
        }
        if display.isEmpty {
            (xvfb, display) = try startXvfb()
        }
        setenv("DISPLAY", display, 1)
        let frames = Int(seconds * Double(Contestants.frameRate))
        let source = "\(Contestants.source) num-buffers=\(frames) ! \(Contestants.caps) ! tee ! "
        var engine: [Double] = [], engineBase: [Double] = [], plain: [Double] = [], plainBase: [Double] = []
        var sink = "?", shown = 0.0
        for round in 1...rounds {
            progress("preview round \(round)/\(rounds) on \(display): engine with and without a preview, plain with and without ximagesink")
            let arguments = ["--seconds", String(seconds)]
            let (base, _) = try ChildProcess.runChild([childMode, "--base"] + arguments, timeout: seconds + 60,
                                                      label: "engine without preview", as: ChildReport.self)
            let (with, report) = try ChildProcess.runChild([childMode] + arguments, timeout: seconds + 60,
                                                           label: "engine with preview", as: ChildReport.self)
            engineBase.append(base.cpuSeconds)
            engine.append(with.cpuSeconds)
            sink = report.sink ?? "?"
            shown = Double(report.shown) / report.seconds
            plainBase.append(try ChildProcess.gstLaunch(source + "queue ! fakesink", timeout: seconds + 60).cpuSeconds)
            plain.append(try ChildProcess.gstLaunch(source + "queue ! videoconvert ! ximagesink", timeout: seconds + 60).cpuSeconds)
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let engineBranch = median(engine) - median(engineBase), plainBranch = median(plain) - median(plainBase)

        progress("preview: recording 1080p30 for \(seconds) s while the preview runs")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-preview-bench-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let movie = folder.appendingPathComponent("with-preview.mp4")
        let (_, recording) = try ChildProcess.runChild([childMode, "--seconds", String(seconds), "--record", movie.path],
                                                       timeout: seconds + 90, label: "engine recording with preview", as: ChildReport.self)
        if let error = recording.recordingError { throw BenchmarkError.child("the recording with a preview failed: \(error)") }
        let probed = try MovieProbe(movie)
        return Result(display: display, seconds: seconds, rounds: rounds, sink: sink,
                      engineBranchCPUSeconds: engineBranch, plainBranchCPUSeconds: plainBranch,
                      ratio: plainBranch > 0 ? engineBranch / plainBranch : .infinity, framesShownPerSecond: shown,
                      recordedFrames: probed.videoFrames, recordedSeconds: probed.duration)
    }

    static func table(_ result: Result) -> String {
        String(format: """
            Preview (1080p30 test camera, %@ on %@, %.0f s, median of %d)
              preview branch CPU      %.2f s   (engine with a CapturePreviewOutput minus without)
              plain branch CPU        %.2f s   (queue ! videoconvert ! ximagesink minus queue ! fakesink)
              ratio                   %.2fx    (target ≤ 1.10x)
              frames shown            %.1f /s
              recording with preview  %d of %d frames in %.2f s (target: all of them)
            """, result.sink, result.display, result.seconds, result.rounds, result.engineBranchCPUSeconds,
            result.plainBranchCPUSeconds, result.ratio, result.framesShownPerSecond, result.recordedFrames,
            result.recordedFramesExpected, result.recordedSeconds)
    }

    /// The child: the test camera at 1080p with a frame output nobody reads (the floor both sides share) and,
    /// unless --base, a preview on DISPLAY, for --seconds; with --record FILE, a movie recorded meanwhile.
    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 0 else {
            printError("child \(childMode): needs --seconds")
            return 2
        }
        let withPreview = !arguments.contains("--base")
        let recordTo = arguments.value(after: "--record").map { URL(fileURLWithPath: $0) }
        return await ChildProcess.serve(childMode) {
            let (session, _) = try Contestants.makeSession(name: childMode)
            let preview = CapturePreviewOutput(), movie = CaptureMovieFileOutput()
            movie.videoBitRate = RecordingContestants.videoBitRate
            session.beginConfiguration()
            if withPreview { try session.add(preview) }
            if recordTo != nil { try session.add(movie) }
            try session.commitAndWait()
            try await session.start()
            let events = MovieEvents()
            var iterator = events.stream.makeAsyncIterator()
            var outcome: MovieEvents.Event?
            if let recordTo {
                movie.startRecording(to: recordTo, recordingDelegate: events)
                outcome = await iterator.next()
            }
            let started = Date()
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            let elapsed = Date().timeIntervalSince(started)
            if recordTo != nil, case .started = outcome {
                movie.stopRecording()
                outcome = await iterator.next()
            }
            await session.stop()
            var recordingError: String?
            if recordTo != nil, case .finished(let error)? = outcome { recordingError = error.map { "\($0)" } }
            if recordTo != nil, outcome == nil { recordingError = "the recording did not start" }
            return ChildReport(sink: withPreview ? preview.sinkInUse : nil, shown: preview.shownFrameCount, seconds: elapsed,
                               recordingError: recordingError)
        }
    }

    private static func startXvfb() throws -> (Process, String) {
        guard let number = (120..<220).first(where: { !FileManager.default.fileExists(atPath: "/tmp/.X\($0)-lock") }) else {
            throw BenchmarkError.setup("no free X display number for Xvfb")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        process.arguments = [":\(number)", "-screen", "0", "1920x1080x24", "-nolisten", "tcp"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { throw BenchmarkError.setup("cannot start Xvfb (apt install xvfb): \(error)") }
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"), process.isRunning, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        guard process.isRunning, FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") else {
            throw BenchmarkError.setup("Xvfb did not start on :\(number)")
        }
        return (process, ":\(number)")
    }
}
