import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// CaptureMultiCamSession with two test cameras told apart by their pictures (one black, one white): each
/// movie holds only its camera's frames; connections are checked as AVFoundation checks them; the cost refuses
/// two uncompressed cameras on one USB 2.0 bus (a copy of such a machine's sysfs).
final class MultiCamSessionTests: XCTestCase {
    private let black = CaptureDevice.makeTestCamera(uniqueID: "multicam-black", options: .init(pattern: .black, motion: 0))
    private let white = CaptureDevice.makeTestCamera(uniqueID: "multicam-white", options: .init(pattern: .white, motion: 0))

    func testTwoCamerasRecordTwoMoviesEachOfItsOwnCamera() async throws {
        let cameras = [black, white]
        let movies = [CaptureMovieFileOutput(), CaptureMovieFileOutput()]
        let session = try connect(cameras, to: movies)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let folder = try temporaryFolder()
        let urls = ["black.mp4", "white.mp4"].map(folder.appendingPathComponent)
        var waiters: [RecordingWaiter] = []
        for (movie, url) in zip(movies, urls) { waiters.append(await startRecording(movie, to: url)) }
        try await Task.sleep(for: .seconds(2))
        for movie in movies { movie.stopRecording() }
        for waiter in waiters { try await assertFinishedWithoutError(waiter) }
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        for (url, camera) in zip(urls, ["black", "white"]) {
            let probed = try probe(url)
            XCTAssertEqual(probed.duration, 2, accuracy: 0.6, "\(camera)'s movie")
            let frames = try XCTUnwrap(probed.videoFrames)
            // Every frame: 30 fps for the recording's length, give or take the first and last.
            XCTAssertEqual(Double(frames), probed.duration * 30, accuracy: 3, "\(camera)'s movie: frames against its duration")
            let lumas = try frameLumas(url)
            XCTAssertEqual(lumas.count, frames)
            let others = lumas.filter { camera == "black" ? $0 > 40 : $0 < 200 }
            XCTAssertEqual(others, [], "\(camera)'s movie holds frames of the other camera")
        }
    }

    /// A movie connected to both cameras side by side: its frames show the black camera on the left, the white one
    /// on the right, at twice the width of one camera, every frame at the cameras' rate.
    func testACompositeMovieShowsBothCamerasSideBySide() async throws {
        let (url, probed) = try await recordComposite(.sideBySide, cameras: [black, white])
        XCTAssertEqual(probed.videoSize?.width, 1280)
        XCTAssertEqual(probed.videoSize?.height, 480)
        let grid = try lumaGrid(url, at: 1)
        for row in grid {
            XCTAssertTrue(row[0] < 40 && row[1] < 40, "the left half is not the black camera: \(grid)")
            XCTAssertTrue(row[2] > 200 && row[3] > 200, "the right half is not the white camera: \(grid)")
        }
    }

    /// Picture in picture: the white camera fills the picture, the black one is inset in the bottom-right corner.
    func testACompositeMovieShowsTheSecondCameraInsetInTheFirst() async throws {
        let (url, probed) = try await recordComposite(.pictureInPicture, cameras: [white, black])
        XCTAssertEqual(probed.videoSize?.width, 640)
        XCTAssertEqual(probed.videoSize?.height, 480)
        // 6x6 cells of 107x80: the inset (212x160 at 412,304, a 16-pixel margin to the edges) covers cell (4, 4) whole
        // and most of (4, 5), (5, 4) and (5, 5); the first three rows and columns are the white camera's alone.
        let grid = try lumaGrid(url, at: 1, columns: 6, rows: 6)
        for (row, values) in grid.enumerated() {
            for (column, value) in values.enumerated() where row < 3 || column < 3 {
                XCTAssertGreaterThan(value, 200, "cell (\(row), \(column)) is not the white camera: \(grid)")
            }
        }
        XCTAssertLessThan(grid[4][4], 40, "the inset is not the black camera: \(grid)")
        for (row, column) in [(4, 5), (5, 4), (5, 5)] {
            XCTAssertLessThan(grid[row][column], 128, "cell (\(row), \(column)) is not mostly the inset: \(grid)")
        }
    }

    /// A stream connected to both cameras side by side (HLS, as ffmpeg plays it back): the black camera on the
    /// left, the white one on the right, at twice one camera's width, the whole time it streamed.
    func testACompositeStreamShowsBothCamerasSideBySide() async throws {
        let stream = CaptureStreamOutput()
        let session = try compositeSession(.sideBySide, cameras: [black, white], output: stream)
        let (errors, errorTask) = collectRuntimeErrors(of: session)
        defer { errorTask.cancel() }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let playlist = try temporaryFolder().appendingPathComponent("live.m3u8")
        try stream.startStreaming(to: playlist.path)
        try await Task.sleep(for: .seconds(5))
        stream.stopStreaming()
        let deadline = Date().addingTimeInterval(10)
        while stream.isStreaming, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertFalse(stream.isStreaming, "the stream did not end within 10 s")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(errors.withLock { $0 }, [], "runtime errors")

        let probed = try probe(playlist)
        XCTAssertEqual(probed.videoSize?.width, 1280)
        XCTAssertEqual(probed.videoSize?.height, 480)
        XCTAssertEqual(probed.duration, 5, accuracy: 1.5, "the stream's length")
        for seconds in [1.0, 3.5] {
            let grid = try lumaGrid(playlist, at: seconds)
            for row in grid {
                XCTAssertTrue(row[0] < 40 && row[1] < 40, "at \(seconds) s the left half is not the black camera: \(grid)")
                XCTAssertTrue(row[2] > 200 && row[3] > 200, "at \(seconds) s the right half is not the white camera: \(grid)")
            }
        }
    }

    /// Records 2 s of a movie connected to `cameras` in `layout`; every frame the recording took is in the file.
    private func recordComposite(_ layout: CaptureMultiCamSession.CompositeLayout,
                                 cameras: [CaptureDevice]) async throws -> (URL, ProbedMovie) {
        let movie = CaptureMovieFileOutput()
        let session = try compositeSession(layout, cameras: cameras, output: movie)
        let (errors, errorTask) = collectRuntimeErrors(of: session)
        defer { errorTask.cancel() }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = try temporaryFolder().appendingPathComponent("composite.mp4")
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .seconds(2))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(errors.withLock { $0 }, [], "runtime errors")
        let probed = try probe(url)
        XCTAssertTrue(try ffmpegDecodes(url))
        XCTAssertEqual(Double(try XCTUnwrap(probed.videoFrames)), Double(movie.lastStatistics.frames), accuracy: 1)
        XCTAssertEqual(Double(try XCTUnwrap(probed.videoFrames)), probed.duration * 30, accuracy: 3, "frames against the duration")
        return (url, probed)
    }

    /// A session whose one output is connected to every camera (VGA each) in `layout`: committed, not started.
    private func compositeSession(_ layout: CaptureMultiCamSession.CompositeLayout, cameras: [CaptureDevice],
                                  output: CaptureOutput) throws -> CaptureMultiCamSession {
        let session = CaptureMultiCamSession()
        session.beginConfiguration()
        let inputs = try cameras.map(CaptureDeviceInput.init(device:))
        for input in inputs {
            try session.addInputWithNoConnections(input)
            try session.setSessionPreset(.vga640x480, for: input)
        }
        try session.addOutputWithNoConnections(output)
        try session.addConnection(CaptureConnection(inputPorts: inputs.flatMap(\.ports), output: output))
        try session.setCompositeLayout(layout, for: output)
        try withinBlocking(engineDeadline, "commitAndWait()") { try session.commitAndWait() }
        return session
    }

    /// The session's runtime errors as they come, until the task is cancelled.
    private func collectRuntimeErrors(of session: CaptureMultiCamSession) -> (Locked<[String]>, Task<Void, Never>) {
        let errors = Locked<[String]>([])
        let stream = session.runtimeErrors()
        return (errors, Task { for await error in stream { errors.withLock { $0.append("\(error)") } } })
    }

    /// The luma of one frame of a movie, `at` seconds in, averaged over a grid of cells (rows of columns).
    private func lumaGrid(_ url: URL, at seconds: Double, columns: Int = 4, rows: Int = 4) throws -> [[UInt8]] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("grid-\(UUID().uuidString).raw")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-ss", "\(seconds)", "-i", url.path, "-frames:v", "1",
                                                      "-vf", "scale=\(columns):\(rows):flags=area,format=gray", "-f", "rawvideo", output.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let bytes = [UInt8](try Data(contentsOf: output))
        XCTAssertEqual(bytes.count, columns * rows)
        return (0..<rows).map { row in Array(bytes[(row * columns)..<min(bytes.count, (row + 1) * columns)]) }
    }

    /// An output moved from one camera to the other while both run: its frames change from black to white,
    /// and the session keeps running.
    func testAnOutputMovedToTheOtherCameraWhileRunningTakesItsFrames() async throws {
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let other = CaptureVideoDataOutput()
        let session = try connect([black, white], to: [frames, other])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await log.require(5, timeout: 10, "frames from the black camera")
        XCTAssertTrue(log.all.allSatisfy { $0.luma < 40 }, "\(log.all.map(\.luma))")
        XCTAssertEqual(session.interruptionReasons(for: try input(of: black, in: session)), [])

        let whiteInput = try input(of: white, in: session)
        session.beginConfiguration()
        for connection in session.connections where connection.output == frames { try session.removeConnection(connection) }
        try session.addConnection(CaptureConnection(inputPorts: whiteInput.ports, output: frames))
        try withinBlocking(engineDeadline, "commitAndWait()") { try session.commitAndWait() }
        // A frame stream ends when its output leaves a camera's graph (the frames it held let go): a new one.
        let moved = FrameLog(frames)
        try await moved.require(5, timeout: 10, "frames after the move")
        XCTAssertTrue(moved.all.allSatisfy { $0.luma > 200 }, "\(moved.all.map(\.luma))")
        XCTAssertTrue(session.isRunning)
        XCTAssertEqual(session.cameraSession(for: whiteInput)?.outputs.count, 2)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    func testConnectionsAreCheckedAsAVFoundationChecksThem() throws {
        let session = CaptureMultiCamSession()
        let camera = try CaptureDeviceInput(device: black)
        let movie = CaptureMovieFileOutput()
        session.beginConfiguration()
        XCTAssertThrowsError(try session.addConnection(CaptureConnection(inputPorts: camera.ports, output: movie))) { error in
            XCTAssertTrue("\(error)".contains("not an output of the session"), "\(error)")
        }
        try session.addOutputWithNoConnections(movie)
        XCTAssertThrowsError(try session.addConnection(CaptureConnection(inputPorts: camera.ports, output: movie))) { error in
            XCTAssertTrue("\(error)".contains("not an input of the session"), "\(error)")
        }
        try session.addInputWithNoConnections(camera)
        XCTAssertThrowsError(try session.addInputWithNoConnections(CaptureDeviceInput(device: black))) { error in
            XCTAssertTrue("\(error)".contains("already an input"), "\(error)")
        }
        let connection = CaptureConnection(inputPorts: camera.ports(for: .video, sourceDeviceType: nil, sourceDevicePosition: .unspecified),
                                           output: movie)
        try session.addConnection(connection)
        let second = try CaptureDeviceInput(device: white)
        try session.addInputWithNoConnections(second)
        XCTAssertFalse(session.canAddConnection(CaptureConnection(inputPorts: second.ports, output: movie)),
                       "an output takes one camera")
        // The connection made by the app turns the output: they share rotation and mirroring.
        connection.videoRotationAngle = 90
        XCTAssertEqual(movie.connection.videoRotationAngle, 90)
        XCTAssertEqual(connection.inputPorts.first?.input, camera)
        try session.commitAndWait()
        XCTAssertEqual(session.connections, [connection])
        XCTAssertEqual(session.hardwareCost, 0, "the test camera is on no USB bus")
        XCTAssertGreaterThan(session.systemPressureCost, 0)
    }

    /// Two 640x480 YUY2 cameras at 30 fps on one USB 2.0 bus reserve 36.9 MB/s of its 24.6: refused at commit,
    /// the reason naming the bus and the cameras; one of them alone fits.
    func testTwoUncompressedCamerasOnOneUSB2BusAreRefusedAtCommit() throws {
        let sysfs = try temporaryFolder()
        let cameras = try (0..<2).map { index in try usbCamera(index, bus: 1, speed: "480", sysfs: sysfs) }
        let session = CaptureMultiCamSession(name: "usb", sysfs: sysfs.path)
        let movies = [CaptureMovieFileOutput(), CaptureMovieFileOutput()]
        let inputs = try cameras.map(CaptureDeviceInput.init(device:))
        session.beginConfiguration()
        try session.addInputWithNoConnections(inputs[0])
        try session.addOutputWithNoConnections(movies[0])
        try session.addConnection(CaptureConnection(inputPorts: inputs[0].ports, output: movies[0]))
        try session.setSessionPreset(.vga640x480, for: inputs[0])
        XCTAssertEqual(session.hardwareCost, 640 * 480 * 2 * 30 / 24_576_000, accuracy: 0.001)
        try session.addInputWithNoConnections(inputs[1])
        try session.addOutputWithNoConnections(movies[1])
        try session.addConnection(CaptureConnection(inputPorts: inputs[1].ports, output: movies[1]))
        try session.setSessionPreset(.vga640x480, for: inputs[1])
        XCTAssertEqual(session.hardwareCost, 2 * 640 * 480 * 2 * 30 / 24_576_000, accuracy: 0.001)
        XCTAssertThrowsError(try session.commitAndWait()) { error in
            guard case .hardwareCostOverage(let cost, let reason) = error as? CaptureError else { return XCTFail("\(error)") }
            XCTAssertGreaterThan(cost, 1)
            XCTAssertTrue(reason.contains("USB bus 1"), reason)
            XCTAssertTrue(reason.contains("MJPEG"), reason)
            XCTAssertTrue(cameras.allSatisfy { reason.contains($0.description) }, reason)
        }
        XCTAssertEqual(session.connections, [], "the refused configuration is not in force")
    }

    /// A USB camera whose stream the kernel refuses (uvcvideo's ENOSPC at VIDIOC_STREAMON: the bus has no bandwidth
    /// left), in v4l2src's words as GStreamer 1.22 posts them: the explanation names the bus and what to do; the same
    /// words from a camera on no USB bus (vivid's injected streamon error) are not blamed on bandwidth.
    func testAStreamTheKernelRefusesOnAUSBBusIsExplainedAsBandwidth() throws {
        let sysfs = try temporaryFolder()
        let camera = try usbCamera(0, bus: 3, speed: "480", sysfs: sysfs)
        let refused = GStreamerError(kind: .gError, domain: "gst-resource-error-quark", code: 13, message: "Failed to allocate required memory.",
                                     debug: "../sys/v4l2/gstv4l2src.c(658): gst_v4l2src_decide_allocation (): Buffer pool activation failed")
        let explained = try XCTUnwrap(SourceBuilder.explanation(of: refused, from: camera, sysfs: sysfs.path))
        XCTAssertTrue(explained.contains("USB bus 3") && explained.contains("bandwidth") && explained.contains("MJPEG"), explained)
        let platform = CaptureDevice(uniqueID: "platform-camera", localizedName: "Platform Camera", modelID: "", manufacturer: "",
                                     deviceType: .builtInWideAngleCamera, position: .unspecified, mediaType: .video,
                                     nodePath: sysfs.appendingPathComponent("video40").path, formats: camera.formats,
                                     backend: .v4l2(path: sysfs.appendingPathComponent("video40").path))
        XCTAssertNil(SourceBuilder.explanation(of: refused, from: platform, sysfs: "/nonexistent"))
        let unplugged = GStreamerError(kind: .gError, domain: "gst-resource-error-quark", code: 14, message: "Failed to allocate a buffer",
                                       debug: "gst_v4l2src_create (): Failed to allocate a buffer")
        XCTAssertNil(SourceBuilder.explanation(of: unplugged, from: camera, sysfs: sysfs.path), "an unplug is not a bandwidth refusal")
    }

    /// A camera on the copied sysfs: videoN whose sysfs device is an interface of a USB device on `bus`. Its node is
    /// a plain file (the cost is computed before anything opens it).
    private func usbCamera(_ index: Int, bus: Int, speed: String, sysfs: URL) throws -> CaptureDevice {
        let files = FileManager.default
        let usbDevice = sysfs.appendingPathComponent("devices/pci0000:00/0000:00:14.0/usb\(bus)/\(bus)-\(index + 1)")
        let interface = usbDevice.appendingPathComponent("\(bus)-\(index + 1):1.0")
        try files.createDirectory(at: interface, withIntermediateDirectories: true)
        try "\(bus)\n".write(to: usbDevice.appendingPathComponent("busnum"), atomically: true, encoding: .utf8)
        try "\(speed)\n".write(to: usbDevice.appendingPathComponent("speed"), atomically: true, encoding: .utf8)
        let classFolder = sysfs.appendingPathComponent("class/video4linux/video\(index + 40)")
        try files.createDirectory(at: classFolder, withIntermediateDirectories: true)
        try files.createSymbolicLink(at: classFolder.appendingPathComponent("device"), withDestinationURL: interface)
        let node = sysfs.appendingPathComponent("video\(index + 40)")
        XCTAssertTrue(files.createFile(atPath: node.path, contents: nil))
        let formats = [CaptureDevice.Format(pixelFormat: "YUY2", width: 640, height: 480,
                                            videoSupportedFrameRateRanges: [.init(Fraction(30, 1), Fraction(30, 1))])]
        return CaptureDevice(uniqueID: "usb-camera-\(index)", localizedName: "USB Camera \(index)", modelID: "", manufacturer: "",
                             deviceType: .external, position: .unspecified, mediaType: .video,
                             nodePath: node.path, formats: formats, backend: .v4l2(path: node.path))
    }

    /// A multi-camera session with one output per camera, committed, not started.
    private func connect(_ cameras: [CaptureDevice], to outputs: [CaptureOutput]) throws -> CaptureMultiCamSession {
        let session = CaptureMultiCamSession()
        session.beginConfiguration()
        for (camera, output) in zip(cameras, outputs) {
            let input = try CaptureDeviceInput(device: camera)
            try session.addInputWithNoConnections(input)
            try session.addOutputWithNoConnections(output)
            try session.addConnection(CaptureConnection(inputPorts: input.ports, output: output))
            try session.setSessionPreset(.vga640x480, for: input)
        }
        try withinBlocking(engineDeadline, "commitAndWait()") { try session.commitAndWait() }
        return session
    }

    private func input(of camera: CaptureDevice, in session: CaptureMultiCamSession) throws -> CaptureDeviceInput {
        try XCTUnwrap(session.inputs.compactMap { $0 as? CaptureDeviceInput }.first { $0.device == camera })
    }
}
