import Foundation
import GCapture
import GStreamerKit

// The photo benchmark's child processes: GStreamer's camerabin, driven by a short Python script (its
// start-capture action signal cannot be emitted from Swift: g_signal_emit_by_name is variadic), and the
// engine's burst, run by this program in a child mode so that wait4 accounts its CPU alone.

// MARK: - camerabin

/// What camerabin's sequential shots measured.
struct CamerabinShots: Codable {
    var jpegQuality: Int
    /// Caps of the frames leaving the camera source's image pad.
    var imageCaps: String
    /// Captured frame's timestamp − running time at start-capture, ms.
    var shutterLags: [Double]
    /// start-capture → image-done (posted once the file is written and closed), ms.
    var pressToFile: [Double]
    var frameToFile: [Double]
    var failedShots: Int
    var viewfinderFrames: Int
    var viewfinderMissing: Int
}

enum Camerabin {
    /// Exit status of the script when Python lacks GStreamer's introspection (PyGObject).
    static let missingModules: Int32 = 3
    /// pyenv and virtualenv interpreters rarely see the distribution's python3-gi: the system one first.
    static let interpreters = [(path: "/usr/bin/python3", searchPath: false), (path: "python3", searchPath: true)]

    /// camerabin (wrappercamerabinsrc around `videotestsrc is-live=true`, the viewfinder a fakesink like the
    /// engine's appsink, sync=false), in image mode, taking one shot after each pause in `gaps`.
    static func shots(_ size: PhotoBenchmark.Size, quality: Int, gaps: [Double],
                      directory: URL) throws(BenchmarkError) -> CamerabinShots {
        let arguments = ["-c", script, String(size.width), String(size.height), String(Contestants.frameRate),
                         String(quality), gaps.map { String(Int(($0 * 1000).rounded())) }.joined(separator: ","),
                         directory.appendingPathComponent("camerabin-%d.jpg").path]
        let timeout = gaps.reduce(0, +) + Double(gaps.count) * 5 + 30
        var unusable: [String] = []
        for interpreter in interpreters {
            if !interpreter.searchPath, !FileManager.default.isExecutableFile(atPath: interpreter.path) { continue }
            let usage: ChildUsage
            do {
                usage = try ChildProcess.run(interpreter.path, arguments, searchPath: interpreter.searchPath, timeout: timeout)
            } catch {
                unusable.append("\(interpreter.path): \(error)")
                continue
            }
            let line = usage.stdout.split(separator: "\n").last.map(String.init) ?? ""
            if usage.exitCode == missingModules {
                unusable.append("\(interpreter.path): \(line)")
                continue
            }
            guard usage.succeeded else {
                throw .child("camerabin script (\(interpreter.path)) ended with \(usage.endDescription): \(line)")
            }
            guard let shots = try? JSONDecoder().decode(CamerabinShots.self, from: Data(line.utf8)) else {
                throw .child("camerabin script printed no result: \(usage.stdout.debugDescription)")
            }
            guard shots.imageCaps.contains("width=(int)\(size.width)"), shots.imageCaps.contains("height=(int)\(size.height)"),
                  shots.jpegQuality == quality else {
                throw .child("camerabin captured \(shots.imageCaps) at JPEG quality \(shots.jpegQuality)")
            }
            return shots
        }
        throw .setup("no python3 with PyGObject and GStreamer 1.0 (apt-get install python3-gi gir1.2-gstreamer-1.0): "
                     + unusable.joined(separator: "; "))
    }

    /// argv: width height fps quality gaps-ms(comma-separated) location. Prints one JSON line.
    static let script = #"""
        import json, sys, threading, time
        try:
            import gi
            gi.require_version("Gst", "1.0")
            from gi.repository import Gst
        except (ImportError, ValueError) as error:
            print(json.dumps({"error": "no GStreamer introspection: %s" % error}))
            sys.exit(3)

        def fail(message):
            print(json.dumps({"error": message}))
            sys.exit(1)

        width, height, fps, quality = (int(value) for value in sys.argv[1:5])
        gaps = [int(value) / 1000 for value in sys.argv[5].split(",")]
        location = sys.argv[6]
        Gst.init(None)

        caps = Gst.Caps.from_string("video/x-raw,format=NV12,width=%d,height=%d,framerate=%d/1" % (width, height, fps))
        camera = Gst.ElementFactory.make("camerabin", None)
        source = Gst.ElementFactory.make("wrappercamerabinsrc", None)
        test_source = Gst.ElementFactory.make("videotestsrc", None)
        viewfinder = Gst.ElementFactory.make("fakesink", None)
        if None in (camera, source, test_source, viewfinder):
            fail("camerabin, wrappercamerabinsrc, videotestsrc or fakesink is missing")
        test_source.set_property("is-live", True)
        Gst.util_set_object_arg(test_source, "pattern", "smpte")
        test_source.set_property("horizontal-speed", 2)
        source.set_property("video-source", test_source)
        viewfinder.set_property("sync", False)
        camera.set_property("camera-source", source)
        camera.set_property("viewfinder-sink", viewfinder)
        camera.set_property("viewfinder-caps", caps)
        camera.set_property("image-capture-caps", caps)
        camera.set_property("mode", 1)  # still images
        camera.set_property("location", location)

        encoders = []
        def element_added(_bin, _parent, element):
            factory = element.get_factory()
            if factory is not None and factory.get_name() == "jpegenc":
                element.set_property("quality", quality)
                encoders.append(element)
        camera.connect("deep-element-added", element_added)

        lock = threading.Lock()
        captured = []     # timestamps of the frames leaving the source's image pad
        viewfinder_times = []
        done = threading.Event()
        finished = {}

        def running_time():
            return camera.get_clock().get_time() - camera.get_base_time()

        def on_message(_bus, message):
            if message.type == Gst.MessageType.ELEMENT and message.get_structure().get_name() == "image-done":
                finished["at"] = running_time()
                done.set()
            elif message.type == Gst.MessageType.ERROR:
                finished["error"] = message.parse_error()[0].message
                done.set()
            return Gst.BusSyncReply.PASS

        def on_image(_pad, info):
            with lock:
                captured.append(info.get_buffer().pts)
            return Gst.PadProbeReturn.OK

        def on_viewfinder(_pad, info):
            with lock:
                viewfinder_times.append(info.get_buffer().pts)
            return Gst.PadProbeReturn.OK

        camera.get_bus().set_sync_handler(on_message)
        if camera.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            fail("camerabin did not start")
        if camera.get_state(5 * Gst.SECOND)[1] != Gst.State.PLAYING:
            fail("camerabin did not reach PLAYING: %s" % finished.get("error", "no error"))
        image_pad = source.get_static_pad("imgsrc")
        image_pad.add_probe(Gst.PadProbeType.BUFFER, on_image)
        viewfinder.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, on_viewfinder)
        time.sleep(0.5)

        def shoot():
            with lock:
                del captured[:]
            finished.pop("at", None)
            done.clear()
            press = running_time()
            camera.emit("start-capture")
            if not done.wait(5) or "error" in finished:
                return None
            with lock:
                frame = captured[0] if captured else None
            return None if frame is None else (press, frame, finished["at"])

        shoot()  # first-use costs: not measured
        image_caps = image_pad.get_current_caps()
        shots, failed = [], 0
        for gap in gaps:
            time.sleep(gap)
            shot = shoot()
            if shot is None:
                failed += 1
            else:
                shots.append(shot)
        camera.set_state(Gst.State.NULL)
        if "error" in finished:
            fail(finished["error"])
        if not shots:
            fail("no shot completed")

        first, last = shots[0][0], shots[-1][2]
        with lock:
            shown = sorted(set(t for t in viewfinder_times if first <= t <= last))
        slots = round((shown[-1] - shown[0]) / (Gst.SECOND / fps)) + 1 if shown else 0
        print(json.dumps({
            "jpegQuality": encoders[0].get_property("quality") if encoders else -1,
            "imageCaps": image_caps.to_string() if image_caps else "",
            "shutterLags": [(frame - press) / 1e6 for press, frame, _ in shots],
            "pressToFile": [(written - press) / 1e6 for press, _, written in shots],
            "frameToFile": [(written - frame) / 1e6 for _, frame, written in shots],
            "failedShots": failed,
            "viewfinderFrames": len(shown),
            "viewfinderMissing": max(0, slots - len(shown)),
        }))
        """#
}

// MARK: - The burst

/// Part 3: one photo requested per frame interval for a while, at .balanced, each written to a file, while
/// a CaptureVideoDataOutput on the same session counts frames. Each run is a child process reaped with wait4,
/// so CPU per photo is (CPU of the burst − CPU of the same session running as long without photos) / photos.
/// The floor (the goal's) is jpegenc's CPU per frame in gst-launch-1.0: CPU with jpegenc − CPU without, per
/// frame, same pattern, size and quality. A second floor shows what encoding on demand costs by itself: the
/// same session, and a plain appsrc ! jpegenc ! appsink encoding one frame per request instead of the engine.
enum PhotoBurst {
    static let childMode = "photo-burst"
    static let floorPairs = 5
    static let floorFrames = 150
    /// Before the burst the ring fills and first-use costs are paid, in every kind of run.
    static let settleSeconds = 0.5
    /// After the burst (and its last photo): the last frames reach the frame output.
    static let drainSeconds = 0.5

    /// What a burst child does on each request of the schedule.
    enum Kind: String, Codable, Sendable {
        /// The engine takes a photo (CapturePhotoOutput, fileURL set).
        case photos
        /// Nothing: the same session running as long, the baseline.
        case session
        /// The session runs as in `session`; a plain appsrc ! jpegenc ! appsink encodes a frame of the pattern.
        case onDemandFloor = "on-demand-floor"
    }

    static func measure(_ size: PhotoBenchmark.Size, quality: Int, seconds: Double, rounds: Int,
                        progress: (String) -> Void) throws -> BurstFigures {
        var runs: [BurstRun] = []
        for round in 1...rounds {
            let order: [Kind] = round % 2 == 1 ? [.photos, .session, .onDemandFloor] : [.session, .photos, .onDemandFloor]
            for kind in order {
                let run = try runChild(size, kind: kind, quality: quality, seconds: seconds, round: round)
                runs.append(run)
                progress(String(format: "photo %@: burst round %d/%d %@ %3d/%d requests served  %d frames lost  %.3f CPU s",
                                size.label, round, rounds, kind.rawValue.padding(16), run.report.delivered,
                                run.report.requested, run.report.framesLost, run.cpuSeconds))
            }
        }
        guard runs.contains(where: { $0.kind == .photos && $0.report.delivered > 0 }) else {
            throw BenchmarkError.noFrame("the \(size.label) burst delivered no photo: \(runs.compactMap(\.report.firstError).first ?? "no error")")
        }
        var floorRuns: [FloorRun] = []
        for pair in 1...floorPairs {
            for withEncoder in pair % 2 == 1 ? [true, false] : [false, true] {
                floorRuns.append(try floorRun(size, quality: quality, withEncoder: withEncoder))
            }
            let last = floorRuns.suffix(2)
            progress(String(format: "photo %@: floor pair %d/%d  gst-launch jpegenc %.3f CPU s, without %.3f CPU s",
                            size.label, pair, floorPairs, last.first { $0.withEncoder }!.cpuSeconds,
                            last.first { !$0.withEncoder }!.cpuSeconds))
        }
        return BurstFigures(size: size, quality: quality, seconds: seconds, rounds: rounds, runs: runs, floorRuns: floorRuns)
    }

    private static func runChild(_ size: PhotoBenchmark.Size, kind: Kind, quality: Int, seconds: Double,
                                 round: Int) throws -> BurstRun {
        let directory = try PhotoBenchmark.temporaryDirectory("burst-\(size.label)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let arguments = [childMode, "--kind", kind.rawValue, "--preset", size.preset.rawValue,
                         "--quality", String(quality), "--seconds", String(seconds), "--directory", directory.path]
        let (usage, report) = try ChildProcess.runChild(arguments, timeout: seconds + 60, label: "photo burst (\(kind.rawValue))",
                                                        as: BurstChildReport.self)
        guard report.width == size.width, report.height == size.height,
              report.frameRate == Double(Contestants.frameRate) else {
            throw BenchmarkError.child("photo burst got \(report.width)x\(report.height) frames at \(report.frameRate) fps")
        }
        return BurstRun(round: round, kind: kind, wallSeconds: usage.wallSeconds, userSeconds: usage.userSeconds,
                        systemSeconds: usage.systemSeconds, peakRSSMiB: usage.peakRSSMiB,
                        minorFaults: usage.minorFaults, report: report)
    }

    /// gst-launch-1.0 making `floorFrames` frames of the pattern, encoding them or not.
    private static func floorRun(_ size: PhotoBenchmark.Size, quality: Int, withEncoder: Bool) throws -> FloorRun {
        let description = "\(PhotoBenchmark.stillSource) num-buffers=\(floorFrames) ! \(size.caps) ! "
            + (withEncoder ? "jpegenc quality=\(quality) ! " : "") + "fakesink sync=false"
        let usage = try ChildProcess.gstLaunch(description, timeout: 120)
        return FloorRun(withEncoder: withEncoder, frames: floorFrames, wallSeconds: usage.wallSeconds,
                        cpuSeconds: usage.cpuSeconds)
    }

    // MARK: Child side

    /// `gcapture-bench child photo-burst --kind K --preset P --quality Q --seconds S --directory D`
    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let kind = arguments.value(after: "--kind").flatMap(Kind.init(rawValue:)),
              let preset = arguments.value(after: "--preset").flatMap(CaptureSession.Preset.init(rawValue:)),
              let size = PhotoBenchmark.sizes.first(where: { $0.preset == preset }),
              let quality = arguments.value(after: "--quality").flatMap(Int.init),
              let seconds = arguments.value(after: "--seconds").flatMap(Double.init), seconds > 0,
              let directory = arguments.value(after: "--directory") else {
            printError("child \(childMode): needs --kind, --preset, --quality, --seconds and --directory")
            return 2
        }
        return await ChildProcess.serve(childMode) {
            try await burst(kind, size: size, quality: quality, seconds: seconds,
                            directory: URL(fileURLWithPath: directory, isDirectory: true))
        }
    }

    private static func burst(_ kind: Kind, size: PhotoBenchmark.Size, quality: Int, seconds: Double,
                              directory: URL) async throws -> BurstChildReport {
        let session = CaptureSession(name: "bench-photo-burst")
        let photos = CapturePhotoOutput()
        let frameOutput = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: Contestants.makeTestCamera()))
        try session.add(photos)
        try session.add(frameOutput)
        session.sessionPreset = size.preset
        try session.commitAndWait()
        // Made before the session starts: its frames are generated once, not in the measured seconds.
        let floor = kind == .onDemandFloor ? try JPEGFloor(size, quality: quality) : nil
        defer { floor?.shutDown() }

        let frames = FrameTimes()
        let stream = frameOutput.sampleBuffers()
        let consumer = Task {
            for await frame in stream { frames.add(frame) }
        }
        let sessionStarted = Monotonic.now
        try await session.start()
        var served: Served
        let framesBefore: Int, burstStarted: UInt64, burstDone: UInt64
        do {
            try await Task.sleep(for: .seconds(settleSeconds))
            (framesBefore, burstStarted) = (frames.timestamps.count, Monotonic.now)
            served = try await serveRequests(seconds: seconds) { index in
                // The floor writes each JPEG to a file of its own too, as the burst's photos are.
                if let floor { return .encoded(try floor.encode(to: directory.appendingPathComponent("floor-\(index).jpg")).milliseconds) }
                guard kind == .photos else { return .nothing }
                let settings = CapturePhotoSettings(photoQualityPrioritization: PhotoBenchmark.prioritization,
                                                    fileURL: directory.appendingPathComponent("burst-\(index).jpg"))
                return .photo(Task {
                    do throws(CaptureError) {
                        let called = Monotonic.now
                        let photo = try await photos.capturePhoto(with: settings)
                        return .success(PhotoFigures(photo, callerMilliseconds: Monotonic.milliseconds(from: called, to: Monotonic.now)))
                    } catch {
                        return .failure(error)
                    }
                })
            }
            try await served.awaitPhotos()
            burstDone = Monotonic.now
            try await Task.sleep(for: .seconds(drainSeconds))
        } catch {
            await session.stop()
            throw error
        }
        await session.stop()
        let sessionStopped = Monotonic.now
        await consumer.value

        // The frames whose timestamps fall in the burst: as many slots as frame intervals, from the first
        // frame that reached the output after the burst began.
        let timestamps = frames.timestamps
        guard let info = frames.info, framesBefore < timestamps.count else {
            throw BenchmarkError.noFrame("the frame output delivered nothing during the burst")
        }
        let interval = 1e9 / info.frameRate.doubleValue
        let expected = Int((seconds * info.frameRate.doubleValue).rounded())
        let first = timestamps[framesBefore]
        let inWindow = Set(timestamps.filter { $0 >= first && Double($0 - first) < (Double(expected) - 0.5) * interval }).count
        let delivered = served.photos
        return BurstChildReport(
            kind: kind, width: info.width, height: info.height, frameRate: info.frameRate.doubleValue,
            requested: served.requests, delivered: kind == .photos ? delivered.count : served.encodes.count,
            failed: served.failures.count, firstError: served.failures.first.map { "\($0)" },
            jpegQualities: Array(Set(delivered.map(\.jpegQuality))).sorted(),
            shutterLag: delivered.isEmpty ? nil : Summary(delivered.map(\.shutterLagMilliseconds)),
            latency: delivered.isEmpty ? (served.encodes.isEmpty ? nil : Summary(served.encodes))
                : Summary(delivered.map(\.callerMilliseconds)),
            expectedFrames: expected, framesInWindow: inWindow, framesLost: expected - inWindow,
            framesDroppedByOutput: frameOutput.droppedFrameCount,
            burstSeconds: Monotonic.seconds(from: burstStarted, to: burstDone),
            sessionSeconds: Monotonic.seconds(from: sessionStarted, to: sessionStopped))
    }

    /// What one request of the schedule did.
    enum Request {
        case nothing
        /// A photo on its way: each is a task of its own, so a slow photo never delays the next request.
        case photo(Task<Result<PhotoFigures, CaptureError>, Never>)
        /// A frame encoded by the on-demand floor and written to its file, in this many ms.
        case encoded(Double)
    }

    /// What the schedule's requests came to.
    struct Served {
        var requests = 0
        var pending: [Task<Result<PhotoFigures, CaptureError>, Never>] = []
        var photos: [PhotoFigures] = []
        var failures: [CaptureError] = []
        var encodes: [Double] = []

        mutating func awaitPhotos() async throws {
            for task in pending {
                switch await task.value {
                case .success(let photo): photos.append(photo)
                case .failure(let error): failures.append(error)
                }
            }
            pending = []
        }
    }

    /// One request per frame interval for `seconds`, on a fixed schedule rather than paced by the requests.
    /// Every kind of run wakes up on the same schedule, so all pay for that alike.
    private static func serveRequests(seconds: Double, _ request: (Int) throws -> Request) async throws -> Served {
        let count = Int((seconds * Double(Contestants.frameRate)).rounded())
        let clock = ContinuousClock()
        let start = clock.now
        let interval = Duration.seconds(1) / Contestants.frameRate
        var served = Served()
        for index in 0..<count {
            try await Task.sleep(until: start + interval * index, clock: clock)
            switch try request(index) {
            case .nothing: continue
            case .photo(let task): served.pending.append(task)
            case .encoded(let milliseconds): served.encodes.append(milliseconds)
            }
            served.requests += 1
        }
        try await Task.sleep(until: start + interval * count, clock: clock)
        return served
    }
}

extension BurstFigures {
    init(size: PhotoBenchmark.Size, quality: Int, seconds: Double, rounds: Int, runs: [BurstRun], floorRuns: [FloorRun]) {
        func of(_ kind: PhotoBurst.Kind) -> [BurstRun] { runs.filter { $0.kind == kind } }
        let bursts = of(.photos)
        let worst = bursts.min { $0.report.delivered < $1.report.delivered }!
        let sessionCPU = Statistics.median(of(.session).map(\.cpuSeconds))
        func perRequest(_ kind: PhotoBurst.Kind) -> Double {
            let served = Statistics.median(of(kind).map { Double($0.report.delivered) })
            return (Statistics.median(of(kind).map(\.cpuSeconds)) - sessionCPU) / served * 1000
        }
        let perPhoto = perRequest(.photos)
        let floorPerFrame = Statistics.median((0..<floorRuns.count / 2).map { pair in
            let runs = floorRuns[(pair * 2)..<(pair * 2 + 2)]
            let with = runs.first(where: \.withEncoder)!, without = runs.first { !$0.withEncoder }!
            return (with.cpuSeconds - without.cpuSeconds) / Double(with.frames) * 1000
        })
        let onDemand = perRequest(.onDemandFloor)
        let sessionFaults = Statistics.median(of(.session).map { Double($0.minorFaults) })
        func faultsPerRequest(_ kind: PhotoBurst.Kind) -> Double {
            (Statistics.median(of(kind).map { Double($0.minorFaults) }) - sessionFaults)
                / Statistics.median(of(kind).map { Double($0.report.delivered) })
        }
        let lost = runs.map(\.report.framesLost).max()!
        self.init(
            seconds: seconds, rounds: rounds, jpegQuality: quality, requested: worst.report.requested,
            delivered: worst.report.delivered, failed: bursts.map(\.report.failed).max()!,
            firstError: bursts.compactMap(\.report.firstError).first,
            expectedFrames: worst.report.expectedFrames, framesLost: lost,
            burstCPUSeconds: Statistics.median(bursts.map(\.cpuSeconds)), baselineCPUSeconds: sessionCPU,
            onDemandFloorCPUSeconds: Statistics.median(of(.onDemandFloor).map(\.cpuSeconds)),
            cpuMillisecondsPerPhoto: perPhoto, floorCPUMillisecondsPerFrame: floorPerFrame,
            floorPipeline: "gst-launch-1.0 \(PhotoBenchmark.stillSource) num-buffers=\(PhotoBurst.floorFrames) ! \(size.caps) "
                + "! [jpegenc quality=\(quality) !] fakesink",
            ratio: perPhoto / floorPerFrame, meetsCPUGoal: perPhoto / floorPerFrame <= size.burstCPUGoal,
            onDemandFloorCPUMillisecondsPerFrame: onDemand, ratioToOnDemandFloor: perPhoto / onDemand,
            pageFaultsPerPhoto: faultsPerRequest(.photos), onDemandFloorPageFaultsPerFrame: faultsPerRequest(.onDemandFloor),
            meetsDeliveryGoal: lost == 0 && bursts.allSatisfy { $0.report.delivered == $0.report.requested },
            shutterLag: Self.pooled(bursts.map(\.report.shutterLag)), latency: Self.pooled(bursts.map(\.report.latency)),
            onDemandFloorLatency: Self.pooled(of(.onDemandFloor).map(\.report.latency)),
            burstPeakRSSMiB: Statistics.median(bursts.map(\.peakRSSMiB)),
            baselinePeakRSSMiB: Statistics.median(of(.session).map(\.peakRSSMiB)),
            runs: runs, floorRuns: floorRuns)
    }

    private static func pooled(_ summaries: [Summary?]) -> Summary? {
        let samples = summaries.flatMap { $0?.samples ?? [] }
        return samples.isEmpty ? nil : Summary(samples)
    }

    /// What deserves a line of its own under the table.
    var warnings: [String] {
        var warnings: [String] = []
        for run in runs where run.kind == .photos {
            if run.report.failed > 0 {
                warnings.append("round \(run.round): \(run.report.failed) of \(run.report.requested) requests failed, first: \(run.report.firstError ?? "?")")
            }
            if !run.report.jpegQualities.isEmpty, run.report.jpegQualities != [jpegQuality] {
                warnings.append("round \(run.round): JPEG qualities \(run.report.jpegQualities), the floor's \(jpegQuality)")
            }
        }
        for run in runs where run.report.framesLost > 0 {
            warnings.append("round \(run.round) \(run.kind.rawValue): the frame output lost \(run.report.framesLost) of "
                            + "\(run.report.expectedFrames) frames (\(run.report.framesDroppedByOutput) dropped for a late reader)")
        }
        return warnings
    }
}

/// What a burst child prints (one JSON line).
struct BurstChildReport: Codable {
    var kind: PhotoBurst.Kind
    var width: Int
    var height: Int
    var frameRate: Double
    /// Requests made (none in a `session` run), and photos (or floor encodes) that came of them.
    var requested: Int
    var delivered: Int
    var failed: Int
    var firstError: String?
    var jpegQualities: [Int]
    /// Of the burst's photos, ms.
    var shutterLag: Summary?
    /// capturePhoto called → returned (file written) for the photos, or push → file written for the floor's encodes, ms.
    var latency: Summary?
    /// Frame slots in the burst, frames the output delivered in them, and the difference.
    var expectedFrames: Int
    var framesInWindow: Int
    var framesLost: Int
    /// Frames the output's stream discarded because its reader was late (included in framesLost).
    var framesDroppedByOutput: Int
    /// First request → last photo finished.
    var burstSeconds: Double
    /// start() → stop() returned.
    var sessionSeconds: Double
}

/// One burst child, as the parent measured it.
struct BurstRun: Codable {
    var round: Int
    var kind: PhotoBurst.Kind
    var wallSeconds: Double
    var userSeconds: Double
    var systemSeconds: Double
    var peakRSSMiB: Double
    var minorFaults: Int
    var report: BurstChildReport

    var cpuSeconds: Double { userSeconds + systemSeconds }
}

/// One gst-launch-1.0 run of the CPU floor.
struct FloorRun: Codable {
    var withEncoder: Bool
    var frames: Int
    var wallSeconds: Double
    var cpuSeconds: Double
}
