import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// Camera switching (seed Pattern 6) on two real V4L2 cameras (inside ../shared/testbed/v4l2-vm with
/// `--vivid-opts "n_devs=2 node_types=0x1,0x1"`). One session with a frame output and a movie being recorded
/// runs through every round; each round switches to the other camera inside begin/commitConfiguration, timed
/// from this side:
///   switch → first frame   commitConfiguration called → the first frame of the new camera (told by its size:
///                          /dev/video0 runs at .low, 320x180, /dev/video1 at .vga640x480) at the consumer of
///                          sampleBuffers(); held against
///   plain start            `v4l2src ! caps ! appsink` on the same camera, at the caps the session gets from it,
///                          PLAYING → first frame, in this process right before the switch (the session running
///                          on the other camera meanwhile, as during the switch); goal ≤ 1.2×
///   gap across the switch  the last frame of the old camera → the first of the new one, by their timestamps,
///                          in frame intervals of the new camera: what the recording (fed by the same tee) gets
///                          at best; goal ≤ 2. The movie's own largest gap (ffprobe) is reported beside it.
///   then the second frame  the new camera's first → second frame, by their timestamps: a source that negotiates
///                          again once linked (v4l2src: STREAMOFF, a new pool, STREAMON) leaves a hole here.
/// `--only switch-test` runs the same between two test cameras of the same sizes and rates, against
/// `videotestsrc ! capsfilter ! appsink`: no device time on either side, so the engine's own work per switch shows,
/// measured on this machine's CPU rather than the VM's emulated one.
enum SwitchBenchmark {
    static let nodes = ["/dev/video0", "/dev/video1"]
    static let presets: [CaptureSession.Preset] = [.low, .vga640x480]
    /// What those presets give on vivid, and what the test cameras offer: (width, height, frames per second).
    static let formats = [(320, 180, 30), (640, 480, 25)]

    /// The two cameras switched between, the caps each is started at, and the plain start held against a switch.
    struct Cameras {
        var label: String
        var devices: [CaptureDevice]
        var caps: [String]
        /// PLAYING → first frame of a plain pipeline on camera `index`, in seconds.
        var plainStart: @Sendable (_ index: Int) throws -> Double
    }

    /// vivid's two cameras (inside the VM).
    static func v4l2Cameras() throws -> Cameras {
        guard nodes.allSatisfy(FileManager.default.fileExists(atPath:)) else {
            throw BenchmarkError.setup("\(nodes.joined(separator: " and ")) are not here: run inside ../shared/testbed/v4l2-vm "
                                       + "--vivid-opts \"n_devs=2 node_types=0x1,0x1\"")
        }
        let cameras = try nodes.map { node in
            guard let camera = CaptureDevice.allDevices.first(where: { $0.nodePath == node }) else {
                throw BenchmarkError.setup("\(node) is not listed as a camera")
            }
            return camera
        }
        let caps = try cameras.indices.map { index in
            let (width, height, rate) = formats[index]
            guard let format = cameras[index].formats.first(where: { $0.width == width && $0.height == height && $0.pixelFormat == "NV12" }) else {
                throw BenchmarkError.setup("\(cameras[index]) offers no NV12 \(width)x\(height)")
            }
            return "video/x-raw,format=\(format.pixelFormat),width=\(width),height=\(height),framerate=\(rate)/1"
        }
        return Cameras(label: nodes.joined(separator: " and "), devices: cameras, caps: caps) { index in
            try InterruptionBenchmark.plainStart(caps: caps[index], device: nodes[index])
        }
    }

    /// Two built-in test cameras of vivid's sizes and rates, on any machine: no device time, so what a switch
    /// costs beyond a plain start is the engine's own work, on this machine's CPU rather than the VM's emulated one.
    static func testCameras() -> Cameras {
        let patterns: [TestCameraOptions.Pattern] = [.smpte, .checkers]
        let devices = formats.indices.map { index in
            CaptureDevice.makeTestCamera(uniqueID: "bench-switch-\(index)", options: .init(
                pattern: patterns[index], motion: 2, sizes: [.init(width: formats[index].0, height: formats[index].1)],
                maxFrameRate: formats[index].2))
        }
        let caps = formats.map { "video/x-raw,format=NV12,width=\($0.0),height=\($0.1),framerate=\($0.2)/1" }
        return Cameras(label: "two test cameras", devices: devices, caps: caps) { index in
            // The test camera's own source, as SourceBuilder makes it.
            try Contestants.plainStart("videotestsrc is-live=true pattern=\(patterns[index].rawValue) horizontal-speed=2 ! capsfilter caps=\"\(caps[index])\"")
        }
    }

    static func run(rounds: Int, cameras chosen: Cameras, progress: (String) -> Void) async throws -> SwitchReport {
        let cameras = chosen.devices
        let caps = chosen.caps
        let session = CaptureSession(name: "bench-switch")
        let frames = CaptureVideoDataOutput()
        let movie = CaptureMovieFileOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: cameras[0]))
        try session.add(CaptureDeviceInput(device: .testMicrophone))
        try session.add(frames)
        try session.add(movie)
        session.sessionPreset = presets[0]
        try session.commitAndWait()
        let log = SwitchFrameLog(frames)
        try await session.start()
        guard await log.waitFor(5, within: .seconds(20)) else { throw BenchmarkError.setup("no frames from \(cameras[0])") }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-bench-switch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("switching.mp4")
        let recording = RecordingDelegate()
        movie.startRecording(to: url, recordingDelegate: recording)
        try await Task.sleep(for: .seconds(2))

        var report = SwitchReport(cameras: chosen.label, caps: caps, rounds: rounds)
        for round in 1...rounds * 2 {
            let target = round % 2
            report.targets.append(target)
            report.plainStartSeconds.append(try chosen.plainStart(target))
            try await Task.sleep(for: .milliseconds(500))
            let before = log.count
            let began = ContinuousClock.now
            session.beginConfiguration()
            for input in session.inputs where (input as? CaptureDeviceInput)?.device.mediaType == .video { session.removeInput(input) }
            try session.add(CaptureDeviceInput(device: cameras[target]))
            session.sessionPreset = presets[target]
            try session.commitAndWait()
            let width = formats[target].0
            guard let (index, arrival) = await log.first(after: before, within: .seconds(20), where: { $0.width == width }) else {
                throw BenchmarkError.setup("no frame of \(cameras[target]) within 20 s of the switch")
            }
            report.switchToFirstFrameSeconds.append((arrival - began).inSeconds)
            let gap = log.gapBefore(index)
            report.gapFrameIntervals.append(gap * Double(formats[target].2))
            progress(String(format: "switch: round %d/%d to %@: first frame after %.0f ms (plain start %.0f ms), gap %.0f ms",
                            round, rounds * 2, cameras[target].nodePath ?? cameras[target].uniqueID, report.switchToFirstFrameSeconds.last! * 1000,
                            report.plainStartSeconds.last! * 1000, gap * 1000))
            try await Task.sleep(for: .seconds(1))
            if let next = log.interval(after: index) { report.secondFrameSeconds.append(next) }
        }
        movie.stopRecording()
        guard let error = await recording.finished(within: .seconds(60)) else { throw BenchmarkError.setup("the recording did not finish") }
        await session.stop()
        if let error { throw BenchmarkError.setup("the recording failed: \(error)") }
        report.movieLargestGapSeconds = try largestGap(url)
        return report
    }

    /// The longest interval between consecutive video frames of the movie, as ffprobe reads it.
    static func largestGap(_ url: URL) throws -> Double {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
        probe.arguments = ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time", "-of", "csv=p=0", url.path]
        let output = Pipe()
        probe.standardOutput = output
        try probe.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        probe.waitUntilExit()
        let times = text.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
        guard times.count > 1 else { throw BenchmarkError.setup("ffprobe found no frames in the movie: \(text)") }
        return zip(times.dropFirst(), times).map { $0 - $1 }.max()!
    }
}

/// Each frame's size, timestamp and arrival.
private final class SwitchFrameLog: Sendable {
    struct Entry: Sendable { var width: Int; var pts: Double; var arrival: ContinuousClock.Instant }
    private let entries = Locked<[Entry]>([])
    private let task: Task<Void, Never>

    init(_ output: CaptureVideoDataOutput) {
        let stream = output.sampleBuffers()
        let entries = self.entries
        task = Task { for await frame in stream { entries.withLock { $0.append(Entry(width: frame.width, pts: frame.presentationTime, arrival: .now)) } } }
    }

    deinit { task.cancel() }

    var count: Int { entries.withLock { $0.count } }

    func waitFor(_ count: Int, within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while self.count < count, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return self.count >= count
    }

    func first(after index: Int, within limit: Duration, where matches: (Entry) -> Bool) async -> (Int, ContinuousClock.Instant)? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let found = entries.withLock({ list in list.indices.dropFirst(index).first { matches(list[$0]) }.map { ($0, list[$0].arrival) } }) {
                return found
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return nil
    }

    /// Seconds between the frame at `index` and the one before it, by their timestamps.
    func gapBefore(_ index: Int) -> Double {
        entries.withLock { list in index > 0 ? list[index].pts - list[index - 1].pts : 0 }
    }

    /// Seconds from the frame at `index` to the next one, by their timestamps, once there is one.
    func interval(after index: Int) -> Double? {
        entries.withLock { list in index + 1 < list.count ? list[index + 1].pts - list[index].pts : nil }
    }
}

private final class RecordingDelegate: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
    private let result = Locked<(any Error)??>(nil)

    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        result.withLock { $0 = .some(error) }
    }

    /// nil when it did not finish in time; else the error it finished with, if any.
    func finished(within limit: Duration) async -> (any Error)?? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let done = result.withLock({ $0 }) { return .some(done) }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}

struct SwitchReport: Codable {
    var cameras: String
    var caps: [String]
    var rounds: Int
    /// Which camera (an index into `caps`) each switch went to; the plain start before it was on the same one.
    var targets: [Int] = []
    var plainStartSeconds: [Double] = []
    var switchToFirstFrameSeconds: [Double] = []
    /// Last frame of the old camera → first of the new one, in the new camera's frame intervals.
    var gapFrameIntervals: [Double] = []
    /// The new camera's first → second frame, by their timestamps.
    var secondFrameSeconds: [Double] = []
    var movieLargestGapSeconds: Double?

    func table() -> [String] {
        func ms(_ values: [Double]) -> String {
            String(format: "median %5.0f ms, worst %5.0f ms", Statistics.median(values) * 1000, (values.max() ?? 0) * 1000)
        }
        let ratio = Statistics.median(switchToFirstFrameSeconds) / Statistics.median(plainStartSeconds)
        let worstGap = gapFrameIntervals.max() ?? .infinity
        return [
            "Camera switches between \(cameras) (\(caps.joined(separator: " / "))), "
                + "\(switchToFirstFrameSeconds.count) switches while recording, timed from outside the session",
            "  switch → first frame of the new camera  \(ms(switchToFirstFrameSeconds))",
            "  plain source PLAYING → 1st frame        \(ms(plainStartSeconds))",
            String(format: "  ratio of the medians                    %.2f×   goal ≤ 1.2× ", ratio) + (ratio <= 1.2 ? "met" : "MISSED"),
        ] + caps.indices.map { camera in
            // The cameras' plain starts differ (frame rate, size), so one median of both can hide either.
            let picked = targets.indices.filter { targets[$0] == camera }
            let switches = picked.map { switchToFirstFrameSeconds[$0] }, plain = picked.map { plainStartSeconds[$0] }
            return String(format: "    to camera %d: switch median %.1f ms, plain %.1f ms, ratio %.2f×", camera + 1,
                          Statistics.median(switches) * 1000, Statistics.median(plain) * 1000,
                          Statistics.median(switches) / Statistics.median(plain))
        } + [
            String(format: "  gap across a switch (frame intervals)   median %.2f, worst %.2f   goal ≤ 2 ",
                   Statistics.median(gapFrameIntervals), worstGap) + (worstGap <= 2 ? "met" : "MISSED"),
            "  the new camera's first → second frame   \(ms(secondFrameSeconds))",
            String(format: "  the movie's largest gap (ffprobe)       %.0f ms", (movieLargestGapSeconds ?? .nan) * 1000),
        ]
    }
}
