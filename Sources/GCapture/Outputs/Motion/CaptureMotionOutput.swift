import Dispatch
import Foundation
import GStreamerKit
import Synchronization

/// Hears when motion begins and ends in front of the camera, on the queue given with the delegate.
public protocol CaptureMotionOutputDelegate: AnyObject, Sendable {
    func captureOutput(_ output: CaptureMotionOutput, didBeginMotion motion: CaptureMotionOutput.Motion)
    func captureOutput(_ output: CaptureMotionOutput, didEndMotion motion: CaptureMotionOutput.Motion)
}

/// Motion detection (a Linux addition, no AVFoundation counterpart): the camera's frames, scaled down to a
/// small grey picture in the output's own branch, compared with a background that adapts slowly. Events go
/// to a delegate on a queue of yours, to `events()` streams and to the `onMotionBegan`/`onMotionEnded` hooks.
///
/// Sensor noise, a slow change of the light and compression flicker are not motion: each pixel's threshold
/// follows its own noise, the whole picture's brightness change is taken out before comparing, and motion
/// begins after two frames that show it and ends after half a second without. Coordinates are normalized
/// (0...1, origin at the top left) in the camera's picture as captured, before any rotation.
public final class CaptureMotionOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: inherited from CaptureOutput; its own state is `Locked`, atomics and lets.

    /// One motion, as it began or ended.
    public struct Motion: Sendable, Hashable {
        /// Where the picture changed, normalized. At the beginning: in the frame that began the motion; at the
        /// end: everywhere it changed while the motion ran.
        public var boundingBox: CGRect
        /// The share of the zones' area that changed (at the end: the highest of any frame).
        public var score: Double
        /// Session running time of the frame that began or ended the motion, in nanoseconds: the clock of
        /// `SampleBuffer.presentationTimeStamp`.
        public var presentationTimeStamp: UInt64
        /// The same in seconds.
        public var presentationTime: Double { Double(presentationTimeStamp) / 1e9 }

        public init(boundingBox: CGRect, score: Double, presentationTimeStamp: UInt64) {
            self.boundingBox = boundingBox
            self.score = score
            self.presentationTimeStamp = presentationTimeStamp
        }
    }

    public enum Event: Sendable, Hashable {
        case motionBegan(Motion)
        case motionEnded(Motion)
    }

    /// The width of the picture the analysis sees; its height keeps the camera's aspect ratio.
    public static let analysisWidth = 160

    private struct Delivery {
        var delegate: (any CaptureMotionOutputDelegate)?
        var delegateQueue: DispatchQueue?
        var onMotionBegan: (@Sendable (Motion) -> Void)?
        var onMotionEnded: (@Sendable (Motion) -> Void)?
    }

    private let settings = Locked(MotionSettings())
    private let delivery = Locked(Delivery())
    private let analysis = Locked(MotionAnalysis())
    private let layoutCache = VideoInfoCache()
    private let streams = Broadcast<Event>()
    /// Where the hooks run, one event at a time and in order, never on the streaming thread.
    private let hookQueue = DispatchQueue(label: "gcapture.motion")
    private let motionDetected = Atomic<Bool>(false)

    public override init() { super.init() }

    // MARK: What counts

    /// Where motion counts (normalized rectangles); empty, the default: the whole picture.
    public var zones: [CGRect] {
        get { settings.withLock { $0.zones } }
        set { settings.withLock { $0.zones = Self.clipped(newValue); $0.regionsGeneration += 1 } }
    }

    /// Where motion never counts, even inside a zone (a tree in the wind, a screen, a clock).
    public var masks: [CGRect] {
        get { settings.withLock { $0.masks } }
        set { settings.withLock { $0.masks = Self.clipped(newValue); $0.regionsGeneration += 1 } }
    }

    /// 0...1 (default 0.5): higher, a smaller change of a pixel against its own noise counts.
    public var sensitivity: Double {
        get { settings.withLock { $0.sensitivity } }
        set { settings.withLock { $0.sensitivity = newValue.isFinite ? min(max(newValue, 0), 1) : 0.5 } }
    }

    /// The share of the zones' area (0...1, default 0.005) that must change in a frame for it to show motion.
    public var minimumArea: Double {
        get { settings.withLock { $0.minimumArea } }
        set { settings.withLock { $0.minimumArea = newValue.isFinite ? min(max(newValue, 0.0001), 1) : 0.005 } }
    }

    private static func clipped(_ rectangles: [CGRect]) -> [CGRect] {
        rectangles.map { $0.standardized.intersection(CGRect(x: 0, y: 0, width: 1, height: 1)) }
            .filter { !$0.isNull && !$0.isEmpty }
    }

    // MARK: Where events go

    /// The delegate and the queue it is called on (nil: a serial queue of the output's).
    public func setDelegate(_ delegate: (any CaptureMotionOutputDelegate)?, queue: DispatchQueue?) {
        delivery.withLock { delivery in
            delivery.delegate = delegate
            delivery.delegateQueue = delegate == nil ? nil : (queue ?? DispatchQueue(label: "gcapture.motion-delegate"))
        }
    }

    public var delegate: (any CaptureMotionOutputDelegate)? { delivery.withLock { $0.delegate } }

    /// For another part of the program (a recorder that starts a clip on motion): called on the output's own
    /// serial queue, in order with `onMotionEnded`.
    public var onMotionBegan: (@Sendable (Motion) -> Void)? {
        get { delivery.withLock { $0.onMotionBegan } }
        set { delivery.withLock { $0.onMotionBegan = newValue } }
    }

    public var onMotionEnded: (@Sendable (Motion) -> Void)? {
        get { delivery.withLock { $0.onMotionEnded } }
        set { delivery.withLock { $0.onMotionEnded = newValue } }
    }

    /// A stream of events; each call makes an independent stream, which lives as long as its reader (motion
    /// holds no frame, so it outlives a stop and goes on after the next start).
    public func events() -> AsyncStream<Event> { streams.makeStream(bufferingPolicy: .bufferingNewest(64)) }

    // MARK: State

    /// Whether a motion is running (began and not yet ended).
    public var isMotionDetected: Bool { motionDetected.load(ordering: .relaxed) }

    /// Frames analyzed since the output was created.
    public var analyzedFrameCount: Int { analysis.withLock { $0.analyzedFrames } }

    /// What the analysis has seen so far: how close the scene's noise came to motion, and the picture now.
    public struct Statistics: Sendable, Hashable {
        public var analyzedFrames: Int
        /// Frames whose changed share reached `minimumArea`.
        public var framesWithMotion: Int
        /// The highest score of a frame analyzed while no motion ran.
        public var largestStillScore: Double
        /// The last frame's mean pixel noise, in luma steps (0 before the first frame).
        public var noise: Double
        /// How many luma steps the last frame's whole picture differed from the background (taken out).
        public var brightnessChange: Int
    }

    public var statistics: Statistics {
        analysis.withLock { analysis in
            Statistics(analyzedFrames: analysis.analyzedFrames, framesWithMotion: analysis.framesWithMotion,
                       largestStillScore: analysis.largestStillScore, noise: analysis.lastMeasurement?.noise ?? 0,
                       brightnessChange: analysis.lastMeasurement?.brightnessChange ?? 0)
        }
    }

    // MARK: The branch

    /// Frames are let go as soon as they are analyzed: the camera's buffers are taken as they are.
    override var keepsFrames: Bool { false }

    /// Not thinned under system pressure: its work per frame is small (a 160-pixel picture), and how soon
    /// motion is seen is what a recorder started by it waits for. (Critical pressure halves the camera's
    /// frames for every output, this one too.)
    override var yieldsFramesUnderPressure: Bool { false }

    override func branchDescription() throws(CaptureError) -> String? {
        // Scaled before converting: nearest-neighbour reads only the rows and samples it keeps, and the
        // conversion to grey then runs on the small picture, not on the camera's. The height follows from the
        // width at square pixels. Late frames are dropped by the guard queue in front.
        "videoscale method=nearest-neighbour ! videoconvert ! capsfilter caps=\"video/x-raw,format=GRAY8,"
            + "width=\(Self.analysisWidth),pixel-aspect-ratio=1/1\" ! " + Self.appSinkFragment
    }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        deliver(analysis.withLock { $0.restart() })
        guard let sink = Self.appSink(in: branch) else { return }
        // Each frame is read where it lies and let go at once: no Sample, no allocation per frame.
        sink.setMappedFrameHandler(layoutCache: layoutCache) { [weak self] frame in self?.analyze(frame) }
    }

    override func didDetach() {
        deliver(analysis.withLock { $0.restart() })
    }

    override func sessionWasInterrupted(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        deliver(analysis.withLock { $0.setPaused(true) })
    }

    override func sessionInterruptionEnded(_ reason: CaptureSession.InterruptionReason) {
        guard reason.affectsVideo else { return }
        deliver(analysis.withLock { $0.setPaused(false) })
    }

    override func videoDeviceDidChange(_ device: CaptureDevice?) {
        // Another camera's picture is not motion: its background is learnt anew.
        deliver(analysis.withLock { $0.restart() })
    }

    private func analyze(_ frame: AppSink.MappedFrame) {
        guard frame.layout.format == "GRAY8" else { return }
        let settings = self.settings.withLock { $0 }
        let event = analysis.withLock { analysis in
            analysis.analyze(frame.bytes, width: frame.layout.width, height: frame.layout.height,
                             stride: frame.layout.strides[0], presentationTime: UInt64(frame.presentationTime ?? 0),
                             settings: settings)
        }
        deliver(event)
    }

    private func deliver(_ event: Event?) {
        guard let event else { return }
        let delivery = self.delivery.withLock { $0 }
        // Set before anyone hears of the event, so that whoever does reads the same state.
        if case .motionBegan = event { motionDetected.store(true, ordering: .relaxed) } else { motionDetected.store(false, ordering: .relaxed) }
        streams.yield(event)
        switch event {
        case .motionBegan(let motion):
            if let delegate = delivery.delegate, let queue = delivery.delegateQueue {
                queue.async { delegate.captureOutput(self, didBeginMotion: motion) }
            }
            if let hook = delivery.onMotionBegan { hookQueue.async { hook(motion) } }
        case .motionEnded(let motion):
            if let delegate = delivery.delegate, let queue = delivery.delegateQueue {
                queue.async { delegate.captureOutput(self, didEndMotion: motion) }
            }
            if let hook = delivery.onMotionEnded { hookQueue.async { hook(motion) } }
        }
    }
}
