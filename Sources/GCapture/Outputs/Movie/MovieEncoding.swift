import GStreamerKit

/// The encoders and container of a recording, pinned so that nothing renegotiates mid-file.
struct MovieEncoding: Sendable {
    enum Container: String, Sendable { case mp4, matroska }

    var container: Container
    var videoBitRate: Int
    var frameRate: Int
    var fragmentInterval: Double
    var withAudio: Bool
    /// The connection's clockwise rotation and mirroring.
    var rotation = 0
    var mirrored = false

    /// The turn written as the MP4's display matrix (players turn the picture, nothing is re-rendered).
    var displayRotation: Int { container == .mp4 ? rotation : 0 }

    /// The turn done to the pixels before encoding: mirroring always, rotation where the container
    /// cannot carry it (GStreamer 1.22's matroskamux writes no orientation).
    var pixelTransform: FrameTransform {
        FrameTransform(rotation: container == .mp4 ? 0 : rotation, mirrored: mirrored)
    }

    /// H.264 encoder: x264 (fast, explicit rate control), else openh264.
    static var videoEncoder: String? {
        if GStreamer.hasElement("x264enc") { return "x264enc" }
        if GStreamer.hasElement("openh264enc") { return "openh264enc" }
        return nil
    }

    static var aacEncoder: String? {
        ["voaacenc", "avenc_aac", "fdkaacenc"].first(where: GStreamer.hasElement)
    }

    /// Bits per second for a frame size at about 0.13 bit per pixel at 30 fps (1080p: 8 Mbit/s).
    static func defaultBitRate(width: Int, height: Int) -> Int {
        max(1_000_000, width * height * 4)
    }

    /// The bin: video (and audio) inputs → encoders → the movie's muxer and a crash-recovery sidecar.
    func description() throws(CaptureError) -> String {
        guard let video = Self.videoEncoder else { throw .missingPlugin("x264enc or openh264enc") }
        let keyInterval = max(1, frameRate)
        let videoEncoder = video == "x264enc"
            ? "x264enc speed-preset=veryfast tune=zerolatency bitrate=\(videoBitRate / 1000) key-int-max=\(keyInterval) bframes=0"
            : "openh264enc bitrate=\(videoBitRate) gop-size=\(keyInterval) rate-control=bitrate"
        let inputQueue = "leaky=downstream max-size-buffers=0 max-size-bytes=0 max-size-time=1000000000"
        let turn = pixelTransform == .identity ? "" : "videoflip video-direction=\(pixelTransform.rawValue) ! "
        var parts = [
            "queue name=video_in \(inputQueue) ! \(turn)videoconvert ! video/x-raw,format=I420 ! \(videoEncoder) "
                + "! h264parse ! video/x-h264,stream-format=avc,alignment=au ! tee name=vt",
            "vt. ! queue ! mux.video_0",
        ]
        if container == .mp4 { parts.append("vt. ! queue ! sidecar.video_0") }
        if withAudio {
            let audioEncoder: String
            switch container {
            case .mp4:
                guard let aac = Self.aacEncoder else { throw .missingPlugin("voaacenc or avenc_aac") }
                audioEncoder = "\(aac) bitrate=128000 ! aacparse"
            case .matroska:
                audioEncoder = "opusenc bitrate=128000"
            }
            parts += [
                "queue name=audio_in \(inputQueue) ! audioconvert ! audioresample "
                    + "! audio/x-raw,rate=48000,channels=2 ! \(audioEncoder) ! tee name=at",
                "at. ! queue ! mux.audio_0",
            ]
            if container == .mp4 { parts.append("at. ! queue ! sidecar.audio_0") }
        }
        let muxer = container == .mp4
            ? "mp4mux name=mux fragment-duration=\(Int(fragmentInterval * 1000))"
            : "matroskamux name=mux"
        parts.append("\(muxer) ! filesink name=file async=false")
        // Fragmented MP4 loses the fragment being written when the process dies; Matroska streams every
        // frame to disk, so a sidecar of the same encoded data recovers all but the last few milliseconds.
        if container == .mp4 { parts.append("matroskamux name=sidecar ! filesink name=sidecar_file async=false") }
        return parts.joined(separator: "  ")
    }
}
