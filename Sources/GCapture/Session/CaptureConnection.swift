import Synchronization

/// How an output receives its input's frames (AVCaptureConnection): rotation and mirroring live here.
public final class CaptureConnection: @unchecked Sendable {
    private struct State {
        var videoRotationAngle: Double = 0
        var isVideoMirrored = false
        var automaticallyAdjustsVideoMirroring = true
    }
    private let state = Mutex(State())

    init() {}

    /// Degrees clockwise to rotate frames so they show upright: 0, 90, 180 or 270.
    public var videoRotationAngle: Double {
        get { state.withLock { $0.videoRotationAngle } }
        set {
            precondition(isVideoRotationAngleSupported(newValue), "videoRotationAngle must be 0, 90, 180 or 270")
            state.withLock { $0.videoRotationAngle = newValue }
        }
    }

    public func isVideoRotationAngleSupported(_ angle: Double) -> Bool { Self.supportedVideoRotationAngles.contains(angle) }

    /// The turns a connection takes: quarter turns, which photos and movies can carry without resampling.
    public static let supportedVideoRotationAngles: [Double] = [0, 90, 180, 270]

    /// Photos and movies are not mirrored unless this is set (with automatic adjustment turned off); a
    /// preview mirrors the front camera by itself.
    public var isVideoMirrored: Bool {
        get { state.withLock { $0.isVideoMirrored } }
        set { state.withLock { $0.isVideoMirrored = newValue } }
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
