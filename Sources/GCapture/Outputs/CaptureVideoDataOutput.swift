import Dispatch
import Foundation
import GStreamerKit
import Synchronization

/// Receives frames from a CaptureVideoDataOutput on the delegate's queue
/// (AVCaptureVideoDataOutputSampleBufferDelegate, with AVFoundation's parameter types: the output as
/// CaptureOutput, the frame's connection), so a delegate written for AVFoundation conforms after renaming
/// (CMSampleBuffer becomes SampleBuffer).
public protocol CaptureVideoDataOutputSampleBufferDelegate: AnyObject, Sendable {
    func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection)
    /// A frame was discarded because the previous one was still being processed.
    func captureOutput(_ output: CaptureOutput, didDrop sampleBuffer: SampleBuffer, from connection: CaptureConnection)
}

// didOutput has no default, unlike AVFoundation's optional method: a delegate whose method is spelt with
// other types then fails to compile instead of silently never receiving a frame.
extension CaptureVideoDataOutputSampleBufferDelegate {
    public func captureOutput(_ output: CaptureOutput, didDrop sampleBuffer: SampleBuffer, from connection: CaptureConnection) {}
}

/// Frames to your code (AVCaptureVideoDataOutput): to a delegate on a queue of yours and/or to AsyncStreams.
public final class CaptureVideoDataOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: inherited from CaptureOutput; its own state is `Locked`, atomics and lets.
    /// Converts frames before delivery; nil keeps the camera's format and size (no conversion cost).
    public struct VideoSettings: Sendable, Hashable {
        public var pixelFormat: String?
        public var width: Int?
        public var height: Int?
        /// At most this many frames a second reach the output; the others are dropped before any conversion,
        /// so a live view at 10 fps from a 30 fps camera scales a third of the frames. Nil: every frame.
        public var maxFrameRate: Double?
        public init(pixelFormat: String? = nil, width: Int? = nil, height: Int? = nil, maxFrameRate: Double? = nil) {
            self.pixelFormat = pixelFormat
            self.width = width
            self.height = height
            self.maxFrameRate = maxFrameRate
        }
    }

    private struct State {
        var alwaysDiscardsLateVideoFrames = true
        var videoSettings: VideoSettings?
        var delegate: (any CaptureVideoDataOutputSampleBufferDelegate)?
        var delegateQueue: DispatchQueue?
        /// Frames handed to the delegate queue and not yet processed.
        var delegateInFlight = 0
        /// The output's branch while it is part of a graph.
        var branch: Bin?
        /// The branch's videoflip, once frames had to be turned or mirrored.
        var flip: Element?
    }

    private let state = Locked(State())
    private let delivered = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    private let layoutCache = VideoInfoCache()
    private let streams = Broadcast<SampleBuffer>()

    public override init() {
        super.init()
        // Rotation and mirroring set while frames flow apply from the next frame (a RotationCoordinator
        // sets the angle live), as AVFoundation's video data output does.
        connection.onChange { [weak self] in self?.applyOrientation() }
    }

    /// Frames come turned and mirrored as the connection says (mirrored only when asked for: automatic
    /// mirroring never mirrors frames to code), with width and height exchanged by a quarter turn.
    override class var turnsCapturedFrames: Bool { true }

    /// When true (the default) a frame that arrives while the delegate still processes the previous one is
    /// dropped (didDrop); when false up to `lateFrameBacklog` frames wait for the delegate. Either way a slow
    /// consumer never holds more camera buffers than that, so it cannot starve the camera or other outputs.
    /// Frames wait for a delegate that is late, when alwaysDiscardsLateVideoFrames is false: about a second.
    public static let lateFrameBacklog = 30
    public var alwaysDiscardsLateVideoFrames: Bool {
        get { state.withLock { $0.alwaysDiscardsLateVideoFrames } }
        set { state.withLock { $0.alwaysDiscardsLateVideoFrames = newValue } }
    }

    /// Takes effect at the next configuration commit (or start). Width and height are the delivered
    /// frames', after the connection's rotation.
    public var videoSettings: VideoSettings? {
        get { state.withLock { $0.videoSettings } }
        set { state.withLock { $0.videoSettings = newValue } }
    }

    public var sampleBufferDelegate: (any CaptureVideoDataOutputSampleBufferDelegate)? { state.withLock { $0.delegate } }

    /// Frames delivered to the delegate or streams since the output was created.
    public var deliveredFrameCount: Int { delivered.load(ordering: .relaxed) }
    /// Frames discarded because a consumer was late.
    public var droppedFrameCount: Int { dropped.load(ordering: .relaxed) }

    public func setSampleBufferDelegate(_ delegate: (any CaptureVideoDataOutputSampleBufferDelegate)?,
                                        queue: DispatchQueue?) {
        state.withLock { state in
            state.delegate = delegate
            state.delegateQueue = delegate == nil ? nil : (queue ?? DispatchQueue(label: "gcapture.video-data"))
        }
    }

    /// A stream of frames; each call makes an independent stream. With alwaysDiscardsLateVideoFrames it
    /// keeps only the newest frame for a slow reader. The stream ends when the output leaves a running graph
    /// (the session stops, or the output is removed or fails): a frame left unread in a stream would hold the
    /// camera's buffer, and with it the device, forever.
    public func sampleBuffers() -> AsyncStream<SampleBuffer> {
        let policy: AsyncStream<SampleBuffer>.Continuation.BufferingPolicy =
            alwaysDiscardsLateVideoFrames ? .bufferingNewest(1) : .bufferingNewest(60)
        return streams.makeStream(bufferingPolicy: policy)
    }

    override var queueDepth: Int { alwaysDiscardsLateVideoFrames ? 2 : 60 }

    /// A backlog of late frames is kept; the newest frame alone is not (a delegate or a stream keeping the
    /// sample buffers it was given keeps the camera's memory, as with AVFoundation's pool).
    override var keepsFrames: Bool { !alwaysDiscardsLateVideoFrames }

    /// An output that keeps late frames (alwaysDiscardsLateVideoFrames false) asked for every frame: it
    /// loses frames only when the camera's frame rate comes down.
    override var yieldsFramesUnderPressure: Bool { alwaysDiscardsLateVideoFrames }

    override func branchDescription() throws(CaptureError) -> String? {
        // A flip only when frames are to be turned now; one asked for later is put in then (applyOrientation).
        // An unturned flip passing frames through cost every start 0.03-0.05 ms of negotiation (a tenth of
        // what the engine adds to a start) and every frame a pass. It turns the camera's YUV, before any
        // conversion to a larger format.
        let transform = self.transform
        var fragment = transform == .identity ? "" : "videoflip name=\(Self.flipName) video-direction=\(transform.rawValue) ! "
        if let settings = videoSettings {
            var caps = "video/x-raw"
            if let format = settings.pixelFormat {
                guard format.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                    throw .invalidSettings("pixel format '\(format)' is not a GStreamer format name")
                }
                caps += ",format=\(format)"
            }
            if let width = settings.width { caps += ",width=\(width)" }
            if let height = settings.height { caps += ",height=\(height)" }
            if let rate = settings.maxFrameRate {
                guard rate.isFinite, rate > 0, rate <= 1000 else { throw .invalidSettings("maximum frame rate \(rate) is not within (0, 1000]") }
                // videorate counts whole frames a second: 7.5 becomes 8.
                fragment += "videorate drop-only=true max-rate=\(max(1, Int(rate.rounded(.up)))) ! "
            }
            fragment += "videoconvert ! videoscale ! capsfilter caps=\"\(caps)\" ! "
        }
        return fragment + Self.appSinkFragment
    }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        state.withLock { state in
            state.branch = branch
            state.flip = branch?.element(named: Self.flipName)
        }
        applyOrientation()
        guard let sink = Self.appSink(in: branch) else { return }
        sink.setSampleHandler { [weak self] sample in self?.deliver(sample) }
    }

    override func didDetach() {
        state.withLock { state in
            state.branch = nil
            state.flip = nil
        }
        streams.finishAll()
    }

    private static let flipName = "frame-flip"

    private var transform: FrameTransform {
        FrameTransform(rotation: Int(connection.videoRotationAngle), mirrored: connection.mirrorsCapturedFrames)
    }

    /// Turns the branch's flip to the connection's orientation; the first turn of a branch built without one
    /// puts one in behind the guard queue, from the next frame on.
    private func applyOrientation() {
        let transform = self.transform
        // Made under the lock, so two changes at once put in one flip; the later one only turns it.
        let (flip, insertion) = state.withLock { state -> (Element?, (branch: Bin, entrance: Element)?) in
            if let flip = state.flip { return (flip, nil) }
            guard transform != .identity, let branch = state.branch, let entrance = branch.element(named: "guard"),
                  let flip = try? Element.make("videoflip", name: Self.flipName) else { return (nil, nil) }
            state.flip = flip
            return (flip, (branch, entrance))
        }
        try? flip?.set("video-direction", transform.rawValue)
        guard let flip, let (branch, entrance) = insertion else { return }
        branch.insert(flip, after: entrance) { [weak self] inserted in
            guard !inserted else { return }
            Log.session.warning("\(self?.displayName ?? "video data output"): frames stay unturned: videoflip does not take the camera's format")
            self?.state.withLock { state in if state.flip === flip { state.flip = nil } }
        }
    }

    private func deliver(_ sample: Sample) {
        guard let buffer = SampleBuffer(sample, layoutCache: layoutCache) else { return }
        let (delegate, queue, accepted) = state.withLock { state in
            let limit = state.alwaysDiscardsLateVideoFrames ? 1 : Self.lateFrameBacklog
            let accepted = state.delegate != nil && state.delegateInFlight < limit
            if accepted { state.delegateInFlight += 1 }
            return (state.delegate, state.delegateQueue, accepted)
        }
        var wasDelivered = false
        for result in streams.yield(buffer) {
            switch result {
            case .enqueued: wasDelivered = true
            case .dropped: dropped.add(1, ordering: .relaxed)
            case .terminated: break
            @unknown default: break
            }
        }
        if let delegate, let queue {
            if accepted {
                wasDelivered = true
                queue.async {
                    delegate.captureOutput(self, didOutput: buffer, from: self.connection)
                    self.state.withLock { $0.delegateInFlight -= 1 }
                }
            } else {
                dropped.add(1, ordering: .relaxed)
                queue.async { delegate.captureOutput(self, didDrop: buffer, from: self.connection) }
            }
        }
        if wasDelivered { delivered.add(1, ordering: .relaxed) }
    }
}
