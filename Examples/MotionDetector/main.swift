// A frame-analysis loop on the GCapture library, in AVFoundation's shape: a CaptureVideoDataOutput hands
// each frame to a delegate on a queue of ours, which compares it with the one before and says when motion
// starts and ends. The frames come small and grey (videoSettings: the session converts them once), late
// frames are dropped rather than queued (alwaysDiscardsLateVideoFrames), so the analysis never falls behind.
//
//   swift run motion-detector                       the default camera, until Ctrl+C
//   swift run motion-detector --camera test         the built-in test camera (its picture moves)
//   swift run motion-detector --camera test-still   the test camera with a still picture
//
// Options: --camera ID, --threshold PERCENT (of the picture that must change, default 0.5), --duration SECONDS.
// Each line: `motion started at 1.23 s (4.1% changed)`, `motion ended at 2.34 s`; at the end a summary.
import Foundation
import GCapture

struct Options {
    var camera: String?
    var threshold = 0.5
    var duration: Double?

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func number(_ name: String) -> Double {
            guard let text = rest.popFirst(), let value = Double(text), value > 0 else { fail("\(name) takes a positive number") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--camera":
                guard let id = rest.popFirst() else { fail("--camera needs a value") }
                camera = id
            case "--threshold": threshold = number(argument)
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

/// Compares each frame with the previous one: the share of pixels whose brightness changed by more than
/// `pixelThreshold` 8-bit steps (more than a camera's noise) is the amount of motion.
final class MotionDetector: CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
    /// The frames' size for the analysis: enough to see a person move, cheap to compare.
    static let width = 160, height = 120
    static let pixelThreshold = 24

    private let threshold: Double
    // Touched only on the delegate queue, one frame at a time.
    private var previous: [UInt8] = []
    private var current: [UInt8] = []
    private var moving = false
    private(set) var frames = 0
    private(set) var framesWithMotion = 0
    private(set) var dropped = 0
    private(set) var largestChange = 0.0

    init(thresholdPercent: Double) { threshold = thresholdPercent / 100 }

    func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
        // The luma plane (GRAY8: the only one), copied row by row: the stride may pad each row.
        let copied: Bool? = sampleBuffer.withPlanes { planes in
            guard let luma = planes.first, luma.rowBytes >= Self.width, luma.height >= Self.height else { return false }
            current.removeAll(keepingCapacity: true)
            for row in 0..<Self.height {
                current.append(contentsOf: luma.bytes[(row * luma.stride)..<(row * luma.stride + Self.width)])
            }
            return true
        }
        guard copied == true else { return }
        frames += 1
        defer { swap(&previous, &current) }
        guard previous.count == current.count else { return }
        var changed = 0
        for index in current.indices where abs(Int(current[index]) - Int(previous[index])) > Self.pixelThreshold {
            changed += 1
        }
        let share = Double(changed) / Double(current.count)
        largestChange = max(largestChange, share)
        if share >= threshold { framesWithMotion += 1 }
        let time = String(format: "%.2f", sampleBuffer.presentationTime)
        if share >= threshold, !moving {
            moving = true
            say("motion started at \(time) s (\(String(format: "%.1f", share * 100))% changed)")
        } else if share < threshold / 2, moving {
            // Half the threshold to end it: motion near the threshold does not flicker on and off.
            moving = false
            say("motion ended at \(time) s")
        }
    }

    func captureOutput(_ output: CaptureOutput, didDrop sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
        dropped += 1
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
let camera: CaptureDevice
switch options.camera {
case "test-still"?:
    camera = CaptureDevice.makeTestCamera(uniqueID: "test-still", options: TestCameraOptions(pattern: .checkers, motion: 0))
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
let videoOutput = CaptureVideoDataOutput()
let detector = MotionDetector(thresholdPercent: options.threshold)
let analysisQueue = DispatchQueue(label: "motion.analysis")
videoOutput.videoSettings = .init(pixelFormat: "GRAY8", width: MotionDetector.width, height: MotionDetector.height)
videoOutput.alwaysDiscardsLateVideoFrames = true
videoOutput.setSampleBufferDelegate(detector, queue: analysisQueue)

do {
    session.beginConfiguration()
    session.sessionPreset = .vga640x480
    try session.add(CaptureDeviceInput(device: camera))
    try session.add(videoOutput)
    try session.commitAndWait()
    try await session.start()
} catch {
    fail("cannot start the camera: \(error)")
}
say("watching \(camera.localizedName); motion is \(options.threshold)% of the picture changing")

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
await session.stop()
signals.forEach { $0.cancel() }
// The delegate's queue has delivered its last frame once the session stopped; read the figures on it.
let summary = analysisQueue.sync {
    "\(detector.frames) frames, \(detector.framesWithMotion) with motion, \(detector.dropped) dropped, "
        + "largest change \(String(format: "%.1f", detector.largestChange * 100))%"
}
say(summary)
