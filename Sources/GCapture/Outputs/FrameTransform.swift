/// How a captured picture is turned for display, from the connection's rotation and mirroring. The raw
/// values are videoflip's video-direction nicks, for turning pixels; `imageOrientation` asks a viewer instead.
enum FrameTransform: String, Sendable {
    case identity, rotate90 = "90r", rotate180 = "180", rotate270 = "90l"
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

    /// The EXIF orientation tag (GStreamer's image-orientation) that asks a viewer for the same turn.
    var imageOrientation: String {
        switch self {
        case .identity: "rotate-0"
        case .rotate90: "rotate-90"
        case .rotate180: "rotate-180"
        case .rotate270: "rotate-270"
        case .mirror: "flip-rotate-0"
        case .mirrorRotate90: "flip-rotate-90"
        case .mirrorRotate180: "flip-rotate-180"
        case .mirrorRotate270: "flip-rotate-270"
        }
    }
}
