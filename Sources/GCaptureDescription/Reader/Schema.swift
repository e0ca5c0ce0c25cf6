import Foundation
import Yams

/// The keys each mapping of a description may hold, by dotted path. The reader reports any other key at
/// its own position, with the nearest allowed one; the reference page (docs/description-files.md) lists
/// the same keys.
enum Schema {
    static let keys: [String: [String]] = [
        "": ["version", "camera", "microphone", "rotation", "mirror", "outputs", "filters", "web", "cameras"],
        "camera": ["id", "position", "preset", "mount", "source", "pattern", "noise"],
        "outputs": ["preview", "photo", "movie", "frames", "stream", "timelapse", "motion"],
        "outputs.motion": ["zones", "masks", "sensitivity", "minimum-area", "triggers"],
        "outputs.preview": ["sink", "gravity", "fullscreen", "mirror"],
        "outputs.photo": ["quality", "zero-shutter-lag", "deferred", "folder", "name", "exif-orientation", "album"],
        "outputs.movie": ["audio", "format", "fragment-interval", "pre-roll", "post-roll", "event-gap", "trigger-every", "max-duration", "max-size", "min-free-disk",
                          "encoder", "bit-rate", "folder", "name"],
        "outputs.frames": ["format", "width", "height", "discard-late"],
        "outputs.stream": ["url", "bit-rate", "key-interval", "profile", "encoder", "audio-codec"],
        "outputs.timelapse": ["interval", "frame-rate", "max-duration", "folder", "name"],
        "web": ["tls-cert", "tls-key"],
    ]

    /// An entry of `cameras:`. Kept out of `keys`, whose "belongs under" hints would otherwise name it for
    /// every key an output also has (`name`).
    static let cameraEntryKeys = ["name", "camera", "rotation", "mirror", "outputs"]
    /// The top-level keys every camera of a `cameras:` file shares.
    static let sharedKeys = ["version", "microphone", "filters", "web"]
    /// The top-level keys a `cameras:` file gives in each entry instead.
    static let perCameraKeys = ["camera", "outputs", "rotation", "mirror"]
    /// As many cameras as the engine has been run with at once (the four-camera start in README).
    static let maxCameras = 4

    /// CaptureSession.Preset's names (a test keeps the two lists equal).
    static let presets = ["photo", "high", "medium", "low", "vga640x480", "hd1280x720", "hd1920x1080",
                          "hd4K3840x2160", "inputPriority"]
    static let positions = ["unspecified", "front", "back"]
    static let qualities = ["speed", "balanced", "quality"]
    static let movieFormats = ["mp4", "matroska"]
    /// TestCameraOptions.Pattern's names.
    static let patterns = ["smpte", "ball", "gradient", "checkers-8", "black", "white", "snow"]
    static let rawFormats = ["NV12", "I420", "YV12", "NV21", "YUY2", "UYVY", "RGBx", "BGRx", "xRGB", "xBGR",
                             "RGBA", "BGRA", "RGB", "BGR", "GRAY8"]
    static let quarterTurns = [0, 90, 180, 270]
    /// CapturePreviewOutput.VideoGravity's names, spelled as keys are.
    static let gravities = ["resize-aspect", "resize-aspect-fill", "resize"]
    static let previewMirroring = ["auto", "on", "off"]
    /// CaptureStreamOutput.Profile's names (a test keeps the two lists equal).
    static let streamProfiles = ["main", "constrained-baseline"]
    /// CaptureStreamOutput.AudioCodec's names.
    static let streamAudioCodecs = ["aac", "opus"]

    /// The mappings that hold a key, for "belongs under" hints when a key is at the wrong level.
    static func parents(of key: String) -> [String] {
        keys.filter { $0.value.contains(key) }.map(\.key).sorted()
    }
}
