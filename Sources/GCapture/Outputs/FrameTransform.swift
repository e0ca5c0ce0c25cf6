/// How a captured picture is turned for display, from the connection's rotation and mirroring: the one
/// table every output reads (preview, frames, photo pixels, photo EXIF, MP4, Matroska), so that no two paths
/// can show one setting differently.
///
/// A connection's (videoRotationAngle R, isVideoMirrored M) means: turn the camera's picture R degrees
/// clockwise, then mirror it left-right as displayed (a front camera's portrait selfie is mirrored the way
/// the user sees it). Mirroring after a quarter turn is therefore a transpose (90) or a transverse (270) of
/// the camera's pixels, not the horizontal flip followed by the turn.
///
/// The raw values are videoflip's video-direction nicks, for turning pixels; `imageOrientation` asks a
/// viewer instead, and `displayMatrixSplit` a player.
enum FrameTransform: String, Sendable, CaseIterable {
    case identity, rotate90 = "90r", rotate180 = "180", rotate270 = "90l"
    /// Mirrored left-right; then mirrored after a turn of 90 (the main diagonal, upper left to lower right),
    /// 180 (top-bottom) and 270 (the other diagonal).
    case mirror = "horiz", mirrorRotate90 = "ul-lr", mirrorRotate180 = "vert", mirrorRotate270 = "ur-ll"

    init(rotation: Int, mirrored: Bool) {
        switch (rotation, mirrored) {
        case (90, false): self = .rotate90
        case (180, false): self = .rotate180
        case (270, false): self = .rotate270
        case (0, true): self = .mirror
        case (90, true): self = .mirrorRotate90
        case (180, true): self = .mirrorRotate180
        case (270, true): self = .mirrorRotate270
        default: self = .identity
        }
    }

    /// The clockwise turn, before any mirroring: 0, 90, 180 or 270.
    var rotation: Int {
        switch self {
        case .identity, .mirror: 0
        case .rotate90, .mirrorRotate90: 90
        case .rotate180, .mirrorRotate180: 180
        case .rotate270, .mirrorRotate270: 270
        }
    }

    var isMirrored: Bool {
        switch self {
        case .mirror, .mirrorRotate90, .mirrorRotate180, .mirrorRotate270: true
        default: false
        }
    }

    /// Whether the picture comes out with width and height exchanged.
    var swapsDimensions: Bool { rotation == 90 || rotation == 270 }

    /// The EXIF orientation tag (GStreamer's image-orientation) that asks a viewer for the same picture.
    /// GStreamer's flip-rotate-N is "mirror left-right, then turn N clockwise", the other order from ours:
    /// turning 90 then mirroring is mirroring then turning 270 (EXIF 5, a transpose), and turning 270 then
    /// mirroring is mirroring then turning 90 (EXIF 7, a transverse). jifmux writes rotate-90 as 6,
    /// flip-rotate-270 as 5 and flip-rotate-90 as 7; Pillow's exif_transpose shows 5 and 7 as a transpose
    /// and a transverse (both checked by OrientationMatrixTests).
    var imageOrientation: String {
        switch self {
        case .identity: "rotate-0"
        case .rotate90: "rotate-90"
        case .rotate180: "rotate-180"
        case .rotate270: "rotate-270"
        case .mirror: "flip-rotate-0"
        case .mirrorRotate90: "flip-rotate-270"
        case .mirrorRotate180: "flip-rotate-180"
        case .mirrorRotate270: "flip-rotate-90"
        }
    }

    /// How a container that carries a turn but no mirror holds this picture: its pixels turned by `pixels`,
    /// then turned `displayRotation` degrees clockwise by the player (an MP4's display matrix; players such
    /// as ffmpeg 5.1 honour a matrix's turn but not every one honours a flip in it, so the flip goes into the
    /// pixels). A left-right mirror shown after a quarter turn is a top-bottom flip of the pixels before it.
    var displayMatrixSplit: (pixels: FrameTransform, displayRotation: Int) {
        guard isMirrored else { return (.identity, rotation) }
        return (swapsDimensions ? .mirrorRotate180 : .mirror, rotation)
    }

    /// An MP4 track header's matrix (ISO/IEC 14496-12 `tkhd`) asking for a clockwise turn of `rotation`
    /// degrees of a `width`x`height` picture: a b u / c d v / x y w, where a–d and x, y are 16.16 fixed point
    /// and u, v, w 2.30, the same matrices ffmpeg writes, so every player reads them alike.
    static func displayMatrix(rotation: Int, width: Int32, height: Int32) -> [Int32] {
        let one: Int32 = 0x10000, w: Int32 = 0x4000_0000
        switch rotation {
        case 90: return [0, one, 0, -one, 0, 0, height << 16, 0, w]
        case 180: return [-one, 0, 0, 0, -one, 0, width << 16, height << 16, w]
        case 270: return [0, -one, 0, one, 0, 0, 0, width << 16, w]
        default: return [one, 0, 0, 0, one, 0, 0, 0, w]
        }
    }
}
