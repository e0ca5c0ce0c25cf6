import GStreamerKit
import Foundation
@testable import GCapture
import Synchronization
import XCTest

/// Records the frames an output delivers: timestamps, sizes, formats, and their mean luma (to tell a camera's
/// picture from the black frames that stand in for it during an interruption).
final class FrameLog: Sendable {
    struct Entry: Sendable {
        var time: Double; var width: Int; var height: Int; var format: String; var arrival: Date
        var luma: Double
        /// When it arrived, in monotonic milliseconds (monotonicMilliseconds()).
        var at: Double
    }
    private let entries = Locked<[Entry]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ output: CaptureVideoDataOutput) {
        let stream = output.sampleBuffers()
        let started = Task { [weak self] in
            for await frame in stream {
                let luma = frame.withPlanes { planes -> Double in
                    guard let plane = planes.first, plane.height > 0 else { return 0 }
                    // Every 16th sample of every 16th row: enough to tell black from colour bars.
                    var sum = 0, count = 0
                    for row in stride(from: 0, to: plane.height, by: 16) {
                        for x in stride(from: 0, to: plane.rowBytes, by: 16) { sum += Int(plane.bytes[row * plane.stride + x]); count += 1 }
                    }
                    return Double(sum) / Double(max(count, 1))
                } ?? 0
                self?.entries.withLock {
                    $0.append(Entry(time: frame.presentationTime, width: frame.width, height: frame.height,
                                    format: frame.pixelFormat, arrival: Date(), luma: luma, at: monotonicMilliseconds()))
                }
            }
        }
        task.withLock { $0 = started }
    }

    deinit { task.withLock { $0?.cancel() } }

    var all: [Entry] { entries.withLock { $0 } }
    var count: Int { entries.withLock { $0.count } }

    /// Waits until `count` frames have arrived in total; tells whether they did (a result to check, not drop).
    func waitFor(_ count: Int, timeout: TimeInterval = 5) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while self.count < count, Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return self.count >= count
    }

    /// waitFor that fails the test (throws) when the frames have not arrived within `timeout`.
    func require(_ count: Int, timeout: TimeInterval = 5, _ what: String) async throws {
        guard await waitFor(count, timeout: timeout) else {
            throw DeadlineExceeded(description: "\(what): \(self.count) of \(count) frames within \(timeout) s")
        }
    }

    /// Frames that arrive within `seconds` from now.
    func collect(for seconds: Double) async -> [Entry] {
        let start = count
        try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        return Array(all.dropFirst(start))
    }

    /// Frames of the camera's picture (colour bars; black is 16).
    static func isPicture(_ entry: Entry) -> Bool { entry.luma > 40 }

    /// The longest interval between consecutive frames' timestamps, in seconds.
    static func longestGap(_ entries: [Entry]) -> Double {
        zip(entries.dropFirst(), entries).map { $0.time - $1.time }.max() ?? 0
    }
}

extension XCTestCase {
    /// A session with one camera input (the test camera unless told), a microphone if given and the given
    /// outputs, committed but not started.
    /// `input`, when given, is the camera's input (one the test set up itself) and `camera` is not used.
    func makeSession(camera: CaptureDevice = .testCamera, input: CaptureDeviceInput? = nil, microphone: CaptureDevice? = nil,
                     preset: CaptureSession.Preset = .vga640x480, outputs: [CaptureOutput]) throws -> CaptureSession {
        let session = CaptureSession()
        session.beginConfiguration()
        try session.add(input ?? CaptureDeviceInput(device: camera))
        if let microphone { try session.add(CaptureDeviceInput(device: microphone)) }
        for output in outputs { try session.add(output) }
        session.sessionPreset = preset
        try withinBlocking(engineDeadline, "session.commitAndWait()") { try session.commitAndWait() }
        return session
    }

    /// makeSession, started.
    func startSession(camera: CaptureDevice = .testCamera, microphone: CaptureDevice? = nil,
                      preset: CaptureSession.Preset = .vga640x480, outputs: [CaptureOutput]) async throws -> CaptureSession {
        let session = try makeSession(camera: camera, microphone: microphone, preset: preset, outputs: outputs)
        try await within(engineDeadline, "session.start()") { try await session.start() }
        return session
    }

    /// A program built next to the test bundle (`swift build --build-tests` builds them all).
    func productURL(_ name: String) throws -> URL {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // `swift test` runs the bundle from inside the .xctest folder.
        let candidates = [folder, folder.deletingLastPathComponent()].map { $0.appendingPathComponent(name) }
        guard let executable = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw TestEnvironment.missing("\(name) is not built next to the tests (build with `swift build --build-tests`)")
        }
        return executable
    }

    /// Runs a program built next to the test bundle (gcapture, gcapture-bench) and returns its output.
    /// `launcher` runs it through another program (e.g. setpriv to drop privileges).
    func runProduct(_ name: String, _ arguments: [String], environment: [String: String] = [:],
                    launcher: [String] = [], currentDirectory: URL? = nil,
                    timeout: TimeInterval = ProgramRun.defaultTimeout) throws -> ProgramRun.Result {
        let executable = try productURL(name)
        if let program = launcher.first {
            return try runTool(program, Array(launcher.dropFirst()) + [executable.path] + arguments, environment: environment,
                               currentDirectory: currentDirectory, timeout: timeout)
        }
        return try runTool(executable.path, arguments, environment: environment, currentDirectory: currentDirectory,
                           timeout: timeout)
    }

    /// Runs a program and returns its exit status and output; one still running after `timeout` is killed and
    /// the test fails.
    func runTool(_ path: String, _ arguments: [String], environment: [String: String] = [:], currentDirectory: URL? = nil,
                 timeout: TimeInterval = ProgramRun.defaultTimeout) throws -> ProgramRun.Result {
        try ProgramRun.run(path, arguments, environment: environment, currentDirectory: currentDirectory, timeout: timeout)
    }

}

/// What the tests may and may not do without a real part (the PulseAudio server, the built CLI, a camera).
enum TestEnvironment {
    /// CI=true (or 1): every test that needs a real part must run it.
    static var isCI: Bool { ["true", "1"].contains(ProcessInfo.processInfo.environment["CI"]?.lowercased() ?? "") }

    /// A real part the test needs cannot be had: a skip on a developer's machine, a failure in CI, where
    /// a skip would hide that the part was never tested.
    static func missing(_ part: String) -> any Error {
        isCI ? MissingPart(description: part + " (CI=true: a test whose real part is missing fails instead of skipping)")
            : XCTSkip(part)
    }

    struct MissingPart: Error, CustomStringConvertible { let description: String }
}

/// CLOCK_MONOTONIC now, in milliseconds: GStreamer's system clock, which the test camera's stamps use.
func monotonicMilliseconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) * 1000 + Double(now.tv_nsec) / 1e6
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}

/// Milliseconds from `moment` (monotonicMilliseconds) to a capture-time stamp (negative: the stamp is
/// earlier). The stamp is whole milliseconds modulo 2^32: the difference is taken in that ring.
func millisecondsFrom(_ moment: Double, to stamp: UInt32) -> Double {
    let whole = moment.rounded(.down)
    return Double(Int32(bitPattern: stamp &- UInt32(truncatingIfNeeded: Int64(whole)))) - (moment - whole)
}

/// What a file or program showed is not what the test can read.
struct CheckFailed: Error, CustomStringConvertible {
    let description: String
}

/// A test waited longer than its deadline.
struct DeadlineExceeded: Error, CustomStringConvertible {
    let description: String
}

/// How long an engine call that waits on the outside world (a session's start or stop, a commit, a photo, a
/// pipeline's drain) may take before its test fails: far above what any takes (well under a second here, a
/// few seconds in the emulated v4l2 VM, ~5x slower), far below the suite's 900 s limit, so that one hang
/// fails its own test and the rest of the suite still runs.
let engineDeadline: Double = ProcessInfo.processInfo.environment["V4L2VM"] == "1" ? 120 : 30

/// within() for a call that blocks its thread (commitAndWait, startRunning, stopRunning): it runs on a thread
/// of its own, and the caller gets its result or, after `seconds`, a DeadlineExceeded (the blocked thread is
/// left behind rather than waited for).
func withinBlocking<T>(_ seconds: Double, _ what: String, _ operation: @escaping @Sendable () throws -> T) throws -> T {
    let outcome = BlockingOutcome<T>(), done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        outcome.result = Result { try operation() }
        done.signal()
    }
    guard done.wait(timeout: .now() + seconds) == .success, let result = outcome.result else {
        throw DeadlineExceeded(description: "\(what) did not happen within \(seconds) s")
    }
    return try result.get()
}

/// What a blocking call gave, handed from its thread to the waiter (the semaphore orders the two).
private final class BlockingOutcome<T>: @unchecked Sendable { var result: Result<T, any Error>? }

/// Runs `operation` and returns its result, or throws when it has not finished within `seconds` (and cancels
/// it). An operation that ignores cancellation is left behind rather than waited for, so a hung engine call
/// fails its test instead of hanging the suite.
func within<T: Sendable>(_ seconds: Double, _ what: String,
                         _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    return try await withCheckedThrowingContinuation { continuation in
        let once = Once(continuation)
        let work = Task {
            do { _ = once.finish(.success(try await operation())) } catch { _ = once.finish(.failure(error)) }
        }
        once.setTimer(Task {
            guard (try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))) != nil else { return }
            if once.finish(.failure(DeadlineExceeded(description: "\(what) did not happen within \(seconds) s"))) { work.cancel() }
        })
    }
}

/// The first element of `stream` that satisfies `predicate`, or a failure when none comes within `seconds`
/// (or the stream ends first).
func firstElement<Element: Sendable>(of stream: AsyncStream<Element>, within seconds: Double, _ what: String,
                                     where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }) async throws -> Element {
    try await within(seconds, what) {
        for await element in stream where predicate(element) { return element }
        throw CheckFailed(description: "\(what): the stream ended first")
    }
}

/// Resumes a waiter once, with whichever of an operation and its deadline comes first.
private final class Once<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var timer: Task<Void, Never>?
    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = continuation }
    func setTimer(_ task: Task<Void, Never>) { lock.withLock { timer = task } }
    /// Resumes the waiter with the first result only; tells whether this was the first.
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (pending, timer) = lock.withLock { () -> (CheckedContinuation<T, any Error>?, Task<Void, Never>?) in
            defer { continuation = nil }
            return (continuation, self.timer)
        }
        guard let pending else { return false }
        timer?.cancel()
        pending.resume(with: result)
        return true
    }
}

/// A program run to its end with a deadline.
enum ProgramRun {
    typealias Result = (status: Int32, stdout: String, stderr: String)
    /// Far above any program a test runs (the slowest take a few seconds here, about a minute in the
    /// emulated v4l2 VM, which runs ~5x slower), far below the suite's limit.
    static let defaultTimeout: TimeInterval = ProcessInfo.processInfo.environment["V4L2VM"] == "1" ? 300 : 120

    /// Runs `path`; both pipes are drained at once (a child that fills one while we wait on the other would
    /// hang). After `timeout` it gets SIGTERM, then SIGKILL, and the run throws. Without `capturesOutput` the
    /// child's output goes to /dev/null (for daemons, whose children would hold a pipe open forever).
    static func run(_ path: String, _ arguments: [String], environment: [String: String] = [:], currentDirectory: URL? = nil,
                    timeout: TimeInterval = defaultTimeout, capturesOutput: Bool = true) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        final class Collected: @unchecked Sendable { var data = Data() }
        let output = Collected(), errors = Collected()
        let reading = DispatchGroup()
        let name = ([URL(fileURLWithPath: path).lastPathComponent] + arguments).joined(separator: " ")
        if capturesOutput {
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            DispatchQueue.global().async(group: reading) { output.data = out.fileHandleForReading.readDataToEndOfFile() }
            DispatchQueue.global().async(group: reading) { errors.data = err.fileHandleForReading.readDataToEndOfFile() }
        } else {
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGTERM)
            if exited.wait(timeout: .now() + 5) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                _ = exited.wait(timeout: .now() + 5)
            }
            let said = reading.wait(timeout: .now() + 5) == .success ? String(decoding: errors.data.suffix(2000), as: UTF8.self) : ""
            throw DeadlineExceeded(description: "`\(name)` was still running after \(Int(timeout)) s and was killed; stderr: \(said)")
        }
        guard reading.wait(timeout: .now() + 10) == .success else {
            throw DeadlineExceeded(description: "`\(name)` exited but something it started still holds its output open")
        }
        return (process.terminationStatus, String(decoding: output.data, as: UTF8.self), String(decoding: errors.data, as: UTF8.self))
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
    /// `turningReference` is an ffmpeg filter applied to the reference first (e.g. "transpose=clock").
    /// `crop` (an ffmpeg crop filter) limits the comparison to one region of both.
    func psnr(_ url: URL, reference: URL, turningReference filter: String? = nil, crop: String? = nil) throws -> Double {
        let picture = crop.map { "[0:v]\($0)[picture];" } ?? "[0:v]null[picture];"
        let turned = "[1:v]" + ([filter, crop].compactMap { $0 }.joined(separator: ",").nonEmpty ?? "null") + "[reference];"
        let result = try ffmpegPSNR(url, reference: reference, graph: picture + turned + "[picture][reference]psnr")
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(result.value, "no PSNR in ffmpeg's output: \(result.stderr)")
    }

    private func ffmpegPSNR(_ url: URL, reference: URL, graph: String) throws -> (status: Int32, value: Double?, stderr: String) {
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-nostats", "-i", url.path, "-i", reference.path,
                                                      "-lavfi", graph, "-f", "null", "-"])
        let line = result.stderr.split(separator: "\n").first { $0.contains("PSNR") && $0.contains("average:") }
        let value = line?.split(separator: " ").first { $0.hasPrefix("average:") }?.dropFirst("average:".count)
        return (result.status, value.flatMap { Double($0) }, result.stderr)
    }

    /// Which turn of `reference` `url` shows (clockwise degrees: 0, 90, 180 or 270), judged by ffmpeg on both
    /// pictures scaled down by 16 (so the SMPTE bars' snow, new in every frame, averages out): the turn whose
    /// PSNR is highest, which must be a match (above 20 dB) and beat every other turn by 10 dB. Needs a
    /// picture that no turn maps onto itself, such as the SMPTE bars.
    func clockwiseTurn(of url: URL, from reference: URL) throws -> Int? {
        let turns = [0: "null", 90: "transpose=clock", 180: "hflip,vflip", 270: "transpose=cclock"]
        var scores: [Int: Double] = [:]
        for (angle, turn) in turns {
            let graph = "[0:v]scale=iw/16:ih/16:flags=area[picture];[1:v]\(turn),scale=iw/16:ih/16:flags=area[turned];"
                + "[picture][turned]psnr"
            // A turn that gives another shape cannot match: ffmpeg refuses to compare them.
            scores[angle] = try ffmpegPSNR(url, reference: reference, graph: graph).value ?? 0
        }
        let ranked = scores.sorted { $0.value > $1.value }
        print("\(url.lastPathComponent) against turns of \(reference.lastPathComponent): \(ranked.map { "\($0.key)° \($0.value.isFinite ? String(Int($0.value)) : "∞") dB" })")
        guard ranked[0].value > 20, ranked[0].value - ranked[1].value > 10 else {
            XCTFail("\(url.lastPathComponent) matches no turn of \(reference.lastPathComponent) clearly: \(scores)")
            return nil
        }
        return ranked[0].key
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

    /// Each decoded frame's mean luma (8-bit, 16 black), in presentation order, one per frame in the file
    /// (no frame repeated or dropped to a constant rate), as ffmpeg decodes the movie.
    func frameLumas(_ url: URL) throws -> [UInt8] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("lumas-\(UUID().uuidString).raw")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", url.path, "-an", "-fps_mode", "passthrough",
                                                      "-vf", "scale=1:1,format=gray", "-f", "rawvideo", output.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return [UInt8](try Data(contentsOf: output))
    }

    /// The capture time the test camera stamped into a picture's top rows (CaptureTimeStamp), decoded from
    /// ffmpeg's grey pixels of the file: milliseconds of CLOCK_MONOTONIC, modulo 2^32. Fails when the cells
    /// do not read as a stamp (references too close, check bits wrong).
    /// `width` is the picture's, when known (saves asking ffprobe). `lastFrame`: a movie's last frame's
    /// stamp, not its first's.
    func captureTimeStamp(_ url: URL, width known: Int? = nil, lastFrame: Bool = false) throws -> UInt32 {
        var width = known ?? 0
        if known == nil {
            let size = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                                         "stream=width", "-of", "csv=p=0", url.path])
            guard let probed = Int(size.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CheckFailed(description: "ffprobe gave no width for \(url.path): \(size.stderr)")
            }
            width = probed
        }
        let cell = CaptureTimeStamp.cellSize(forWidth: width)
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("stamp-\(UUID().uuidString).gray")
        defer { try? FileManager.default.removeItem(at: raw) }
        // The last frame: every frame of the last second decoded, the last one kept.
        let frames = lastFrame ? ["-sseof", "-1", "-i", url.path] : ["-i", url.path, "-frames:v", "1"]
        let decoded = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error"] + frames
                                  + ["-vf", "crop=iw:\(cell):0:0,format=gray", "-f", "rawvideo", raw.path])
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
        let pixels = [UInt8]((try Data(contentsOf: raw)).suffix(width * cell))
        // Each cell's mean over its middle half, away from edges that JPEG smears.
        let levels: [Double] = (0..<CaptureTimeStamp.cellCount).map { index in
            var sum = 0, count = 0
            for y in cell / 4..<cell * 3 / 4 {
                for x in index * cell + cell / 4..<index * cell + cell * 3 / 4 where y * width + x < pixels.count {
                    sum += Int(pixels[y * width + x]); count += 1
                }
            }
            return count > 0 ? Double(sum) / Double(count) : 0
        }
        let white = levels[0], black = levels[1]
        guard white - black > 100 else {
            throw CheckFailed(description: "\(url.lastPathComponent) carries no capture-time stamp (reference cells \(white), \(black))")
        }
        let bits = levels.dropFirst(2).map { $0 > (white + black) / 2 }
        let time = bits.prefix(32).reduce(UInt32(0)) { $0 << 1 | ($1 ? 1 : 0) }
        guard Array(bits) == Array(CaptureTimeStamp.cells(milliseconds: time).dropFirst(2)) else {
            throw CheckFailed(description: "\(url.lastPathComponent): the stamp's check bits do not match (levels \(levels))")
        }
        return time
    }

    /// A file's size in bytes, as the file system reports it.
    func fileSize(_ url: URL) throws -> Int {
        try XCTUnwrap((try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue, "no size for \(url.path)")
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

    /// Starts a recording and waits for it to end by itself (a limit reached, a failure): what the delegate
    /// heard, nil when it did not end within `timeout`.
    func recordUntilItEnds(_ movie: CaptureMovieFileOutput, to url: URL, timeout: TimeInterval = 30) async -> (url: URL, error: CaptureError?)? {
        let waiter = RecordingWaiter()
        movie.startRecording(to: url, recordingDelegate: waiter)
        return await waiter.waitForFinish(timeout: timeout)
    }

    /// The largest encoded frame or audio packet in a movie, bytes.
    func largestPacket(_ url: URL) throws -> Int {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "packet=size", "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, "ffprobe: \(result.stderr)")
        return try XCTUnwrap(result.stdout.split(separator: "\n").compactMap { Int($0) }.max(), "no packets in \(url.path)")
    }

    /// The types of an MP4's top-level boxes, in order ("ftyp", "moov", "moof", "mdat", ...).
    func topLevelBoxes(_ url: URL) throws -> [String] {
        let data = try Data(contentsOf: url)
        return mp4Boxes(in: data, data.startIndex..<data.endIndex).map(\.type)
    }

    /// How many sample descriptions (stsd entries) each track of a plain MP4 has: one per track unless the
    /// stream's caps changed as it was written.
    func sampleDescriptionCounts(_ url: URL) throws -> [Int] {
        let data = try Data(contentsOf: url)
        func children(_ range: Range<Int>, _ type: String) -> [Range<Int>] {
            mp4Boxes(in: data, range).filter { $0.type == type }.map(\.body)
        }
        let tables = children(data.startIndex..<data.endIndex, "moov").flatMap { children($0, "trak") }
            .flatMap { children($0, "mdia") }.flatMap { children($0, "minf") }.flatMap { children($0, "stbl") }
            .flatMap { children($0, "stsd") }
        // stsd: version and flags (4 bytes), then the entry count.
        return tables.map { body in data[body.lowerBound + 4..<body.lowerBound + 8].reduce(0) { $0 << 8 | Int($1) } }
    }

    /// Whether ffmpeg decodes every frame without an error.
    func ffmpegDecodes(_ url: URL) throws -> Bool {
        let result = try runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", url.path, "-f", "null", "-"])
        // The null muxer complains when two frames fall into one tick of its own time base, which a real
        // camera's jitter causes (vivid in a busy VM delivers frames 2 ms apart); that is not a decoding error.
        let complaints = result.stderr.split(separator: "\n").filter {
            !$0.hasPrefix("[null @") && !$0.trimmingCharacters(in: .whitespaces).hasPrefix("Last message repeated")
        }
        if result.status != 0 || !complaints.isEmpty {
            print("ffmpeg on \(url.lastPathComponent): exit \(result.status)\n" + complaints.prefix(10).joined(separator: "\n"))
        }
        return result.status == 0 && complaints.isEmpty
    }
}

extension XCTestCase {
    /// Starts recording `movie` to `url` and waits until its delegate hears that it started.
    func startRecording(_ movie: CaptureMovieFileOutput, to url: URL,
                        file: StaticString = #filePath, line: UInt = #line) async -> RecordingWaiter {
        let waiter = RecordingWaiter()
        movie.startRecording(to: url, recordingDelegate: waiter)
        let started = await waiter.waitForStart()
        XCTAssertTrue(started, "the recording to \(url.lastPathComponent) did not start", file: file, line: line)
        return waiter
    }
}

extension XCTestCase {
    /// Waits for the recording to finish and checks that it did, without an error: a recording that never
    /// finishes fails here (`finished?.error` alone would pass on nil). Returns the file it finished.
    @discardableResult
    func assertFinishedWithoutError(_ waiter: RecordingWaiter, timeout: TimeInterval = 15, _ what: String = "the recording",
                                    file: StaticString = #filePath, line: UInt = #line) async throws -> URL {
        let answer = await waiter.waitForFinish(timeout: timeout)
        let finished = try XCTUnwrap(answer, "\(what) did not finish within \(timeout) s", file: file, line: line)
        XCTAssertNil(finished.error, "\(what) finished with an error: \(finished.error.map { "\($0)" } ?? "")", file: file, line: line)
        return finished.url
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

/// True for the first caller only, from any thread.
final class FirstTime: @unchecked Sendable {
    private let lock = NSLock()
    private var taken = false
    func claim() -> Bool { lock.withLock { defer { taken = true }; return !taken } }
}

/// The boxes of an MP4 inside `range` of `data`, in order: each one's type and body. A box that runs past the
/// range (the last one of a cut file) ends with it; one whose size is too small to read ends the list.
func mp4Boxes(in data: Data, _ range: Range<Int>) -> [(type: String, body: Range<Int>)] {
    var boxes: [(type: String, body: Range<Int>)] = [], offset = range.lowerBound
    while offset + 8 <= range.upperBound {
        var size = data[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }, header = 8
        if size == 1, offset + 16 <= range.upperBound {
            size = data[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) }
            header = 16
        }
        if size == 0 { size = range.upperBound - offset }
        let type = String(decoding: data[offset + 4..<offset + 8], as: UTF8.self)
        guard size >= 8 else {
            boxes.append((type, offset + 8..<offset + 8))
            break
        }
        boxes.append((type, offset + min(header, size)..<min(offset + size, range.upperBound)))
        offset += size
    }
    return boxes
}

extension CapturePhotoOutput {
    /// capturePhoto with a deadline: a capture that never answers fails its test instead of hanging the suite.
    /// Its errors are capturePhoto's own.
    func capturePhoto(with settings: CapturePhotoSettings = CapturePhotoSettings(), within seconds: Double) async throws -> CapturePhoto {
        try await GCaptureTests.within(seconds, "capturePhoto") { try await self.capturePhoto(with: settings) }
    }
}

extension XCTestCase {
    /// The guard of a class that .ci/run runs inside the v4l2 VM: there, a missing /dev/video0 fails (vivid did
    /// not load); anywhere else the class is skipped, even under CI, which runs it in the VM.
    func requireVividCamera() throws {
        guard FileManager.default.fileExists(atPath: "/dev/video0") else {
            if ProcessInfo.processInfo.environment["V4L2VM"] == "1" {
                throw TestEnvironment.MissingPart(description: "inside the v4l2 VM but there is no /dev/video0: vivid did not load")
            }
            throw XCTSkip("no V4L2 camera here; run inside ../shared/testbed/v4l2-vm (.ci/run does)")
        }
    }

    /// Sets one of vivid's controls on /dev/video0 (`percentage_of_dropped_buffers` at 100: a camera that
    /// delivers nothing and says nothing, a wedged one). Throws when v4l2-ctl cannot (vivid disconnected:
    /// every open answers ENODEV).
    func setVividControl(_ name: String, _ value: Int) throws {
        let result = try runTool("/usr/bin/v4l2-ctl", ["-d", "/dev/video0", "--set-ctrl", "\(name)=\(value)"])
        guard result.status == 0 else { throw CheckFailed(description: "\(name)=\(value): \(result.stderr)") }
    }
}
