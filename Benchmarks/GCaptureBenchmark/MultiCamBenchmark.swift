import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// Several cameras at once (CaptureMultiCamSession) against one, on real V4L2 cameras: inside
/// ../shared/testbed/v4l2-vm with `--vivid-opts "n_devs=4 node_types=0x1,0x1,0x1,0x1"`. Every camera runs at
/// 640x480 (vivid: 25 fps) with a frame output whose frames are read in Swift. Rounds alternate one camera and all
/// of them, in this process:
///   start        start() called → the first frame of every camera at its consumer; goal: all ≤ 1.5× one. Beside
///                it the plain floor: `v4l2src ! caps ! appsink` pipelines, built ahead, one alone and one per camera
///                set playing at the same moment from threads of their own, PLAYING → every pipeline's first frame;
///                and the same with the devices opened and probed ahead (what a start costs without v4l2src's
///                format probing: vivid lists 83 formats).
///   CPU          this process's CPU over --seconds of steady capture; goal: all ≤ 4.2× one per camera
///                count, with the frames each delivered beside it (CPU bought by dropping frames is no gain).
/// vivid draws its frames in its own kernel thread, outside the process: the CPU is the engine's.
enum MultiCamBenchmark {
    static let nodes = ["/dev/video0", "/dev/video1", "/dev/video2", "/dev/video3"]

    struct Report: Encodable {
        var cameras: Int
        var seconds: Double
        var startOneSeconds: [Double] = []
        var startAllSeconds: [Double] = []
        /// This process's CPU from the start's call to the last first frame: a start is CPU-bound work (v4l2src
        /// probing the device's formats, negotiation, the buffer pool), so N cameras on fewer cores cannot start in
        /// less than N / cores times one's.
        var startCPUOneSeconds: [Double] = []
        var startCPUAllSeconds: [Double] = []
        var plainStartCPUOneSeconds: [Double] = []
        var plainStartCPUAllSeconds: [Double] = []
        var processors = ProcessInfo.processInfo.activeProcessorCount
        var cpuOneSeconds: [Double] = []
        var cpuAllSeconds: [Double] = []
        var framesOne: [Int] = []
        var framesAll: [Int] = []
        var plainStartOneSeconds: [Double] = []
        var plainStartAllSeconds: [Double] = []
        /// The same with every device opened and its formats probed before (READY and a caps query): what is
        /// left of a start when the negotiation's probing is done ahead.
        var probedStartOneSeconds: [Double] = []
        var probedStartAllSeconds: [Double] = []

        var startRatio: Double { Statistics.median(startAllSeconds) / Statistics.median(startOneSeconds) }
        var plainStartRatio: Double { Statistics.median(plainStartAllSeconds) / Statistics.median(plainStartOneSeconds) }
        var probedStartRatio: Double { Statistics.median(probedStartAllSeconds) / Statistics.median(probedStartOneSeconds) }
        var cpuRatio: Double { Statistics.median(cpuAllSeconds) / Statistics.median(cpuOneSeconds) }
        var frameRatio: Double { Statistics.median(framesAll.map(Double.init)) / Statistics.median(framesOne.map(Double.init)) }
        var startGoal: Double { 1.5 }
        var cpuGoal: Double { 4.2 * Double(cameras) / 4 }
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) async throws -> Report {
        let present = nodes.filter(FileManager.default.fileExists(atPath:))
        guard present.count >= 2 else {
            throw BenchmarkError.setup("fewer than two cameras here: run inside ../shared/testbed/v4l2-vm "
                                       + "--vivid-opts \"n_devs=4 node_types=0x1,0x1,0x1,0x1\"")
        }
        let cameras = try present.map { node in
            guard let camera = CaptureDevice.allDevices.first(where: { $0.nodePath == node }) else {
                throw BenchmarkError.setup("\(node) is not listed as a camera")
            }
            return camera
        }
        var report = Report(cameras: cameras.count, seconds: seconds)
        // The format the engine picks on vivid for .vga640x480.
        let caps = "video/x-raw,format=NV12,width=640,height=480,framerate=25/1"
        for round in 1...rounds {
            let (plainOne, plainAll) = (try plainStartAtOnce(caps: caps, devices: [present[0]]), try plainStartAtOnce(caps: caps, devices: present))
            report.plainStartOneSeconds.append(plainOne.start); report.plainStartCPUOneSeconds.append(plainOne.cpu)
            report.plainStartAllSeconds.append(plainAll.start); report.plainStartCPUAllSeconds.append(plainAll.cpu)
            report.probedStartOneSeconds.append(try plainStartAtOnce(caps: caps, devices: [present[0]], probedAhead: true).start)
            report.probedStartAllSeconds.append(try plainStartAtOnce(caps: caps, devices: present, probedAhead: true).start)
            progress(String(format: "round %d, plain: one %.1f ms, all %.1f ms; probed ahead: one %.1f ms, all %.1f ms", round,
                            report.plainStartOneSeconds.last! * 1000, report.plainStartAllSeconds.last! * 1000,
                            report.probedStartOneSeconds.last! * 1000, report.probedStartAllSeconds.last! * 1000))
            for group in [[cameras[0]], cameras] {
                let figures = try await measure(group, seconds: seconds)
                if group.count == 1 {
                    report.startOneSeconds.append(figures.start); report.cpuOneSeconds.append(figures.cpu); report.framesOne.append(figures.frames)
                    report.startCPUOneSeconds.append(figures.startCPU)
                } else {
                    report.startAllSeconds.append(figures.start); report.cpuAllSeconds.append(figures.cpu); report.framesAll.append(figures.frames)
                    report.startCPUAllSeconds.append(figures.startCPU)
                }
                progress(String(format: "round %d, %d camera(s): start %.1f ms, CPU %.3f s, %d frames",
                                round, group.count, figures.start * 1000, figures.cpu, figures.frames))
            }
        }
        return report
    }

    /// One camera or several in a multi-camera session: start → every camera's first frame, then the CPU and the
    /// frames of `seconds` of capture.
    private static func measure(_ cameras: [CaptureDevice], seconds: Double) async throws
        -> (start: Double, startCPU: Double, cpu: Double, frames: Int) {
        let session = CaptureMultiCamSession(name: "bench-multicam")
        let outputs: [CaptureVideoDataOutput] = cameras.map { _ in CaptureVideoDataOutput() }
        session.beginConfiguration()
        for (camera, output) in zip(cameras, outputs) {
            let input = try CaptureDeviceInput(device: camera)
            try session.addInputWithNoConnections(input)
            try session.addOutputWithNoConnections(output)
            try session.addConnection(CaptureConnection(inputPorts: input.ports, output: output))
            try session.setSessionPreset(.vga640x480, for: input)
        }
        try await session.commit()
        let counts = Locked<[Int]>(Array(repeating: 0, count: cameras.count))
        let firstFrames = Locked<[ContinuousClock.Instant?]>(Array(repeating: nil, count: cameras.count))
        // Every camera's first frame signals once; the wait below takes them all, with no polling beside the starts.
        let allFirst = DispatchSemaphore(value: 0)
        let readers = outputs.enumerated().map { index, output in
            let stream = output.sampleBuffers()
            return Task {
                for await _ in stream {
                    let first = counts.withLock { counts in
                        counts[index] += 1
                        return counts[index] == 1
                    }
                    if first { firstFrames.withLock { $0[index] = ContinuousClock.now }; allFirst.signal() }
                }
            }
        }
        defer { readers.forEach { $0.cancel() } }
        let began = ContinuousClock.now, cpuAtStart = processCPUSeconds()
        try await session.start()
        let cameraCount = cameras.count
        let allCame = await Task.detached {
            (0..<cameraCount).allSatisfy { _ in allFirst.wait(timeout: .now() + 20) == .success }
        }.value
        guard allCame, let last = firstFrames.withLock({ $0.compactMap { $0 }.max() }) else {
            await session.stop()
            throw BenchmarkError.setup("a camera gave no frame within 20 s of the start")
        }
        let start = began.duration(to: last), startCPU = processCPUSeconds() - cpuAtStart
        // Steady capture: a second to settle, then the measured seconds.
        try await Task.sleep(for: .seconds(1))
        let cpuBefore = processCPUSeconds(), framesBefore = counts.withLock { $0.reduce(0, +) }
        try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        let cpu = processCPUSeconds() - cpuBefore
        let frames = counts.withLock { $0.reduce(0, +) } - framesBefore
        await session.stop()
        return (start.inSeconds, startCPU, cpu, frames)
    }

    /// Plain pipelines on every camera set playing at the same moment, each from a thread of its own: from that
    /// moment to the last pipeline's first frame. The pipelines are built first and their threads wait at a
    /// barrier: started through Dispatch's pool instead, they ran one after another on two cores (each thread
    /// blocked in its start, the pool gave the next one a thread only ~100 ms later), so "all" measured one start
    /// four times over, never four at once.
    /// `probedAhead`: each device opened and its formats probed before that moment (READY and a caps query).
    private static func plainStartAtOnce(caps: String, devices: [String], probedAhead: Bool = false) throws -> (start: Double, cpu: Double) {
        let pipelines = try devices.map { device in
            try Pipeline.launch("v4l2src device=\(device) ! \(caps) ! appsink name=sink sync=false max-buffers=1 drop=true")
        }
        defer { pipelines.forEach { $0.shutDown() } }
        let firstFrames = Locked<[ContinuousClock.Instant?]>(Array(repeating: nil, count: devices.count))
        let allFirst = DispatchSemaphore(value: 0)
        for (index, pipeline) in pipelines.enumerated() {
            guard let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
                throw BenchmarkError.setup("the plain V4L2 pipeline has no appsink")
            }
            sink.setSampleHandler { _ in
                let first = firstFrames.withLock { frames in
                    defer { if frames[index] == nil { frames[index] = ContinuousClock.now } }
                    return frames[index] == nil
                }
                if first { allFirst.signal() }
            }
        }
        if probedAhead {
            for pipeline in pipelines {
                try pipeline.setState(.ready)
                _ = pipeline.elements(madeBy: "v4l2src").first?.staticPad("src")?.queryCaps()
            }
        }
        let failures = Locked<[String]>([])
        let ready = DispatchGroup(), go = DispatchSemaphore(value: 0)
        for pipeline in pipelines {
            ready.enter()
            Thread.detachNewThread {
                ready.leave()
                go.wait()
                do { try pipeline.setState(.playing) } catch { failures.withLock { $0.append("\(error)") } }
            }
        }
        ready.wait()
        let began = ContinuousClock.now, cpuAtStart = processCPUSeconds()
        for _ in pipelines { go.signal() }
        let allCame = (0..<pipelines.count).allSatisfy { _ in allFirst.wait(timeout: .now() + 10) == .success }
        if let failure = failures.withLock({ $0.first }) { throw BenchmarkError.setup("a plain pipeline did not start: \(failure)") }
        guard allCame, let last = firstFrames.withLock({ $0.compactMap { $0 }.max() }) else {
            throw BenchmarkError.setup("a plain pipeline delivered no frame in 10 s")
        }
        return ((last - began).inSeconds, processCPUSeconds() - cpuAtStart)
    }

    private static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    static func table(_ report: Report) -> String {
        func verdict(_ met: Bool) -> String { met ? "MET" : "MISSED" }
        return String(format: """
            Several cameras (CaptureMultiCamSession, %d vivid cameras at 640x480 against one, frames read in Swift, median of %d)
              start → every camera's first frame   one %.1f ms, all %.1f ms   %.2f×   goal ≤ %.2f×  %@
              plain v4l2src pipelines, the same    one %.1f ms, all %.1f ms   %.2f×
              the same, formats probed ahead      one %.1f ms, all %.1f ms   %.2f×
              CPU of the start, engine             one %.1f ms, all %.1f ms   (plain: one %.1f ms, all %.1f ms)
                a start is CPU-bound: %d cameras on %d processors cannot start in under %.2f× one's
              CPU over %.0f s                      one %.3f s, all %.3f s     %.2f×   goal ≤ %.2f×  %@
              frames delivered                     one %.0f, all %.0f           %.2f×   (every camera's frames: %d×)
            """, report.cameras, report.startOneSeconds.count,
            Statistics.median(report.startOneSeconds) * 1000, Statistics.median(report.startAllSeconds) * 1000, report.startRatio,
            report.startGoal, verdict(report.startRatio <= report.startGoal),
            Statistics.median(report.plainStartOneSeconds) * 1000, Statistics.median(report.plainStartAllSeconds) * 1000, report.plainStartRatio,
            Statistics.median(report.probedStartOneSeconds) * 1000, Statistics.median(report.probedStartAllSeconds) * 1000, report.probedStartRatio,
            Statistics.median(report.startCPUOneSeconds) * 1000, Statistics.median(report.startCPUAllSeconds) * 1000,
            Statistics.median(report.plainStartCPUOneSeconds) * 1000, Statistics.median(report.plainStartCPUAllSeconds) * 1000,
            report.cameras, report.processors, Double(report.cameras) / Double(min(report.cameras, max(report.processors, 1))),
            report.seconds, Statistics.median(report.cpuOneSeconds), Statistics.median(report.cpuAllSeconds), report.cpuRatio,
            report.cpuGoal, verdict(report.cpuRatio <= report.cpuGoal),
            Statistics.median(report.framesOne.map(Double.init)), Statistics.median(report.framesAll.map(Double.init)), report.frameRatio,
            report.cameras)
    }
}
