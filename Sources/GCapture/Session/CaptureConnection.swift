import GStreamerKit
import Synchronization

/// How an output receives its input's frames (AVCaptureConnection): rotation and mirroring live here.
public final class CaptureConnection: @unchecked Sendable {
    private struct State {
        var videoRotationAngle: Double = 0
        var isVideoMirrored = false
        var automaticallyAdjustsVideoMirroring = true
    }
    private let state = Locked(State())
    /// Whether the output applies rotation and mirroring (photos, movies) or not (frames to code).
    private let turnsCapturedFrames: Bool

    init(turnsCapturedFrames: Bool) {
        self.turnsCapturedFrames = turnsCapturedFrames
    }

    /// Degrees clockwise to rotate frames so they show upright: 0, 90, 180 or 270 where
    /// isVideoRotationAngleSupported says so. Another angle is a programming error, as in AVFoundation
    /// (which raises): it stops the program rather than leave frames silently unturned.
    public var videoRotationAngle: Double {
        get { state.withLock { $0.videoRotationAngle } }
        set {
            precondition(isVideoRotationAngleSupported(newValue),
                         turnsCapturedFrames ? "videoRotationAngle must be 0, 90, 180 or 270"
                                             : "this output delivers frames as the camera gives them: videoRotationAngle must be 0")
            state.withLock { $0.videoRotationAngle = newValue }
        }
    }

    /// Whether the output turns what it captures by `angle`: photo and movie outputs by quarter turns;
    /// a video data output only by 0 (its frames come as the camera gives them).
    public func isVideoRotationAngleSupported(_ angle: Double) -> Bool {
        turnsCapturedFrames ? Self.supportedVideoRotationAngles.contains(angle) : angle == 0
    }

    /// The turns a connection takes: quarter turns, which photos and movies can carry without resampling.
    public static let supportedVideoRotationAngles: [Double] = [0, 90, 180, 270]

    /// Whether isVideoMirrored is honoured: by photo and movie outputs, not by a video data output.
    public var isVideoMirroringSupported: Bool { turnsCapturedFrames }

    /// Photos and movies are not mirrored unless this is set (with automatic adjustment turned off); a
    /// preview mirrors the front camera by itself. Setting it where isVideoMirroringSupported is false is a
    /// programming error, as in AVFoundation.
    public var isVideoMirrored: Bool {
        get { state.withLock { $0.isVideoMirrored } }
        set {
            precondition(isVideoMirroringSupported || !newValue, "this output delivers frames as the camera gives them: it cannot mirror them")
            state.withLock { $0.isVideoMirrored = newValue }
        }
    }

    public var automaticallyAdjustsVideoMirroring: Bool {
        get { state.withLock { $0.automaticallyAdjustsVideoMirroring } }
        set { state.withLock { $0.automaticallyAdjustsVideoMirroring = newValue } }
    }

    /// Whether captured frames (photos, movies) are to be mirrored: only when asked for explicitly.
    var mirrorsCapturedFrames: Bool {
        state.withLock { !$0.automaticallyAdjustsVideoMirroring && $0.isVideoMirrored }
    }
}
