import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

/// Seed Pattern 6 on two real V4L2 cameras: vivid with two webcam instances, inside ../shared/testbed/v4l2-vm:
///     v4l2-vm --timeout 600 --quiet --vivid-opts "n_devs=2 node_types=0x1,0x1" -- \
///         .build/debug/gcapturePackageTests.xctest GCaptureTests.CameraSwitchV4L2Tests
/// The two cameras are the same model, so they are asked for different sizes and rates (presets): /dev/video0
/// at .low (320x180, 30 fps), /dev/video1 at .vga640x480 (25 fps, vivid's most at that size). Skips where
/// there are not two cameras, except inside the VM (V4L2VM=1).
final class CameraSwitchV4L2Tests: XCTestCase {
    static let nodes = ["/dev/video0", "/dev/video1"]
    static let presets: [CaptureSession.Preset] = [.low, .vga640x480]

    override func setUpWithError() throws {
        guard Self.nodes.allSatisfy(FileManager.default.fileExists(atPath:)) else {
            if ProcessInfo.processInfo.environment["V4L2VM"] == "1" {
                throw TestEnvironment.MissingPart(description: "inside the v4l2 VM without two cameras: start it with --vivid-opts \"n_devs=2 node_types=0x1,0x1\"")
            }
            // A skip even under CI: .ci/run runs this class inside a VM with two vivid cameras, where they fail (above).
            throw XCTSkip("needs two V4L2 cameras; run inside ../shared/testbed/v4l2-vm with --vivid-opts \"n_devs=2 node_types=0x1,0x1\"")
        }
    }

    private func cameras() throws -> [CaptureDevice] {
        try Self.nodes.map { node in try XCTUnwrap(CaptureDevice.allDevices.first { $0.nodePath == node }, "\(CaptureDevice.allDevices)") }
    }

    /// 20 switches back and forth while recording: frames keep flowing at the new camera's size, the one movie
    /// keeps the first camera's size, plays to its end with every switch in it, and its audio runs throughout.
    func testTwentySwitchesWhileRecordingMakeOneMovieThatPlays() async throws {
        let cameras = try cameras()
        let sizes = try zip(cameras, Self.presets).map { camera, preset in
            let selection = try FormatSelector.select(preset, from: camera.formats, deviceName: camera.description)
            return (width: selection.format.width, rate: selection.frameRate.doubleValue)
        }
        XCTAssertNotEqual(sizes[0].width, sizes[1].width, "the two cameras must differ in size for the scaling to be tested")
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let movie = CaptureMovieFileOutput()
        let session = try makeSession(camera: cameras[0], microphone: .testMicrophone, preset: Self.presets[0], outputs: [frames, movie])
        let errors = Locked<[CaptureSession.RuntimeError]>([])
        let errorTask = Task { for await error in session.runtimeErrors() { errors.withLock { $0.append(error) } } }
        defer { errorTask.cancel() }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let firstFrames = await log.waitFor(5, timeout: 10)
        XCTAssertTrue(firstFrames, "no frames from \(cameras[0])")
        let url = try temporaryFolder().appendingPathComponent("twenty-switches.mp4")
        let recording = await startRecording(movie, to: url)
        let started = Date()
        var switchTimes: [Double] = [], switchMoments: [Double] = []
        for index in 1...20 {
            try await Task.sleep(for: .milliseconds(500))
            let target = index % 2
            let before = log.count
            let began = Date()
            try switchCamera(of: session, to: CaptureDeviceInput(device: cameras[target]), preset: Self.presets[target])
            let committed = Date().timeIntervalSince(began)
            // Frames of the old camera still in the outputs' queues come first.
            let deadline = Date().addingTimeInterval(10)
            var first: FrameLog.Entry?
            while first == nil, Date() < deadline {
                first = log.all.dropFirst(before).first { $0.width == sizes[target].width }
                if first == nil { try await Task.sleep(for: .milliseconds(5)) }
            }
            guard let first else {
                XCTFail("switch \(index) to \(cameras[target]): no frame of it (\(log.count - before) frames since)")
                break
            }
            switchTimes.append(first.arrival.timeIntervalSince(began))
            switchMoments.append(began.timeIntervalSince(started))
            print(String(format: "switch %d to %@: commit returned after %.0f ms, first frame after %.0f ms", index,
                         cameras[target].description, committed * 1000, switchTimes.last! * 1000))
        }
        try await Task.sleep(for: .milliseconds(500))
        movie.stopRecording()
        let elapsed = Date().timeIntervalSince(started)
        let finished = await recording.waitForFinish(timeout: 60)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(try XCTUnwrap(finished, "the recording never finished").error)
        XCTAssertEqual(errors.withLock { $0.map(\.description) }, [], "runtime errors during the switches")
        print("switch → first frame of the new camera: median \((switchTimes.sorted().dropFirst(switchTimes.count / 2).first ?? 0) * 1000) ms, worst \((switchTimes.max() ?? 0) * 1000) ms")

        let frameGap = FrameLog.longestGap(log.all)
        XCTAssertFalse(log.all.contains { !FrameLog.isPicture($0) }, "black frames during the switches")
        let files = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(files, ["twenty-switches.mp4"], "one movie and nothing else (no sidecar left)")
        let probed = try probe(url)
        XCTAssertEqual(probed.videoSize?.width, sizes[0].width, "the movie keeps the first camera's size")
        XCTAssertEqual(Set(probed.codecs), ["h264", "aac"])
        XCTAssertEqual(probed.duration, elapsed, accuracy: 1.5, "the movie's duration against the recording's")
        let audio = try XCTUnwrap((probed.stream("audio")?["duration"] as? String).flatMap(Double.init))
        XCTAssertEqual(audio, probed.duration, accuracy: 0.5, "the audio runs through the switches")
        let counted = try XCTUnwrap(probed.videoFrames)
        // Every frame the recording took in is in the file, decodable.
        // The recording's own account beside the file's, so that a mismatch says where the frames went (seen in CI:
        // 325 decoded against 355 counted; here 345 of 357: the timeline had dropped an encoded key frame of the same
        // moment as the frame before, and the frames after it, in the file, could not be decoded).
        let statistics = movie.lastStatistics
        XCTAssertEqual(Double(counted), Double(statistics.frames), accuracy: 1,
                       "frames in the file against the recording's count; the recording: \(statistics.frames) frames, "
                       + "\(statistics.droppedFrames) dropped, \(statistics.duration) s; the file: \(counted) frames, \(probed.duration) s")
        let slowest = min(sizes[0].rate, sizes[1].rate)
        // Under TCG the encoder keeps up with only about a quarter of the frames (the recording's leaky input
        // drops the rest, with or without switches); CameraSwitchTests holds the full rate on the host.
        XCTAssertGreaterThan(Double(counted), probed.duration * slowest * 0.2, "frames missing from the movie")
        XCTAssertLessThan(Double(counted), probed.duration * max(sizes[0].rate, sizes[1].rate) * 1.1)
        XCTAssertTrue(try ffmpegDecodes(url), "ffmpeg does not decode the movie")
        try assertVideoTimeOnlyGoesForward(url)
        let gap = try largestVideoGap(url)
        print("switches began at \(switchMoments.map { String(format: "%.2f", $0) }) s; the movie's gaps over 100 ms: "
              + (try videoGaps(url, over: 0.1)).map { String(format: "%.2f+%.0fms", $0.at, $0.length * 1000) }.joined(separator: " "))
        print("largest gap: \(gap * 1000) ms in the movie, \(frameGap * 1000) ms between frames delivered")
        // No hole in the movie: under TCG the gaps come from the overloaded encoder and a starved vivid (see the
        // benchmark's `--only switch` for the gap across a switch); CameraSwitchTests holds ≤ 3 intervals on the host.
        XCTAssertLessThan(gap, 3, "the largest gap between two frames in the movie")
    }

    /// A switch to a camera that another program holds: the running camera keeps running, and the commit says
    /// which camera failed.
    func testASwitchToABusyCameraKeepsTheOldOneRunning() async throws {
        let (cameras, session, log, width) = try await runningOnTheFirstCamera()
        // Another program streams from the second camera (its first frame seen: the device is really taken).
        let busy = try Pipeline.launch("v4l2src device=\(Self.nodes[1]) ! appsink name=sink sync=false max-buffers=1 drop=true")
        let sink = try XCTUnwrap(busy.element(named: "sink").flatMap(AppSink.init))
        let streaming = DispatchSemaphore(value: 0)
        let seen = Atomic<Bool>(false)
        sink.setSampleHandler { _ in if !seen.exchange(true, ordering: .relaxed) { streaming.signal() } }
        try busy.setState(.playing)
        XCTAssertEqual(streaming.wait(timeout: .now() + 20), .success, "the other program got no frame")
        XCTAssertThrowsError(try switchCamera(of: session, to: CaptureDeviceInput(device: cameras[1]), preset: Self.presets[1])) { error in
            XCTAssertTrue(self.names(cameras[1], in: error), "\(error)")
        }
        busy.shutDown()
        try await checkStillRunning(session, log, width: width, camera: cameras[0], after: "a switch to a busy camera")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// A switch to a camera that has gone (vivid's disconnect, a USB unplug as the driver sees it: opening it
    /// fails): the running camera keeps running, and the commit says which camera failed. Named to run last in
    /// the class: vivid comes back only once every handle on it has closed, which can take a while.
    func testUnpluggedCameraSwitchedToKeepsTheOldOneRunning() async throws {
        let (cameras, session, log, width) = try await runningOnTheFirstCamera()
        // vivid stays gone while a handle is open, as a USB camera's node does while a program still holds it.
        let handle = open(Self.nodes[1], O_RDWR)
        XCTAssertGreaterThanOrEqual(handle, 0)
        defer { close(handle) }
        let vividControl = try runTool("/usr/bin/v4l2-ctl", ["-d", Self.nodes[1], "--set-ctrl", "disconnect=1"])
        XCTAssertEqual(vividControl.status, 0, vividControl.stderr)
        XCTAssertThrowsError(try switchCamera(of: session, to: CaptureDeviceInput(device: cameras[1]), preset: Self.presets[1])) { error in
            XCTAssertTrue(self.names(cameras[1], in: error), "\(error)")
        }
        try await checkStillRunning(session, log, width: width, camera: cameras[0], after: "a switch to an unplugged camera")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// A session running on the first camera with a frames output, its first frames seen, and their width.
    private func runningOnTheFirstCamera() async throws -> ([CaptureDevice], CaptureSession, FrameLog, Int) {
        let cameras = try cameras()
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try makeSession(camera: cameras[0], preset: Self.presets[0], outputs: [frames])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let firstFrames = await log.waitFor(5, timeout: 10)
        XCTAssertTrue(firstFrames)
        return (cameras, session, log, try XCTUnwrap(log.all.last?.width))
    }

    /// Whether the error names the camera (by its name, id or node).
    private func names(_ camera: CaptureDevice, in error: any Error) -> Bool {
        [camera.description, camera.uniqueID, camera.nodePath ?? camera.uniqueID].contains { "\(error)".contains($0) }
    }

    private func checkStillRunning(_ session: CaptureSession, _ log: FrameLog, width: Int, camera: CaptureDevice,
                                   after what: String) async throws {
        XCTAssertTrue(session.isRunning, what)
        XCTAssertEqual((session.inputs.first as? CaptureDeviceInput)?.device, camera, what)
        let before = log.count
        let resumed = await log.waitFor(before + 10, timeout: 10)
        XCTAssertTrue(resumed, "\(what): \(log.count - before) frames from the old camera since")
        XCTAssertTrue(log.all.dropFirst(before).allSatisfy { $0.width == width }, what)
    }

    /// GStreamer's leak tracer after 20 switches while recording, through `gcapture run` (a process that
    /// deinitializes GStreamer at its end, as the tracer needs): nothing left alive.
    func testTwentySwitchesLeaveNoGStreamerObjectAlive() throws {
        let folder = try temporaryFolder()
        let environment = ["GST_TRACERS": "leaks", "GST_DEBUG": "GST_TRACER:7", "GST_DEBUG_NO_COLOR": "1"]
        let run = try launch("gcapture", ["run", "--camera", Self.nodes[0], "--microphone", "test-microphone", "--preset", "low",
                                          "--movie-folder", folder.path, "--json"], environment: environment, writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started", timeout: 30), "not started: \(run.errorOutput)")
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        XCTAssertTrue(run.waitForEvent("recordingProgress", timeout: 30), run.errorOutput)
        for index in 1...20 {
            let id = index + 1
            run.send(#"{"id": \#(id), "command": "switch", "camera": "\#(Self.nodes[index % 2])"}"#)
            guard run.waitForEvent("cameraSwitched", count: index, timeout: 30) else {
                XCTFail("switch \(index): \(run.output)")
                break
            }
        }
        run.send(#"{"id": 30, "command": "record", "action": "stop"}"#)
        XCTAssertTrue(run.waitForEvent("recordingFinished", timeout: 60), run.errorOutput)
        run.send(#"{"id": 31, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 60), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)
        XCTAssertTrue(run.errorOutput.contains("object-alive.class"), "the leaks tracer did not run")
        let leaks = run.errorOutput.split(separator: "\n").filter { $0.contains("object-alive, type-name=(string)") && !$0.contains("%s") }
        XCTAssertEqual(leaks, [], "20 switches leaked GStreamer objects")
    }

    /// Seed Pattern 6, with the preset the new camera is to run at.
    private func switchCamera(of session: CaptureSession, to input: CaptureDeviceInput, preset: CaptureSession.Preset) throws {
        session.beginConfiguration()
        if let old = session.inputs.first(where: { ($0 as? CaptureDeviceInput)?.device.mediaType == .video }) {
            session.removeInput(old)
        }
        try session.add(input)
        session.sessionPreset = preset
        try withinBlocking(engineDeadline, "session.commitAndWait()") { try session.commitAndWait() }
    }
}
