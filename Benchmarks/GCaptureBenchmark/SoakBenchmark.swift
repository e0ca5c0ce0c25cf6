import Foundation
import GCapture
import Synchronization

// The soak: does the engine's memory stay flat over a long run? Two children run side by side, each a
// session on the test camera at 640x480 (the test microphone for the recording):
//   photos     one photo every 0.1 s, each written to a file (20 names in turn, as a booth overwriting its
//              shots would), none kept in memory
//   recording  back-to-back recordings of a minute, each finished, checked and deleted
// Each child samples its own resident memory (VmRSS) every few seconds. The figure is the growth from the end
// of the warm-up (caches, pools and glibc's arenas filled) to the end of the run; the goal is under 2 MiB.
// The recording child also samples between recordings (the last one finished, its file deleted, the next not
// started): the same moment of every cycle. While a recording runs its RSS swings by several MiB with how many
// raw frames wait for the encoder, which depends on the machine's load, not on what the engine keeps; so the
// recording's figure is judged on the samples between recordings.

/// What a soak child prints (one JSON line).
struct SoakChildReport: Codable {
    struct Sample: Codable {
        var seconds: Double
        var rssKiB: Int
    }

    var mode: String
    var seconds: Double
    var samples: [Sample]
    /// The recording child's samples between recordings.
    var between: [Sample]?
    /// Photos taken, or recordings finished (each checked to hold frames and to have ended cleanly).
    var completed: Int
    var failed: Int
    var firstError: String?
}

struct SoakReport: Codable {
    struct Part: Codable {
        var mode: String
        var completed: Int
        var failed: Int
        var firstError: String?
        /// Median VmRSS of the samples in the minute after warm-up, and of the last minute, MiB.
        var rssAfterWarmUpMiB: Double
        var rssAtEndMiB: Double
        var growthMiB: Double
        /// Between recordings: the median of the first three after warm-up and of the last three, MiB.
        var betweenAfterWarmUpMiB: Double?
        var betweenAtEndMiB: Double?
        var betweenGrowthMiB: Double? {
            guard let betweenAfterWarmUpMiB, let betweenAtEndMiB else { return nil }
            return betweenAtEndMiB - betweenAfterWarmUpMiB
        }
        var peakRSSMiB: Double
        /// VmRSS at the end of each minute, MiB: a leak climbs, a cache levels off.
        var rssByMinuteMiB: [Double]
        var meetsGoal: Bool
    }

    var minutes: Double
    var warmUpSeconds: Double
    var goalMiB: Double
    var photos: Part
    var recording: Part

    func table() -> [String] {
        var lines = [String(format: "Soak: %.0f min, 640x480 test camera; RSS growth after %.0f s of warm-up (goal < %.0f MiB)",
                            minutes, warmUpSeconds, goalMiB)]
        for part in [photos, recording] {
            lines.append(String(format: "  %-10@ %6d done, %d failed   RSS %.1f → %.1f MiB: %+.2f MiB (peak %.1f) %@",
                                String(part.mode.dropFirst("soak-".count)), part.completed, part.failed, part.rssAfterWarmUpMiB, part.rssAtEndMiB,
                                part.growthMiB, part.peakRSSMiB, part.meetsGoal ? "met" : "MISSED"))
            if let before = part.betweenAfterWarmUpMiB, let after = part.betweenAtEndMiB, let growth = part.betweenGrowthMiB {
                lines.append(String(format: "             between recordings %.1f → %.1f MiB: %+.2f MiB (what the goal is judged on)",
                                    before, after, growth))
            }
            lines.append("             by minute: " + part.rssByMinuteMiB.map { String(format: "%.1f", $0) }.joined(separator: " "))
            if let error = part.firstError { lines.append("             first failure: \(error)") }
        }
        return lines
    }
}

enum SoakBenchmark {
    static let goalMiB = 2.0
    static let sampleSeconds = 5.0
    static let photoInterval = 0.1
    static let recordingSeconds = 60.0

    /// The warm-up: the first 2 minutes, or a third of a shorter run.
    static func warmUp(seconds: Double) -> Double { min(120, seconds / 3) }

    static func run(minutes: Double, progress: (String) -> Void) throws -> SoakReport {
        let seconds = minutes * 60
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-soak-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        progress(String(format: "soak: photos every %.1f s and minute-long recordings for %.0f min, side by side", photoInterval, minutes))

        // Two children at once: the soak takes its stated time, not twice that.
        let reports = Mutex<[String: Result<SoakChildReport, BenchmarkError>]>([:])
        let group = DispatchGroup()
        for mode in [SoakChild.photosMode, SoakChild.recordingMode] {
            DispatchQueue.global().async(group: group) {
                let result = Result { () throws(BenchmarkError) -> SoakChildReport in
                    try ChildProcess.runChild([mode, "--seconds", String(seconds), "--folder", folder.path],
                                              timeout: seconds + 300, label: mode, as: SoakChildReport.self).1
                }
                reports.withLock { $0[mode] = result }
            }
        }
        group.wait()
        let results = reports.withLock { $0 }
        let warmUp = warmUp(seconds: seconds)
        func part(_ mode: String) throws -> SoakReport.Part {
            guard let result = results[mode] else { throw BenchmarkError.child("\(mode) did not report") }
            return summarize(try result.get(), warmUp: warmUp)
        }
        return SoakReport(minutes: minutes, warmUpSeconds: warmUp, goalMiB: goalMiB,
                          photos: try part(SoakChild.photosMode), recording: try part(SoakChild.recordingMode))
    }

    static func summarize(_ report: SoakChildReport, warmUp: Double) -> SoakReport.Part {
        func medianMiB(_ samples: some Sequence<SoakChildReport.Sample>) -> Double {
            let values = samples.map { Double($0.rssKiB) / 1024 }
            return values.isEmpty ? 0 : Statistics.median(values)
        }
        let window = min(60, warmUp)
        let afterWarmUp = medianMiB(report.samples.filter { $0.seconds >= warmUp && $0.seconds < warmUp + window })
        let atEnd = medianMiB(report.samples.filter { $0.seconds >= report.seconds - window })
        let growth = atEnd - afterWarmUp
        let between = (report.between ?? []).filter { $0.seconds >= warmUp }
        let (betweenBefore, betweenAfter) = between.count >= 6
            ? (medianMiB(between.prefix(3)), medianMiB(between.suffix(3))) : (nil, nil)
        var part = SoakReport.Part(mode: report.mode, completed: report.completed, failed: report.failed,
                               firstError: report.firstError, rssAfterWarmUpMiB: afterWarmUp, rssAtEndMiB: atEnd,
                               growthMiB: growth, betweenAfterWarmUpMiB: betweenBefore, betweenAtEndMiB: betweenAfter,
                               peakRSSMiB: Double(report.samples.map(\.rssKiB).max() ?? 0) / 1024,
                               rssByMinuteMiB: stride(from: 60.0, through: report.seconds, by: 60).compactMap { minute in
                                   report.samples.last { $0.seconds <= minute }.map { Double($0.rssKiB) / 1024 }
                               },
                               meetsGoal: false)
        part.meetsGoal = (part.betweenGrowthMiB ?? growth) < goalMiB && report.failed == 0
        return part
    }
}

/// `gcapture-bench child soak-photos|soak-recording --seconds S --folder F`.
enum SoakChild {
    static let photosMode = "soak-photos"
    static let recordingMode = "soak-recording"

    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let mode = arguments.first, [photosMode, recordingMode].contains(mode),
              let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 0,
              let folder = arguments.value(after: "--folder") else {
            printError("child soak: needs soak-photos or soak-recording, --seconds and --folder")
            return 2
        }
        return await ChildProcess.serve(mode) {
            try await soak(mode, seconds: seconds, folder: URL(fileURLWithPath: folder))
        }
    }

    private static func soak(_ mode: String, seconds: Double, folder: URL) async throws -> SoakChildReport {
        let session = CaptureSession(name: mode)
        let photos = CapturePhotoOutput(), movie = CaptureMovieFileOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: CaptureDevice.testCamera))
        if mode == recordingMode {
            try session.add(CaptureDeviceInput(device: CaptureDevice.testMicrophone))
            try session.add(movie)
        } else {
            try session.add(photos)
        }
        session.sessionPreset = .vga640x480
        try session.commitAndWait()
        try await session.start()

        let clock = ContinuousClock()
        let start = clock.now
        let end = start + .seconds(seconds)
        let sampler = RSSSampler(start: start, every: SoakBenchmark.sampleSeconds)
        var report = SoakChildReport(mode: mode, seconds: seconds, samples: [], completed: 0, failed: 0)
        func count(_ error: Error?) {
            if let error {
                report.failed += 1
                report.firstError = report.firstError ?? "\(error)"
            } else {
                report.completed += 1
            }
        }

        if mode == photosMode {
            var index = 0
            while clock.now < end {
                try await Task.sleep(until: start + .seconds(SoakBenchmark.photoInterval * Double(index)), clock: clock)
                let url = folder.appendingPathComponent("soak-\(index % 20).jpg")
                // Twenty names in turn keep the disk bounded; a photo never replaces a file, so the old one goes first.
                try? FileManager.default.removeItem(at: url)
                do { _ = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: url)); count(nil) } catch { count(error) }
                index += 1
                sampler.sampleIfDue()
            }
        } else {
            var index = 0
            var between: [SoakChildReport.Sample] = []
            defer { report.between = between }
            while clock.now < end {
                let url = folder.appendingPathComponent("soak-\(index).mp4")
                let events = MovieEvents()
                var iterator = events.stream.makeAsyncIterator()
                movie.startRecording(to: url, recordingDelegate: events)
                guard case .started = await iterator.next() else {
                    count(BenchmarkError.setup("recording \(index) did not start"))
                    break
                }
                let stopAt = min(end, clock.now + .seconds(SoakBenchmark.recordingSeconds))
                while clock.now < stopAt {
                    try await Task.sleep(for: .milliseconds(500))
                    sampler.sampleIfDue()
                }
                movie.stopRecording()
                if case .finished(let error) = await iterator.next() {
                    let frames = movie.lastStatistics.frames
                    count(error ?? (frames > 0 ? nil : BenchmarkError.setup("recording \(index) holds no frame")))
                }
                try? FileManager.default.removeItem(at: url)
                if let rss = ChildProcess.memoryKiB("/proc/self/status", field: "VmRSS") {
                    between.append(.init(seconds: (clock.now - start) / .seconds(1), rssKiB: rss))
                }
                index += 1
            }
        }
        await session.stop()
        report.samples = sampler.samples
        return report
    }
}

/// This process's VmRSS, sampled on a schedule from the soak's own loop.
private final class RSSSampler {
    private let clock = ContinuousClock()
    private let start: ContinuousClock.Instant
    private let interval: Double
    private(set) var samples: [SoakChildReport.Sample] = []

    init(start: ContinuousClock.Instant, every interval: Double) {
        self.start = start
        self.interval = interval
    }

    func sampleIfDue() {
        let elapsed = (clock.now - start) / .seconds(1)
        guard elapsed >= Double(samples.count) * interval, let rss = ChildProcess.memoryKiB("/proc/self/status", field: "VmRSS") else { return }
        samples.append(.init(seconds: elapsed, rssKiB: rss))
    }
}
