import Foundation
import GCapture
import GStreamerKit
import Synchronization

/// Both contestants: the engine as an app uses it, and the plain GStreamer pipeline it amounts to.
///
/// For one CaptureVideoDataOutput on the test camera at .hd1920x1080 the engine builds (SessionGraph,
/// SourceBuilder, CaptureVideoDataOutput.branchDescription):
///
///     pipeline (system clock) ┬ bin[videotestsrc ! capsfilter] ! tee(allow-not-linked) ! bin[queue ! appsink]
///                             └ audio tee (unlinked)
///
/// The plain pipeline has the same elements with the same settings, without the bins.
enum Contestants {
    static let width = 1920, height = 1080, frameRate = 30
    static let caps = "video/x-raw,format=NV12,width=\(width),height=\(height),framerate=\(frameRate)/1"
    static let source = "videotestsrc is-live=true pattern=smpte horizontal-speed=2"
    /// The engine's guard queue (CaptureOutput.queueDepth 2) and appsink (CaptureVideoDataOutput).
    static let branch = "queue leaky=downstream max-size-buffers=2 max-size-bytes=0 max-size-time=0 ! "
        + "appsink name=sink sync=false async=false max-buffers=1 drop=false emit-signals=false enable-last-sample=false"

    static let plainDescription = "\(source) ! \(caps) ! tee allow-not-linked=true ! \(branch)"

    /// The floor: the same source into a fakesink, run by gst-launch-1.0 itself (no appsink, no Swift).
    static func referenceDescription(frames: Int) -> String {
        "\(source) num-buffers=\(frames) ! \(caps) ! fakesink sync=false"
    }

    /// The plain pipeline, parsed, with its appsink (no handler yet).
    static func makePlainPipeline() throws -> (Pipeline, AppSink) {
        let pipeline = try Pipeline.launch(plainDescription)
        pipeline.useClock(.system)
        guard let element = pipeline.element(named: "sink"), let sink = AppSink(element) else {
            throw BenchmarkError.setup("the plain pipeline has no appsink named 'sink'")
        }
        return (pipeline, sink)
    }

    /// `source ! appsink`, the plain start a camera's start or switch is held against: PLAYING → the first
    /// sample in the appsink's callback, in seconds.
    static func plainStart(_ source: String) throws -> Double {
        let pipeline = try Pipeline.launch("\(source) ! appsink name=sink sync=false max-buffers=1 drop=true")
        defer { pipeline.shutDown() }
        guard let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
            throw BenchmarkError.setup("the plain pipeline has no appsink")
        }
        let first = DispatchSemaphore(value: 0)
        let seen = Atomic<Bool>(false)
        sink.setSampleHandler { _ in
            if !seen.exchange(true, ordering: .relaxed) { first.signal() }
        }
        let started = ContinuousClock.now
        try pipeline.setState(.playing)
        guard first.wait(timeout: .now() + 10) == .success else { throw BenchmarkError.setup("the plain pipeline delivered no frame in 10 s") }
        return (ContinuousClock.now - started).inSeconds
    }

    /// The test camera as the plain pipeline's source is configured.
    static func makeTestCamera() -> CaptureDevice {
        CaptureDevice.makeTestCamera(options: TestCameraOptions(pattern: .smpte, motion: 2))
    }

    /// A session with the test camera at 1080p and one video data output, configured but not started.
    static func makeSession(name: String) throws -> (CaptureSession, CaptureVideoDataOutput) {
        let session = CaptureSession(name: name)
        let output = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: makeTestCamera()))
        try session.add(output)
        session.sessionPreset = .hd1920x1080
        try session.commitAndWait()
        return (session, output)
    }
}

enum BenchmarkError: Error, CustomStringConvertible {
    case usage(String)
    case setup(String)
    case noFrame(String)
    case child(String)

    var description: String {
        switch self {
        case .usage(let message): message
        case .setup(let message): "setup failed: \(message)"
        case .noFrame(let message): "no frame: \(message)"
        case .child(let message): "child process: \(message)"
        }
    }
}
