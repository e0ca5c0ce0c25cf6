import Dispatch
import Foundation
import GCapture
import GCaptureSupport
import NIOCore

/// The live picture for browsers, as MJPEG (multipart/x-mixed-replace): each frame is encoded to JPEG once,
/// by a CaptureVideoDataOutput's delegate, and the same bytes go to every viewer. With no viewer nothing is
/// encoded. When frames stop (the camera interrupted, unplugged, stalled) viewers get a "NO SIGNAL" picture
/// once a second until the camera comes back, as ustreamer does, so a page never shows a frozen frame as live.
public final class LiveView: Sendable {
    public struct Settings: Sendable, Equatable {
        public var width: Int
        public var height: Int
        public var framesPerSecond: Double
        /// JPEG quality, 1-100.
        public var quality: Int

        public init(width: Int = 1280, height: Int = 720, framesPerSecond: Double = 15, quality: Int = 70) {
            self.width = width
            self.height = height
            self.framesPerSecond = framesPerSecond
            self.quality = quality
        }
    }

    /// The multipart boundary; a part ends with it, so a browser shows a frame as soon as it has arrived.
    static let boundary = "gcapture-frame"
    /// What a viewer's stream starts with, right after the response head: the first boundary, sent at once
    /// (Chrome and Safari show nothing until a part's delimiter has come).
    static let streamStart = ByteBuffer(string: "--\(boundary)\r\n")
    /// Without a frame for this long, viewers see the "no signal" picture.
    static let signalLossAfter: Duration = .milliseconds(1500)

    public let settings: Settings
    /// Add it to the session before the configuration is committed.
    public let output: CaptureVideoDataOutput
    /// The same picture over WebRTC (WHEP), at most the live view's size; add it to the session too. It
    /// encodes only while someone watches.
    public let webRTC: CaptureWebRTCOutput

    private struct State {
        var viewers: [UInt64: @Sendable (ByteBuffer) -> Void] = [:]
        var nextViewer: UInt64 = 0
        var latest: ByteBuffer?
        var lastFrame: ContinuousClock.Instant?
        var showingNoSignal = false
        /// The session says its camera is interrupted: what frames come meanwhile are filler, not the camera.
        var cameraInterrupted = false
        var lastNoSignal: ContinuousClock.Instant?
        var encodedFrames = 0
        let created = ContinuousClock.now
    }

    private let state = Locked(State())
    private let encoder: FrameEncoder
    let noSignalPart: ByteBuffer
    private let watchdog = Locked<Task<Void, Never>?>(nil)
    private let sessionEvents = Locked<Task<Void, Never>?>(nil)

    public init(settings: Settings = Settings()) throws(CaptureError) {
        guard settings.width >= 16, settings.height >= 16, settings.width <= 7680, settings.height <= 4320 else {
            throw .invalidSettings("live view size \(settings.width)x\(settings.height) is not within 16x16...7680x4320")
        }
        guard (1...100).contains(settings.quality) else { throw .invalidSettings("live view quality \(settings.quality) is not within 1...100") }
        guard settings.framesPerSecond.isFinite, (0.5...60).contains(settings.framesPerSecond) else {
            throw .invalidSettings("live view rate \(settings.framesPerSecond) is not within 0.5...60 frames a second")
        }
        self.settings = settings
        output = CaptureVideoDataOutput()
        // Even sizes: 4:2:0 chroma needs them.
        output.videoSettings = .init(pixelFormat: "I420", width: settings.width & ~1, height: settings.height & ~1,
                                     maxFrameRate: settings.framesPerSecond)
        output.alwaysDiscardsLateVideoFrames = true
        webRTC = CaptureWebRTCOutput()
        webRTC.settings.maximumWidth = settings.width & ~1
        webRTC.settings.maximumHeight = settings.height & ~1
        noSignalPart = Self.part(jpeg: try NoSignalPicture.jpeg(width: settings.width & ~1, height: settings.height & ~1))
        encoder = FrameEncoder()
        encoder.liveView = self
        output.setSampleBufferDelegate(encoder, queue: DispatchQueue(label: "gcapture.web.live-view", qos: .userInitiated))
        startWatchdog()
    }

    deinit {
        watchdog.withLock { $0?.cancel() }
        sessionEvents.withLock { $0?.cancel() }
    }

    /// Follows the session's interruptions: while its camera is interrupted viewers see "no signal" (the
    /// session may feed the outputs black filler frames meanwhile, which are not the camera's picture).
    public func follow(_ session: CaptureSession) {
        let events = session.events()
        let task = Task { [weak self] in
            for await event in events {
                switch event {
                case .wasInterrupted(let reason) where reason.affectsVideo: self?.setCameraInterrupted(true)
                case .interruptionEnded(let reason) where reason.affectsVideo: self?.setCameraInterrupted(false)
                case .didStopRunning: self?.setCameraInterrupted(false)
                default: break
                }
            }
        }
        sessionEvents.withLock { $0?.cancel(); $0 = task }
    }

    private func setCameraInterrupted(_ interrupted: Bool) {
        state.withLock { state in
            state.cameraInterrupted = interrupted
            if interrupted { state.lastNoSignal = nil }
        }
        if interrupted { showNoSignalIfStalled() }
    }

    /// Frames encoded since the start: the same count however many viewers watch.
    public var encodedFrameCount: Int { state.withLock { $0.encodedFrames } }
    public var viewerCount: Int { state.withLock { $0.viewers.count } }

    /// The page's status of the MJPEG view and of the WebRTC one.
    var liveViewStatus: [String: any Sendable] {
        ["width": settings.width, "height": settings.height, "framesPerSecond": settings.framesPerSecond, "viewers": viewerCount,
         "encodedFrames": encodedFrameCount]
    }

    var webRTCStatus: [String: any Sendable] {
        ["viewers": webRTC.viewerCount, "connectedViewers": webRTC.connectedViewerCount, "encodedFrames": webRTC.encodedFrameCount,
         "encodedAudioBuffers": webRTC.encodedAudioBufferCount]
    }

    /// Registers a viewer: `send` gets each part (a JPEG with its part headers and the closing boundary),
    /// starting with the newest one, on the encoder's thread; it must not block. Returns the key to remove it.
    func addViewer(_ send: @escaping @Sendable (ByteBuffer) -> Void) -> UInt64 {
        let (key, latest) = state.withLock { state -> (UInt64, ByteBuffer?) in
            state.nextViewer += 1
            state.viewers[state.nextViewer] = send
            return (state.nextViewer, state.showingNoSignal ? noSignalPart : state.latest)
        }
        // The newest picture twice: a browser shows a part only once the next has begun, so a single one
        // would stay invisible until the next frame (or forever, while the camera is interrupted).
        if let latest { send(latest); send(latest) }
        return key
    }

    func removeViewer(_ key: UInt64) {
        _ = state.withLock { $0.viewers.removeValue(forKey: key) }
    }

    fileprivate var wantsFrames: Bool { state.withLock { !$0.viewers.isEmpty && !$0.cameraInterrupted } }

    fileprivate func publish(jpeg: Data) {
        let part = Self.part(jpeg: jpeg)
        let viewers = state.withLock { state -> [@Sendable (ByteBuffer) -> Void] in
            guard !state.cameraInterrupted else { return [] }
            state.latest = part
            state.lastFrame = .now
            state.showingNoSignal = false
            state.encodedFrames += 1
            return Array(state.viewers.values)
        }
        for send in viewers { send(part) }
    }

    fileprivate func frameArrivedWithoutViewers() {
        state.withLock { state in
            guard !state.cameraInterrupted else { return }
            state.lastFrame = .now
            state.showingNoSignal = false
        }
    }

    /// One JPEG as a part: its headers, the picture, the boundary that closes it.
    static func part(jpeg: Data) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: jpeg.count + 128)
        buffer.writeString("Content-Type: image/jpeg\r\nContent-Length: \(jpeg.count)\r\n\r\n")
        buffer.writeBytes(jpeg)
        buffer.writeString("\r\n--\(boundary)\r\n")
        return buffer
    }

    private func startWatchdog() {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                guard let self else { return }
                self.showNoSignalIfStalled()
            }
        }
        watchdog.withLock { $0 = task }
    }

    /// Once a second while frames are missing: the "no signal" picture, repeated so that it shows.
    private func showNoSignalIfStalled() {
        let now = ContinuousClock.now
        let viewers = state.withLock { state -> [@Sendable (ByteBuffer) -> Void] in
            let stalled = state.cameraInterrupted || now - (state.lastFrame ?? state.created) > Self.signalLossAfter
            guard stalled, !state.viewers.isEmpty else { return [] }
            if let sent = state.lastNoSignal, now - sent < .milliseconds(900) { return [] }
            state.lastNoSignal = now
            state.showingNoSignal = true
            return Array(state.viewers.values)
        }
        for send in viewers { send(noSignalPart) }
    }
}

/// The live view's frame delegate: JPEG encoding on its queue, only while someone watches.
private final class FrameEncoder: CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
    // @unchecked Sendable: `liveView` is set once, before the delegate is handed to the output (weak, as the
    // live view owns the output, so a var).
    weak var liveView: LiveView?

    func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
        guard let liveView else { return }
        guard liveView.wantsFrames else { liveView.frameArrivedWithoutViewers(); return }
        do {
            liveView.publish(jpeg: try sampleBuffer.jpegData(quality: liveView.settings.quality))
        } catch {
            // A frame that cannot be encoded is skipped; the next may be; the watchdog shows "no signal".
        }
    }
}

/// One camera's live view, by the name the console gives the camera (`/live.mjpg?camera=NAME`).
public struct CameraLiveView: Sendable {
    public let camera: String
    public let view: LiveView

    public init(camera: String, view: LiveView) {
        self.camera = camera
        self.view = view
    }
}
