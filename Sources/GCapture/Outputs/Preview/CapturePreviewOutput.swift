import Foundation
import GStreamerKit
import Synchronization

/// The live picture on a screen (AVCaptureVideoPreviewLayer's role): a permanent branch of the session that
/// ends in a video sink, in a window of its own or in one a toolkit hosts.
///
/// The preview never costs another output a frame: its guard queue holds one frame and drops the older one
/// when the display is slow, and the sink does not wait for the clock, so a slow screen shows fewer frames
/// while recordings, photos and frames to code get all of theirs.
///
/// Its connection mirrors like AVFoundation's preview: with automaticallyAdjustsVideoMirroring on (the
/// default) a front camera's picture is mirrored, as in a mirror, while photos and movies of the same session
/// are not. The connection's videoRotationAngle turns the picture. Rotation and mirroring apply at once,
/// also while running; the sink, gravity, place and window take effect when the session next builds the
/// branch (start, or a configuration commit that adds the output).
public final class CapturePreviewOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: inherited from CaptureOutput; its own state is `Locked`, an atomic and lets.
    /// How the picture fills its rectangle (AVLayerVideoGravity).
    public enum VideoGravity: String, Sendable, Hashable, CaseIterable {
        /// The whole picture, at its aspect ratio, with bars where the rectangle's shape differs.
        case resizeAspect
        /// The rectangle filled at the picture's aspect ratio, its overflow cropped.
        case resizeAspectFill
        /// The picture stretched to the rectangle.
        case resize
    }

    /// A place on the screen, in pixels: within the sink's window, or the toolkit's when windowHandle is set.
    public struct Rect: Sendable, Hashable {
        public var x: Int, y: Int, width: Int, height: Int
        public init(x: Int, y: Int, width: Int, height: Int) {
            self.x = x; self.y = y; self.width = width; self.height = height
        }
    }

    private struct State {
        var sinkName: String?
        var videoGravity = VideoGravity.resizeAspect
        var isFullscreen = false
        var renderRectangle: Rect?
        var windowHandle: UInt?
        var sinkInUse: String?
        /// The branch's videoflip while the output is part of a running graph.
        var flip: Element?
    }

    private let state = Locked(State())
    private let shown = Atomic<Int>(0)
    /// The environment the sink is chosen from; tests give another display without touching the process's.
    let environment: [String: String]

    public override init() {
        environment = ProcessInfo.processInfo.environment
        super.init()
        followConnection()
    }

    init(environment: [String: String]) {
        self.environment = environment
        super.init()
        followConnection()
    }

    /// Rotation and mirroring set on the connection while the preview runs show at once, as a turned
    /// device's preview must (a RotationCoordinator sets the angle live).
    private func followConnection() {
        connection.onChange { [weak self] in self?.applyOrientation() }
    }

    override class var turnsCapturedFrames: Bool { true }

    /// A video sink to use instead of choosing one: a factory name ("ximagesink") or a gst-launch fragment
    /// ending in a sink ("ximagesink display=:1", "identity sleep-time=100000 ! fakesink"). nil chooses:
    /// waylandsink where WAYLAND_DISPLAY is set, an X sink where DISPLAY is set, kmssink with neither.
    public var sinkName: String? {
        get { state.withLock { $0.sinkName } }
        set { state.withLock { $0.sinkName = newValue } }
    }

    public var videoGravity: VideoGravity {
        get { state.withLock { $0.videoGravity } }
        set { state.withLock { $0.videoGravity = newValue } }
    }

    /// The whole screen: honoured by waylandsink (its fullscreen mode) and kmssink (always the whole
    /// screen); an X sink has no fullscreen of its own, so asking for it there is an invalidSettings error.
    public var isFullscreen: Bool {
        get { state.withLock { $0.isFullscreen } }
        set { state.withLock { $0.isFullscreen = newValue } }
    }

    /// Where the picture goes (GstVideoOverlay's render rectangle); nil for the whole window.
    public var renderRectangle: Rect? {
        get { state.withLock { $0.renderRectangle } }
        set { state.withLock { $0.renderRectangle = newValue } }
    }

    /// A window of a toolkit to draw into (an X11 Window id, a Wayland surface pointer) instead of a window
    /// of the sink's own (GstVideoOverlay's window handle).
    public var windowHandle: UInt? {
        get { state.withLock { $0.windowHandle } }
        set { state.withLock { $0.windowHandle = newValue } }
    }

    /// The sink showing the picture, once the branch is built: a factory name, or the user's fragment.
    public var sinkInUse: String? { state.withLock { $0.sinkInUse } }

    /// Frames handed to the display since the output was created (the others were dropped for being late).
    public var shownFrameCount: Int { shown.load(ordering: .relaxed) }

    /// One frame waits while the display draws the previous one: a preview shows the newest frame or none.
    override var queueDepth: Int { 1 }

    /// The display lets a frame go when it shows the next.
    override var keepsFrames: Bool { false }

    /// Checks a sink the user named (`sinkName`) without opening any display: an installed element that
    /// shows video, or a gst-launch fragment. Throws invalidSettings naming the mistake.
    public static func checkSinkName(_ name: String) throws(CaptureError) {
        _ = try PreviewSink.choose(named: name, environment: [:])
    }

    /// Checks, before any session starts, that the preview can be shown here as it is set: finds the sink it
    /// would use (opening the display for a moment) and whether that sink can honour isFullscreen. Returns
    /// the sink; throws what starting a session with this output would.
    public func checkDisplay() throws(CaptureError) -> String {
        try resolveSink(state.withLock { $0 }).sink.description
    }

    /// The sink for these settings and the properties of it the branch can set.
    private func resolveSink(_ settings: State) throws(CaptureError) -> (sink: PreviewSink, properties: Set<String>) {
        let sink = try PreviewSink.choose(named: settings.sinkName, environment: environment)
        var properties = Set<String>()
        if let factory = sink.factory, let probe = try? Element.make(factory) {
            properties = Set(["force-aspect-ratio", "fullscreen", "render-rectangle", "sync", "qos", "display"]
                .filter { probe.hasProperty($0) })
        }
        if settings.isFullscreen, settings.windowHandle == nil, sink.factory != "kmssink", !properties.contains("fullscreen") {
            throw .invalidSettings("\(sink.description) cannot show the preview fullscreen (waylandsink and kmssink can)")
        }
        return (sink, properties)
    }

    override func branchDescription() throws(CaptureError) -> String? {
        let settings = state.withLock { $0 }
        let (sink, properties) = try resolveSink(settings)
        state.withLock { $0.sinkInUse = sink.description }
        // Mirroring and rotation are set when the output joins, from the camera then feeding the session; the
        // flip stays in the branch unflipped (passing buffers through untouched), so a change needs no rebuild.
        // It turns the camera's YUV, before conversion: 1.5-2 bytes a pixel instead of the sink's 4.
        var fragment = "videoflip name=preview-flip video-direction=identity ! videoconvert ! "
        fragment += try Self.gravityFragment(settings, sinkScales: sink.factory != "ximagesink",
                                             sinkKeepsAspect: !properties.contains("force-aspect-ratio"))
        fragment += sink.description
        if sink.factory != nil {
            fragment += " name=preview-sink"
            // The newest frame at once: waiting for the clock only makes a late frame later.
            if properties.contains("sync") { fragment += " sync=false" }
            if let display = sink.display, properties.contains("display") { fragment += " display=\"\(display)\"" }
            if properties.contains("force-aspect-ratio") {
                fragment += " force-aspect-ratio=\(settings.videoGravity != .resize)"
            }
            if settings.isFullscreen, properties.contains("fullscreen") { fragment += " fullscreen=true" }
        }
        return fragment
    }

    /// Scaling or cropping the sink cannot do itself, for a render rectangle of known size: aspect fill
    /// crops to the rectangle's shape (the sink then fills it exactly); a sink that cannot scale gets frames
    /// of the rectangle's size; a sink that always keeps the aspect is given pixels already stretched.
    private static func gravityFragment(_ settings: State, sinkScales: Bool, sinkKeepsAspect: Bool) throws(CaptureError) -> String {
        guard let rect = settings.renderRectangle else { return "" }
        guard rect.width > 0, rect.height > 0 else {
            throw .invalidSettings("the preview's render rectangle must have a positive width and height, not \(rect.width)x\(rect.height)")
        }
        var fragment = ""
        if settings.videoGravity == .resizeAspectFill {
            fragment += "aspectratiocrop aspect-ratio=\(rect.width)/\(rect.height) ! "
        }
        if !sinkScales || (sinkKeepsAspect && settings.videoGravity == .resize) {
            let borders = settings.videoGravity == .resizeAspect
            fragment += "videoscale add-borders=\(borders) ! video/x-raw,width=\(rect.width),height=\(rect.height),pixel-aspect-ratio=1/1 ! "
        }
        return fragment
    }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        guard let branch else { return }
        let flip = branch.element(named: "preview-flip")
        // Joined before the branch plays: the one moment the flip can be set to pass frames through.
        try? flip?.letVideoFlipPassFramesThrough()
        state.withLock { $0.flip = flip }
        videoDeviceDidChange(context.videoDevice())
        let settings = state.withLock { $0 }
        if let handle = settings.windowHandle { branch.setWindowHandle(handle) }
        if let rect = settings.renderRectangle {
            branch.setRenderRectangle(x: rect.x, y: rect.y, width: rect.width, height: rect.height)
        }
        branch.element(named: "guard")?.staticPad("src")?.addProbe(.buffer) { [weak self] _ in
            self?.shown.add(1, ordering: .relaxed)
            return .ok
        }
    }

    override func didDetach() {
        state.withLock { $0.flip = nil }
    }

    /// Automatic mirroring follows the camera: a switch to a front camera mirrors the running preview, a
    /// switch to a back one stops mirroring it, without rebuilding the branch (videoflip takes a new
    /// direction between two frames).
    override func videoDeviceDidChange(_ device: CaptureDevice?) {
        connection.adjustMirroringAutomatically(device?.position == .front)
        applyOrientation()
    }

    private func applyOrientation() {
        let transform = FrameTransform(rotation: Int(connection.videoRotationAngle), mirrored: connection.isVideoMirrored)
        try? state.withLock({ $0.flip })?.set("video-direction", transform.rawValue)
    }
}
