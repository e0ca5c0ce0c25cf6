// Motion detection on the GCapture library: a CaptureMotionOutput in the session, told where to look
// (zones), where never to (masks) and how much change counts (sensitivity, minimum area); its delegate hears
// each motion begin and end, with where the picture changed and how much. With --record, a
// CaptureEventRecorder follows the same output: each motion records a clip that begins a few seconds before
// it (the movie output's pre-roll) and ends a few seconds after it.
//
//   swift run motion-detector                            the default camera, until Ctrl+C
//   swift run motion-detector --camera test              the test camera's scripted scene: a still picture
//                                                        where a dark object appears after 2 s
//   swift run motion-detector --camera test-still        the same picture, nothing ever appears
//   swift run motion-detector --camera test --record clips --zone 0,0,0.5,1
//
// Options: --camera ID, --zone X,Y,W,H and --mask X,Y,W,H (fractions of the picture from its top left; each
// may be repeated), --sensitivity 0-1 (default 0.5), --minimum-area 0-1 (default 0.005), --record FOLDER,
// --duration SECONDS. Each line: `motion began at 2.03 s: x 0.10 y 0.15, 0.25 × 0.30 (score 0.075)`,
// `motion ended at 3.91 s (peak score 0.075)`, `clip clips/motion-0001.mp4: 4.93 s`; at the end a summary.
import Foundation
import GCapture

struct Options {
    var camera: String?
    var zones: [CGRect] = []
    var masks: [CGRect] = []
    var sensitivity: Double?
    var minimumArea: Double?
    var record: URL?
    var duration: Double?

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func value(_ name: String) -> String {
            guard let value = rest.popFirst() else { fail("\(name) needs a value") }
            return value
        }
        func number(_ name: String) -> Double {
            guard let number = Double(value(name)), number >= 0 else { fail("\(name) takes a number") }
            return number
        }
        func rectangle(_ name: String) -> CGRect {
            let parts = value(name).split(separator: ",").compactMap { Double($0) }
            guard parts.count == 4 else { fail("\(name) takes X,Y,WIDTH,HEIGHT in fractions of the picture, e.g. 0,0,0.5,1") }
            return CGRect(x: parts[0], y: parts[1], width: parts[2], height: parts[3])
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--camera": camera = value(argument)
            case "--zone": zones.append(rectangle(argument))
            case "--mask": masks.append(rectangle(argument))
            case "--sensitivity": sensitivity = number(argument)
            case "--minimum-area": minimumArea = number(argument)
            case "--record": record = URL(fileURLWithPath: value(argument), isDirectory: true)
            case "--duration": duration = number(argument)
            default: fail("unknown option \(argument) (see the top of Examples/MotionDetector/main.swift)")
            }
        }
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("motion-detector: \(message)\n".utf8))
    exit(1)
}

func say(_ line: String) {
    print(line)
    fflush(nil)
}

func describe(_ box: CGRect) -> String {
    String(format: "x %.2f y %.2f, %.2f × %.2f", box.minX, box.minY, box.width, box.height)
}

/// Says each motion as it begins and ends (on the queue given with it, one event at a time).
final class MotionReporter: CaptureMotionOutputDelegate {
    func captureOutput(_ output: CaptureMotionOutput, didBeginMotion motion: CaptureMotionOutput.Motion) {
        say(String(format: "motion began at %.2f s: ", motion.presentationTime) + describe(motion.boundingBox)
            + String(format: " (score %.3f)", motion.score))
    }

    func captureOutput(_ output: CaptureMotionOutput, didEndMotion motion: CaptureMotionOutput.Motion) {
        // At the end, the box holds everywhere the picture changed during the motion, the score its peak.
        say(String(format: "motion ended at %.2f s: ", motion.presentationTime) + describe(motion.boundingBox)
            + String(format: " (peak score %.3f)", motion.score))
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
let camera: CaptureDevice
switch options.camera {
case "test"?, "test-still"?:
    // A still picture with a little sensor noise (none of it motion); in `test`, a dark rectangle appears.
    let object = TestCameraOptions.SceneObject(rect: CGRect(x: 0.10, y: 0.15, width: 0.25, height: 0.30), luma: 16, appearsAfter: 2)
    camera = CaptureDevice.makeTestCamera(uniqueID: options.camera!, options: TestCameraOptions(
        pattern: .smpte, motion: 0, noiseLevel: 4, scene: .init(object: options.camera == "test" ? object : nil)))
case let id?:
    guard let named = CaptureDevice.device(withUniqueID: id) else { fail("no camera \(id) (see `gcapture devices`)") }
    camera = named
case nil:
    guard let found = CaptureDevice.default(for: .video) else {
        fail((CaptureDevice.discoveryError.map { "\($0)" } ?? "no camera found") + "; --camera test uses the built-in test camera")
    }
    camera = found
}

let session = CaptureSession()
let motionOutput = CaptureMotionOutput()
motionOutput.zones = options.zones
motionOutput.masks = options.masks
if let sensitivity = options.sensitivity { motionOutput.sensitivity = sensitivity }
if let minimumArea = options.minimumArea { motionOutput.minimumArea = minimumArea }
let reporter = MotionReporter()
motionOutput.setDelegate(reporter, queue: DispatchQueue(label: "motion.events"))

// With --record: a movie output that keeps the last 2 s at all times, and a recorder that starts a clip on
// each motion, holds it while the motion goes on and ends it 2 s after.
var recorder: CaptureEventRecorder?
var clipReports: Task<Void, Never>?
if let folder = options.record {
    let movieOutput = CaptureMovieFileOutput()
    movieOutput.preRollDuration = 2
    let counter = Counter()
    let clips = CaptureEventRecorder(movieOutput: movieOutput, postRoll: 2) {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.appendingPathComponent(String(format: "motion-%04d.mp4", counter.next()))
    }
    clips.follow(motionOutput)
    let events = clips.events()
    clipReports = Task {
        for await case .ended(let clip, let record, let error) in events {
            say("clip \(clip.url.path): " + String(format: "%.2f s", record.duration ?? 0) + (error.map { " (\($0))" } ?? ""))
        }
    }
    recorder = clips
}

do {
    session.beginConfiguration()
    session.sessionPreset = .vga640x480
    try session.add(CaptureDeviceInput(device: camera))
    try session.add(motionOutput)
    if let movieOutput = recorder?.movieOutput { try session.add(movieOutput) }
    try session.commitAndWait()
    try await session.start()
} catch {
    fail("cannot start the camera: \(error)")
}
say("watching \(camera.localizedName)" + (options.zones.isEmpty ? "" : " in \(options.zones.count) zone(s)")
    + (options.record.map { "; clips of each motion go to \($0.path)" } ?? ""))

let (stopRequests, requestStop) = AsyncStream<Void>.makeStream()
let signals = [SIGINT, SIGTERM].map { number in
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
    source.setEventHandler { requestStop.yield() }
    source.resume()
    return source
}
if let duration = options.duration {
    DispatchQueue.main.asyncAfter(deadline: .now() + duration) { requestStop.yield() }
}
for await _ in stopRequests { break }
// The clip going on is finished (its post-roll cut short) before the camera stops.
await recorder?.endEvent(closing: true)
// Its `.ended` is told just after the clip is finished: heard before the reports stop.
try? await Task.sleep(for: .milliseconds(100))
clipReports?.cancel()
await session.stop()
signals.forEach { $0.cancel() }
let statistics = motionOutput.statistics
say("\(statistics.analyzedFrames) frames analyzed, \(statistics.framesWithMotion) with motion")

/// Numbers the clips.
final class Counter: Sendable {
    private let value = Locked(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
