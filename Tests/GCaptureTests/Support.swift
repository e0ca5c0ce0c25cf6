import Foundation
@testable import GCapture
import Synchronization
import XCTest

/// Records the frames an output delivers: timestamps, sizes, formats.
final class FrameLog: Sendable {
    struct Entry: Sendable { var time: Double; var width: Int; var height: Int; var format: String; var arrival: Date }
    private let entries = Mutex<[Entry]>([])
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ output: CaptureVideoDataOutput) {
        let stream = output.sampleBuffers()
        let started = Task { [weak self] in
            for await frame in stream {
                self?.entries.withLock {
                    $0.append(Entry(time: frame.presentationTime, width: frame.width, height: frame.height,
                                    format: frame.pixelFormat, arrival: Date()))
                }
            }
        }
        task.withLock { $0 = started }
    }

    deinit { task.withLock { $0?.cancel() } }

    var all: [Entry] { entries.withLock { $0 } }
    var count: Int { entries.withLock { $0.count } }

    /// Waits until `count` frames have arrived in total.
    @discardableResult
    func waitFor(_ count: Int, timeout: TimeInterval = 5) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while self.count < count, Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return self.count >= count
    }

    /// Frames that arrive within `seconds` from now.
    func collect(for seconds: Double) async -> [Entry] {
        let start = count
        try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        return Array(all.dropFirst(start))
    }

    /// The longest interval between consecutive frames' timestamps, in seconds.
    static func longestGap(_ entries: [Entry]) -> Double {
        zip(entries.dropFirst(), entries).map { $0.time - $1.time }.max() ?? 0
    }
}

extension XCTestCase {
    /// A session with one test camera input and the given outputs, committed but not started.
    func makeSession(camera: CaptureDevice = .testCamera, preset: CaptureSession.Preset = .vga640x480,
                     outputs: [CaptureOutput]) throws -> CaptureSession {
        let session = CaptureSession()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: camera))
        for output in outputs { try session.add(output) }
        session.sessionPreset = preset
        try session.commitAndWait()
        return session
    }

    /// A program built next to the test bundle (`swift build --build-tests` builds them all).
    func productURL(_ name: String) throws -> URL {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // `swift test` runs the bundle from inside the .xctest folder.
        let candidates = [folder, folder.deletingLastPathComponent()].map { $0.appendingPathComponent(name) }
        guard let executable = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw XCTSkip("\(name) is not built next to the tests (build with `swift build --build-tests`)")
        }
        return executable
    }

    /// Runs a program built next to the test bundle (gcapture, gcapture-bench) and returns its output.
    /// `launcher` runs it through another program (e.g. setpriv to drop privileges).
    func runProduct(_ name: String, _ arguments: [String], environment: [String: String] = [:],
                    launcher: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
        let executable = try productURL(name)
        if let program = launcher.first {
            return try runTool(program, Array(launcher.dropFirst()) + [executable.path] + arguments, environment: environment)
        }
        return try runTool(executable.path, arguments, environment: environment)
    }

    /// Runs a program and returns its exit status and output.
    func runTool(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Both pipes are drained at once: a child that fills one while we wait on the other would hang.
        final class Collected: @unchecked Sendable { var data = Data() }
        let errors = Collected()
        let reading = DispatchGroup()
        DispatchQueue.global().async(group: reading) { errors.data = err.fileHandleForReading.readDataToEndOfFile() }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        reading.wait()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errors.data, as: UTF8.self))
    }
}

extension XCTestCase {
    /// EXIF and file facts as exiftool (not our code) reads them; numbers as numbers (-n).
    func exif(_ url: URL) throws -> [String: Any] {
        let result = try runTool("/usr/bin/exiftool", ["-j", "-n", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let objects = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]
        return try XCTUnwrap(objects?.first)
    }

    /// PSNR of an image against a reference, in dB, as ffmpeg computes it.
    func psnr(_ url: URL, reference: URL) throws -> Double {
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-nostats", "-i", url.path, "-i", reference.path,
                                                      "-lavfi", "psnr", "-f", "null", "-"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let line = try XCTUnwrap(result.stderr.split(separator: "\n").first { $0.contains("PSNR") && $0.contains("average:") })
        let value = try XCTUnwrap(line.split(separator: " ").first { $0.hasPrefix("average:") }?.dropFirst("average:".count))
        return try XCTUnwrap(Double(value))
    }

    /// The luma of a picture scaled down to `width`x1 by ffmpeg: left to right brightness.
    func lumaProfile(_ url: URL, width: Int = 8) throws -> [UInt8] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("luma-\(UUID().uuidString).raw")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", url.path, "-vf",
                                                      "crop=iw:ih/4:0:0,scale=\(width):1,format=gray", "-f", "rawvideo", output.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return [UInt8](try Data(contentsOf: output))
    }

    func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        return folder
    }
}

/// What ffprobe (not our code) says of a movie.
struct ProbedMovie {
    var duration: Double
    var streams: [[String: Any]]
    var codecs: [String] { streams.compactMap { $0["codec_name"] as? String } }
    func stream(_ type: String) -> [String: Any]? { streams.first { $0["codec_type"] as? String == type } }
    func startTime(_ type: String) -> Double? { (stream(type)?["start_time"] as? String).flatMap(Double.init) }
    var videoFrames: Int? { (stream("video")?["nb_read_frames"] as? String).flatMap(Int.init) }
    /// Degrees from the display matrix (ffprobe gives the counter-clockwise angle).
    var rotation: Int? {
        let sideData = stream("video")?["side_data_list"] as? [[String: Any]]
        return sideData?.compactMap { $0["rotation"] as? Int }.first
    }
    /// Degrees clockwise a player turns the picture (0 without a display matrix).
    var clockwiseRotation: Int { ((-(rotation ?? 0)) % 360 + 360) % 360 }
    var videoSize: (width: Int, height: Int)? {
        guard let width = stream("video")?["width"] as? Int, let height = stream("video")?["height"] as? Int else { return nil }
        return (width, height)
    }
}

extension XCTestCase {
    func probe(_ url: URL, countFrames: Bool = true) throws -> ProbedMovie {
        var arguments = ["-v", "error", "-print_format", "json", "-show_format", "-show_streams"]
        if countFrames { arguments.append("-count_frames") }
        let result = try runTool("/usr/bin/ffprobe", arguments + [url.path])
        XCTAssertEqual(result.status, 0, "ffprobe: \(result.stderr)")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let format = json["format"] as? [String: Any]
        return ProbedMovie(duration: (format?["duration"] as? String).flatMap(Double.init) ?? 0,
                           streams: json["streams"] as? [[String: Any]] ?? [])
    }

    /// The types of an MP4's top-level boxes, in order ("ftyp", "moov", "moof", "mdat", ...).
    func topLevelBoxes(_ url: URL) throws -> [String] {
        let data = try Data(contentsOf: url)
        var types: [String] = [], offset = 0
        while offset + 8 <= data.count {
            var size = data[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            if size == 1, offset + 16 <= data.count { size = data[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) } }
            if size == 0 { size = data.count - offset }
            types.append(String(decoding: data[offset + 4..<offset + 8], as: UTF8.self))
            guard size >= 8 else { break }
            offset += size
        }
        return types
    }

    /// Whether ffmpeg decodes every frame without an error.
    func ffmpegDecodes(_ url: URL) throws -> Bool {
        let result = try runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", url.path, "-f", "null", "-"])
        // The null muxer complains when two frames fall into one tick of its own time base, which a real
        // camera's jitter causes (vivid in a busy VM delivers frames 2 ms apart); that is not a decoding error.
        let complaints = result.stderr.split(separator: "\n").filter {
            !$0.hasPrefix("[null @") && !$0.trimmingCharacters(in: .whitespaces).hasPrefix("Last message repeated")
        }
        return result.status == 0 && complaints.isEmpty
    }
}

/// Collects what a movie output tells its delegate, for tests to wait on.
final class RecordingWaiter: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var startedAt: URL?
    private var result: (URL, CaptureError?)?
    var started: URL? { lock.withLock { startedAt } }
    var finished: (url: URL, error: CaptureError?)? { lock.withLock { result } }

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        lock.withLock { startedAt = fileURL }
    }
    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        // The engine's errors are all CaptureError: anything else fails the test's cast loudly.
        lock.withLock { result = (outputFileURL, error.map { $0 as! CaptureError }) }
    }

    func waitForStart(timeout: TimeInterval = 10) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while started == nil, finished == nil, Date() < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return started != nil
    }

    func waitForFinish(timeout: TimeInterval = 15) async -> (url: URL, error: CaptureError?)? {
        let deadline = Date().addingTimeInterval(timeout)
        while finished == nil, Date() < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return finished
    }
}
