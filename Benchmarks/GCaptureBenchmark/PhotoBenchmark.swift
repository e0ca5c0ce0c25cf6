import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// Figure 3: still photos from the test camera at 1080p30 and 2160p30, side by side in one run.
///
/// 1. Shutter lag, the photo's frame timestamp − the request instant (both session running time): the engine
///    with zero shutter lag at .balanced, against GStreamer's camerabin on the same kind of live source (in a
///    child process, see Camerabin), and viewfinder frames lost per shot on both.
/// 2. Request → JPEG file, timed from the caller's side on both sides: the engine from before capturePhoto is
///    called until it has returned (the file is on disk), against the floor doing what the engine does with
///    plain GStreamer: a frame of that size pushed by reference (no copy, as the engine's ring hands its
///    frame over) into jpegenc at the same quality, the JPEG pulled and written to a file the way the engine
///    writes (beside it, then renamed). Interleaved with the engine's shots so both share the noise and the
///    background load of the running live source; both also run without a file, which shows by difference
///    what writing it costs.
/// 3. A burst, one request per frame interval, while a CaptureVideoDataOutput on the same session counts
///    frames: photos delivered, frames lost, CPU per photo against jpegenc's CPU per frame (see PhotoBurst).
enum PhotoBenchmark {
    static let latencyGoal = 1.3
    static let prioritization = CapturePhotoOutput.QualityPrioritization.balanced
    /// The pause before each shot, drawn at random so requests fall anywhere between two frames.
    static let gapMilliseconds = 100...300

    struct Size: Sendable {
        var label: String
        var preset: CaptureSession.Preset
        var width: Int
        var height: Int
        /// Issue 26's goal for the burst: CPU per photo against jpegenc's per frame.
        var burstCPUGoal: Double

        var caps: String {
            "video/x-raw,format=NV12,width=\(width),height=\(height),framerate=\(Contestants.frameRate)/1"
        }
    }

    static let sizes = [
        Size(label: "1080p", preset: .hd1920x1080, width: 1920, height: 1080, burstCPUGoal: 0.90),
        Size(label: "2160p", preset: .hd4K3840x2160, width: 3840, height: 2160, burstCPUGoal: 1.00),
    ]

    /// The test camera's picture (Contestants.makeTestCamera), not live: frames as fast as they are asked for.
    static let stillSource = "videotestsrc pattern=smpte horizontal-speed=2"

    static var frameIntervalMilliseconds: Double { 1000 / Double(Contestants.frameRate) }

    static func run(shots: Int, burstSeconds: Double, burstRounds: Int,
                    progress: (String) -> Void) async throws -> PhotoReport {
        var random = SeededRandom(seed: 0x6763_6170)
        var reports: [PhotoSizeReport] = []
        var warnings: [String] = []
        for size in sizes {
            let gaps = (0..<shots).map { _ in Double(Int.random(in: gapMilliseconds, using: &random)) / 1000 }
            let directory = try temporaryDirectory("shots-\(size.label)")
            defer { try? FileManager.default.removeItem(at: directory) }

            let engine = try await EngineShots.measure(size, gaps: gaps, directory: directory, progress: progress)
            progress("photo \(size.label): camerabin, \(shots) shots in a child process")
            var camerabin: CamerabinShots?
            var camerabinNote: String?
            do {
                camerabin = try Camerabin.shots(size, quality: engine.jpegQuality, gaps: gaps, directory: directory)
            } catch {
                camerabinNote = "\(error)"
                warnings.append("camerabin at \(size.label): \(error)")
            }

            let burst = try PhotoBurst.measure(size, quality: engine.jpegQuality, seconds: burstSeconds,
                                               rounds: burstRounds, progress: progress)
            warnings += burst.warnings.map { "\(size.label) burst: \($0)" }
            reports.append(PhotoSizeReport(size: size, engine: engine, camerabin: camerabin,
                                           camerabinNote: camerabinNote, burst: burst))
        }
        return PhotoReport(prioritization: prioritization.description, shots: shots,
                           gapMilliseconds: [gapMilliseconds.lowerBound, gapMilliseconds.upperBound],
                           frameIntervalMilliseconds: frameIntervalMilliseconds, burstSeconds: burstSeconds,
                           burstRounds: burstRounds, latencyGoal: latencyGoal,
                           sizes: reports, warnings: warnings)
    }

    /// A fresh folder under /tmp for photo files; the caller removes it.
    static func temporaryDirectory(_ name: String) throws -> URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("gcapture-bench-\(getpid())-\(name)", isDirectory: true)
        try? FileManager.default.removeItem(at: url)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Frames missing between the first timestamp at or after `start` and the last at or before `end`, given
    /// the frame interval: what a viewer of those frames would have seen skip.
    static func missingFrames(_ timestamps: [UInt64], from start: UInt64, to end: UInt64,
                              intervalNanoseconds: Double) -> (frames: Int, missing: Int) {
        let inWindow = timestamps.filter { $0 >= start && $0 <= end }.sorted()
        guard let first = inWindow.first, let last = inWindow.last else { return (0, 0) }
        let slots = Int((Double(last - first) / intervalNanoseconds).rounded()) + 1
        let distinct = Set(inWindow).count
        return (distinct, max(0, slots - distinct))
    }
}

extension PhotoSizeReport {
    init(size: PhotoBenchmark.Size, engine: EngineShots, camerabin: CamerabinShots?, camerabinNote: String?,
         burst: BurstFigures) {
        let interval = PhotoBenchmark.frameIntervalMilliseconds
        let lag = Summary(engine.shutterLags)
        // Timestamps are whole nanoseconds: a frame exactly one interval away may show as 33.334 ms.
        let beyond = engine.shutterLags.filter { abs($0) > interval + 0.001 }.count
        let latency = Summary(engine.latencies), floor = Summary(engine.floorEncodes)
        let ratio = latency.median / floor.median
        let shots = Double(engine.shutterLags.count)
        label = size.label
        width = size.width
        height = size.height
        jpegQuality = engine.jpegQuality
        shutterLag = ShutterLagFigures(
            engine: lag, engineBeyondOneFrame: beyond,
            camerabin: camerabin.flatMap { $0.shutterLags.isEmpty ? nil : Summary($0.shutterLags) },
            camerabinNote: camerabinNote, meetsGoal: lag.median <= 0 && beyond == 0)
        requestToFile = RequestToFileFigures(
            engine: latency, engineInMemory: Summary(engine.inMemoryLatencies),
            engineReported: Summary(engine.engineReportedLatencies),
            camerabin: camerabin.flatMap { $0.pressToFile.isEmpty ? nil : Summary($0.pressToFile) },
            camerabinFrameToFile: camerabin.flatMap { $0.frameToFile.isEmpty ? nil : Summary($0.frameToFile) },
            floor: floor, floorInMemory: Summary(engine.floorInMemoryEncodes), engineMeanJPEGBytes: engine.meanJPEGBytes, floorMeanJPEGBytes: engine.floorMeanJPEGBytes,
            ratio: ratio, meetsGoal: ratio <= PhotoBenchmark.latencyGoal)
        viewfinder = ViewfinderFigures(
            engineFrames: engine.viewfinderFrames, engineMissing: engine.viewfinderMissing,
            engineMissingPerShot: Double(engine.viewfinderMissing) / shots,
            camerabinFrames: camerabin?.viewfinderFrames, camerabinMissing: camerabin?.viewfinderMissing,
            camerabinMissingPerShot: camerabin.map { Double($0.viewfinderMissing) / Double(max(1, $0.shutterLags.count)) })
        self.burst = burst
    }
}

/// What the benchmark keeps of a photo: its figures, not its JPEG, which it lets go as soon as the photo is
/// delivered, as an app shooting to files does. Kept JPEGs would be the benchmark's memory, not the engine's,
/// and would keep the engine from reusing their blocks.
struct PhotoFigures: Sendable {
    var requestTimestamp: Double
    var shutterLagMilliseconds: Double
    /// What the engine reports (CapturePhoto.latencyMilliseconds: from inside the capture call).
    var latencyMilliseconds: Double
    /// Before capturePhoto was called → after it returned, in the caller: the figure compared with the floor.
    var callerMilliseconds: Double
    var jpegQuality: Int
    var bytes: Int

    init(_ photo: CapturePhoto, callerMilliseconds: Double) {
        requestTimestamp = photo.requestTimestamp
        shutterLagMilliseconds = photo.shutterLagMilliseconds
        latencyMilliseconds = photo.latencyMilliseconds
        self.callerMilliseconds = callerMilliseconds
        jpegQuality = photo.resolvedSettings.jpegQuality
        bytes = photo.fileDataRepresentation()?.count ?? 0
    }
}

// MARK: - Shots: the engine and the floor, interleaved

/// What one size's sequential shots measured in this process.
struct EngineShots {
    var jpegQuality: Int
    /// Frame timestamp − request, ms, of every engine photo (to a file or in memory).
    var shutterLags: [Double]
    /// capturePhoto called → returned with the JPEG written, ms, timed by the caller (fileURL set).
    var latencies: [Double]
    /// The same with the JPEG in memory (no fileURL): what writing the file adds, by difference.
    var inMemoryLatencies: [Double]
    /// What the engine itself reported for the photos to a file (CapturePhoto.latencyMilliseconds).
    var engineReportedLatencies: [Double]
    /// The floor: frame pushed by reference → jpegenc → JPEG pulled and written to a file, ms.
    var floorEncodes: [Double]
    /// The floor without the file: push → pull, ms.
    var floorInMemoryEncodes: [Double]
    var meanJPEGBytes: Double
    var floorMeanJPEGBytes: Double
    /// Frames of the session's CaptureVideoDataOutput ("viewfinder") while the shots were taken.
    var viewfinderFrames: Int
    var viewfinderMissing: Int

    /// One step of the interleaving: each waits its own pause first, their order rotates.
    private enum Turn: CaseIterable { case photoToFile, photoInMemory, floorToFile, floorInMemory }

    private struct Taken {
        var toFile: [PhotoFigures] = []
        var inMemory: [PhotoFigures] = []
        var floor: [(milliseconds: Double, bytes: Int)] = []
        var floorInMemory: [(milliseconds: Double, bytes: Int)] = []
        var all: [PhotoFigures] { toFile + inMemory }
    }

    /// A session with the test camera, a CapturePhotoOutput (zero shutter lag on, its default) and a
    /// CaptureVideoDataOutput as the viewfinder. One shot at a time, each after a random pause: a photo to a
    /// file, a photo in memory, a floor encode to a file and one in memory, in rotating order.
    static func measure(_ size: PhotoBenchmark.Size, gaps: [Double], directory: URL,
                        progress: (String) -> Void) async throws -> EngineShots {
        let session = CaptureSession(name: "bench-photo-\(size.label)")
        let photos = CapturePhotoOutput()
        let viewfinder = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: Contestants.makeTestCamera()))
        try session.add(photos)
        try session.add(viewfinder)
        session.sessionPreset = size.preset
        try session.commitAndWait()
        guard photos.isZeroShutterLagEnabled else { throw BenchmarkError.setup("zero shutter lag is off by default") }

        let frames = FrameTimes()
        let stream = viewfinder.sampleBuffers()
        let consumer = Task {
            for await frame in stream { frames.add(frame) }
        }
        try await session.start()
        let taken: Taken
        do {
            taken = try await shoot(size, photos: photos, gaps: gaps, directory: directory, progress: progress)
        } catch {
            await session.stop()
            consumer.cancel()
            throw error
        }
        await session.stop()
        await consumer.value  // the stream ends when the session stops

        guard let info = frames.info, info.width == size.width, info.height == size.height,
              info.frameRate == Fraction(Contestants.frameRate, 1) else {
            throw BenchmarkError.setup("the \(size.label) session delivered \(frames.info.map { "\($0.width)x\($0.height) at \($0.frameRate)" } ?? "no") frames")
        }
        let all = taken.all.sorted { $0.requestTimestamp < $1.requestTimestamp }
        let first = all.first!, last = all.last!
        let window = PhotoBenchmark.missingFrames(
            frames.timestamps, from: UInt64(first.requestTimestamp * 1e9),
            to: UInt64(last.requestTimestamp * 1e9 + last.callerMilliseconds * 1e6),
            intervalNanoseconds: 1e9 / info.frameRate.doubleValue)
        return EngineShots(
            jpegQuality: first.jpegQuality,
            shutterLags: all.map(\.shutterLagMilliseconds),
            latencies: taken.toFile.map(\.callerMilliseconds),
            inMemoryLatencies: taken.inMemory.map(\.callerMilliseconds),
            engineReportedLatencies: taken.toFile.map(\.latencyMilliseconds),
            floorEncodes: taken.floor.map(\.milliseconds),
            floorInMemoryEncodes: taken.floorInMemory.map(\.milliseconds),
            meanJPEGBytes: Double(all.map(\.bytes).reduce(0, +)) / Double(all.count),
            floorMeanJPEGBytes: Double(taken.floor.map(\.bytes).reduce(0, +)) / Double(taken.floor.count),
            viewfinderFrames: window.frames, viewfinderMissing: window.missing)
    }

    private static func shoot(_ size: PhotoBenchmark.Size, photos: CapturePhotoOutput, gaps: [Double],
                              directory: URL, progress: (String) -> Void) async throws -> Taken {
        func photo(_ number: Int, toFile: Bool) async throws -> PhotoFigures {
            let settings = CapturePhotoSettings(photoQualityPrioritization: PhotoBenchmark.prioritization,
                                                fileURL: toFile ? directory.appendingPathComponent("engine-\(number).jpg") : nil)
            let called = Monotonic.now
            let photo = try await photos.capturePhoto(with: settings)
            let returned = Monotonic.now
            if let url = settings.fileURL, !FileManager.default.fileExists(atPath: url.path) {
                throw BenchmarkError.noFrame("photo \(number) was not written to \(url.path)")
            }
            return PhotoFigures(photo, callerMilliseconds: Monotonic.milliseconds(from: called, to: returned))
        }

        // Let the ring fill, then one unmeasured shot and encode: first-use costs are not what is measured.
        try await Task.sleep(for: .milliseconds(500))
        let warmUp = try await photo(0, toFile: true)
        let floor = try JPEGFloor(size, quality: warmUp.jpegQuality)
        defer { floor.shutDown() }
        _ = try floor.encode(to: directory.appendingPathComponent("floor-0.jpg"))

        var taken = Taken()
        for (index, gap) in gaps.enumerated() {
            for step in 0..<Turn.allCases.count {
                try await Task.sleep(for: .seconds(gap))
                switch Turn.allCases[(index + step) % Turn.allCases.count] {
                case .photoToFile: taken.toFile.append(try await photo(index + 1, toFile: true))
                case .photoInMemory: taken.inMemory.append(try await photo(index + 1, toFile: false))
                case .floorToFile: taken.floor.append(try floor.encode(to: directory.appendingPathComponent("floor-\(index + 1).jpg")))
                case .floorInMemory: taken.floorInMemory.append(try floor.encode())
                }
            }
            if (index + 1) % 10 == 0 || index + 1 == gaps.count {
                progress(String(format: "photo %@: shot %d/%d  lag %.1f ms  request → file %.1f ms  in memory %.1f ms  floor %.1f ms",
                                size.label, index + 1, gaps.count, taken.toFile.last!.shutterLagMilliseconds,
                                taken.toFile.last!.latencyMilliseconds, taken.inMemory.last!.latencyMilliseconds,
                                taken.floor.last!.milliseconds))
            }
        }
        return taken
    }
}

/// Timestamps of the frames a CaptureVideoDataOutput delivered, and their format.
final class FrameTimes: Sendable {
    private struct State {
        var timestamps: [UInt64] = []
        var info: VideoInfo?
    }
    private let state = Mutex(State())

    func add(_ frame: SampleBuffer) {
        let (time, info) = (frame.presentationTimeStamp, frame.videoInfo)
        state.withLock { state in
            if state.info == nil { state.info = info }
            state.timestamps.append(time)
        }
    }

    var timestamps: [UInt64] { state.withLock { $0.timestamps } }
    var info: VideoInfo? { state.withLock { $0.info } }
}

/// The latency floor: what the engine does for a photo, done with plain GStreamer in a pipeline of this
/// process (appsrc → jpegenc → appsink): a frame of the test camera's pattern pushed by reference (a buffer
/// header sharing its memory: the engine's ring hands its frame over without a copy too), encoded at the size
/// and quality of the engine's photos, the JPEG pulled and, when a file is asked for, written the way the
/// engine writes it (beside the target, then renamed). jpegenc's work, two thread hand-offs and the write,
/// with none of the engine's ring, EXIF or range conversion.
final class JPEGFloor {
    private let pipeline: Pipeline
    private let source: AppSource
    private let sink: AppSink
    private let frames: [Sample]
    private var encoded = 0
    static let distinctFrames = 4

    init(_ size: PhotoBenchmark.Size, quality: Int) throws {
        let caps = try Caps(size.caps)
        frames = try Self.testFrames(size, count: Self.distinctFrames)
        pipeline = try Pipeline.launch("appsrc name=src format=time ! jpegenc quality=\(quality) "
                                       + "! appsink name=sink sync=false enable-last-sample=false")
        guard let source = pipeline.element(named: "src").flatMap(AppSource.init),
              let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
            throw BenchmarkError.setup("the floor pipeline lacks its appsrc or appsink")
        }
        self.source = source
        self.sink = sink
        source.setCaps(caps)
        try pipeline.setState(.playing)
    }

    func shutDown() { pipeline.shutDown() }

    /// Encodes the next frame (and writes it to `file`): milliseconds from before the push until the JPEG is
    /// pulled (and the file put in place), and the JPEG's size.
    func encode(to file: URL? = nil) throws -> (milliseconds: Double, bytes: Int) {
        let frame = frames[encoded % frames.count]
        let presentationTime = ClockTime(encoded) * ClockTime.second / ClockTime(Contestants.frameRate)
        encoded += 1
        let pushed = Monotonic.now
        guard source.push(sharing: frame, presentationTime: presentationTime),
              let jpeg = sink.pullSample(timeout: 5 * ClockTime.second) else {
            throw BenchmarkError.noFrame("the floor's jpegenc returned no JPEG within 5 s")
        }
        if let file {
            guard jpeg.withBytes({ Self.writeAtomically($0, to: file.path) }) == true else {
                throw BenchmarkError.setup("the floor could not write \(file.path)")
            }
        }
        let done = Monotonic.now
        return (Monotonic.milliseconds(from: pushed, to: done), jpeg.byteCount)
    }

    /// As the engine writes a photo: a file beside the target, linked to its name (never over a file) and
    /// unlinked, no fsync.
    private static func writeAtomically(_ bytes: UnsafeRawBufferPointer, to path: String) -> Bool {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return false }
        var written = 0
        while written < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { close(descriptor); return false }
            written += count
        }
        defer { unlink(temporary) }
        return close(descriptor) == 0 && link(temporary, path) == 0
    }

    /// Frames of the test camera's moving pattern, kept out of a short videotestsrc run (deep copies, so
    /// they outlive its buffer pool).
    private static func testFrames(_ size: PhotoBenchmark.Size, count: Int) throws -> [Sample] {
        let pipeline = try Pipeline.launch("\(PhotoBenchmark.stillSource) num-buffers=\(count) ! \(size.caps) "
                                           + "! appsink name=sink sync=false")
        defer { pipeline.shutDown() }
        guard let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
            throw BenchmarkError.setup("the test frame pipeline lacks its appsink")
        }
        try pipeline.setState(.playing)
        return try (0..<count).map { _ in
            guard let sample = sink.pullSample(timeout: 5 * ClockTime.second)?.copy() else {
                throw BenchmarkError.noFrame("videotestsrc made no \(size.label) frame")
            }
            return sample
        }
    }
}

/// A small reproducible generator (SplitMix64), so every run pauses the same way between shots.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
