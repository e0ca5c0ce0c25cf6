import GStreamerKit
import Synchronization

/// How an output receives its input's frames (AVCaptureConnection): rotation and mirroring live here.
/// In a multi-camera session it also says which input ports feed the output (`inputPorts`).
public final class CaptureConnection: Sendable, Hashable {
    /// Rotation and mirroring: the output's own, shared by every connection made for the output's video (a
    /// multi-camera app turns the connection it made, and the output turns its frames).
    final class Settings: Sendable {
        struct State {
            var videoRotationAngle: Double = 0
            var isVideoMirrored = false
            var automaticallyAdjustsVideoMirroring = true
            /// What automatic adjustment chose: mirrored for a front camera's preview, never for what is captured.
            var automaticMirroring = false
        }
        let state = Locked(State())
        /// Told after a setting changes, outside the lock: an output that applies settings while it runs.
        let changeHandler = Locked<(@Sendable () -> Void)?>(nil)
        /// Whether the output applies rotation and mirroring: every video output does (preview, frames to
        /// code, photos, movies); an output of another medium does not.
        let turnsCapturedFrames: Bool

        init(turnsCapturedFrames: Bool) { self.turnsCapturedFrames = turnsCapturedFrames }
    }

    let settings: Settings
    private var state: Locked<Settings.State> { settings.state }
    private var changeHandler: Locked<(@Sendable () -> Void)?> { settings.changeHandler }
    private var turnsCapturedFrames: Bool { settings.turnsCapturedFrames }

    /// The input ports the connection carries (AVCaptureConnection.inputPorts): set for a connection made with
    /// `init(inputPorts:output:)`; empty for the connection an output has of its own.
    public let inputPorts: [CaptureInput.Port]
    /// The output the connection feeds: set for a connection made with `init(inputPorts:output:)`.
    public let output: CaptureOutput?

    init(turnsCapturedFrames: Bool) {
        settings = Settings(turnsCapturedFrames: turnsCapturedFrames)
        inputPorts = []
        output = nil
    }

    /// A connection from input ports to an output, for a multi-camera session's addConnection
    /// (AVCaptureConnection(inputPorts:output:)). A connection of a camera's video port shares its rotation
    /// and mirroring with the output's own connection (`output.connection`): turning either turns the output.
    public init(inputPorts: [CaptureInput.Port], output: CaptureOutput) {
        let carriesVideo = inputPorts.contains { $0.mediaType == .video }
        settings = carriesVideo ? output.connection.settings : Settings(turnsCapturedFrames: false)
        self.inputPorts = inputPorts
        self.output = output
    }

    public static func == (a: CaptureConnection, b: CaptureConnection) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// Degrees clockwise to rotate frames so they show upright: 0, 90, 180 or 270 where
    /// isVideoRotationAngleSupported says so. Another angle is a programming error, as in AVFoundation
    /// (which raises): it stops the program rather than leave frames silently unturned.
    public var videoRotationAngle: Double {
        get { state.withLock { $0.videoRotationAngle } }
        set {
            precondition(isVideoRotationAngleSupported(newValue),
                         turnsCapturedFrames ? "videoRotationAngle must be 0, 90, 180 or 270"
                                             : "this output carries no picture: videoRotationAngle must be 0")
            state.withLock { $0.videoRotationAngle = newValue }
            changed()
        }
    }

    /// Whether the output turns what it captures by `angle`: every video output (preview, frames, photos,
    /// movies) by quarter turns.
    public func isVideoRotationAngleSupported(_ angle: Double) -> Bool {
        turnsCapturedFrames ? Self.supportedVideoRotationAngles.contains(angle) : angle == 0
    }

    /// The turns a connection takes: quarter turns, which every output can do without resampling.
    public static let supportedVideoRotationAngles: [Double] = [0, 90, 180, 270]

    /// Whether isVideoMirrored is honoured: by every video output (preview, frames, photos, movies).
    public var isVideoMirroringSupported: Bool { turnsCapturedFrames }

    /// Whether the picture is mirrored. While automaticallyAdjustsVideoMirroring is on, this reads what the
    /// automatic adjustment chose (a front camera's preview is mirrored; photos, movies and frames never are) and
    /// setting it is a programming error, as in AVFoundation (which raises): turn the automatic adjustment off
    /// first. A silently ignored setting would leave the picture the other way round with no sign why.
    /// Setting it where isVideoMirroringSupported is false is a programming error too.
    /// Mirroring applies after the rotation: the picture turned, then mirrored left-right as displayed.
    public var isVideoMirrored: Bool {
        get { state.withLock { $0.automaticallyAdjustsVideoMirroring ? $0.automaticMirroring : $0.isVideoMirrored } }
        set {
            precondition(isVideoMirroringSupported || !newValue, "this output carries no picture: it cannot mirror it")
            state.withLock { state in
                precondition(!state.automaticallyAdjustsVideoMirroring,
                             "isVideoMirrored cannot be set while automaticallyAdjustsVideoMirroring is true: set that to false first")
                state.isVideoMirrored = newValue
            }
            changed()
        }
    }

    /// On by default: the connection mirrors as a user expects (a front camera's preview like a mirror,
    /// everything captured as the scene is). Turn it off to choose with isVideoMirrored.
    public var automaticallyAdjustsVideoMirroring: Bool {
        get { state.withLock { $0.automaticallyAdjustsVideoMirroring } }
        set {
            state.withLock { $0.automaticallyAdjustsVideoMirroring = newValue }
            changed()
        }
    }

    /// Calls `handler` after each change of rotation or mirroring (a preview applies them while it runs).
    func onChange(_ handler: (@Sendable () -> Void)?) {
        changeHandler.withLock { $0 = handler }
    }

    private func changed() {
        changeHandler.withLock { $0 }?()
    }

    /// Records what automatic adjustment chose for the camera now feeding the output.
    func adjustMirroringAutomatically(_ mirrored: Bool) {
        state.withLock { $0.automaticMirroring = mirrored }
    }

    /// Whether captured frames (photos, movies, frames to code) are to be mirrored: only when asked for
    /// explicitly.
    var mirrorsCapturedFrames: Bool {
        state.withLock { !$0.automaticallyAdjustsVideoMirroring && $0.isVideoMirrored }
    }
}
