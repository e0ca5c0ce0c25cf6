import GStreamerKit

/// The encoders and container of a recording, pinned so that nothing renegotiates mid-file.
struct MovieEncoding: Sendable {
    enum Container: String, Sendable { case mp4, matroska }

    var container: Container
    var videoBitRate: Int
    var frameRate: Int
    var fragmentInterval: Double
    var withAudio: Bool
    var videoEncoder: H264Encoder
    /// The connection's clockwise rotation and mirroring.
    var rotation = 0
    var mirrored = false
    /// The camera's raw pixel format ("NV12", "YUY2"...), nil when unknown.
    var cameraPixelFormat: String?
    /// The camera's frame size when the recording began: the movie's for good. A camera switched to during
    /// the recording may deliver another size (and rate); its frames are scaled into this size keeping their
    /// aspect ratio, with black bars where it differs (letterbox), and the rate the encoder is told stays
    /// this one, so nothing after the scaler renegotiates (mp4mux cannot take new caps mid-file).
    var frameSize: (width: Int, height: Int)?

    /// The picture a player is to show, from the connection's rotation and mirroring.
    var transform: FrameTransform { FrameTransform(rotation: rotation, mirrored: mirrored) }

    /// The turn written as the MP4's display matrix (players turn the picture, nothing is re-rendered).
    var displayRotation: Int { container == .mp4 ? transform.displayMatrixSplit.displayRotation : 0 }

    /// The turn done to the pixels before encoding: in an MP4 only the flip that, turned by the display
    /// matrix, shows as the mirror; in Matroska the whole turn (GStreamer 1.22's matroskamux writes no
    /// orientation).
    var pixelTransform: FrameTransform {
        container == .mp4 ? transform.displayMatrixSplit.pixels : transform
    }

    static var aacEncoder: String? {
        ["voaacenc", "avenc_aac", "fdkaacenc"].first(where: GStreamer.hasElement)
    }

    /// Bits per second for a frame size at about 0.13 bit per pixel at 30 fps (1080p: 8 Mbit/s).
    static func defaultBitRate(width: Int, height: Int) -> Int {
        max(1_000_000, width * height * 4)
    }

    /// The raw frames a recording may hold while its encoder catches up (at most 1 s of them), beyond
    /// which the oldest are dropped: the camera runs on and cannot wait. Raw frames are large (1080p NV12
    /// 3.1 MB, 2160p 12.4 MB): a second of them made a 1080p30 recording's peak memory 93 MB higher
    /// whenever the encoder fell behind (180 MiB against gst-launch's 64 on a loaded machine), and a
    /// 2160p one's 373 MB. 16 MiB still absorb a stall of 6 frames (200 ms) at 1080p30, 13 at 720p.
    static let inputQueueBytes = 16 << 20
    /// How long a track's encoded data may wait in front of the muxers for the other track's.
    static let muxQueueNanoseconds: UInt64 = 3_000_000_000

    /// The bin: video (and audio) inputs → encoders → the movie's muxer and a crash-recovery sidecar.
    /// Every encoded buffer passes the sink pad of the tee named `encodedVideo` or `encodedAudio` on its way
    /// to both files: where the recording counts what it writes and enforces its size limit.
    /// A key frame a second: each fragment can start with one, and a cut loses at most a second's frames.
    var keyInterval: Int { max(1, frameRate) }

    static let encodedVideo = "vt"
    static let encodedAudio = "at"

    func description() throws(CaptureError) -> String {
        let encoder = videoEncoder.description(name: "video_encoder", bitRate: videoBitRate, keyInterval: keyInterval)
        let inputQueue = "leaky=downstream max-size-buffers=0 max-size-bytes=\(Self.inputQueueBytes) max-size-time=1000000000"
        // A muxer waits for every track's first data: a fresh PulseAudio source delivers its first buffer up to
        // ~2 s late, and meanwhile the video piles up in front of the muxers. It waits here, encoded (3 s of
        // 1080p: ~3 MB), not as raw frames in the input queue (3 s: 280 MB).
        let muxQueue = "queue max-size-buffers=0 max-size-bytes=0 max-size-time=\(Self.muxQueueNanoseconds)"
        let turn = pixelTransform == .identity ? "" : "videoflip video-direction=\(pixelTransform.rawValue) ! "
        let format = "format=\(videoEncoder.inputFormat(forCameraFormat: cameraPixelFormat))"
        // The same size passes videoscale untouched (passthrough); only another camera's frames are scaled.
        let pinned = frameSize.map { size in
            // Pixels turned a quarter before the scaler (Matroska) are the other way round.
            let quarter = container != .mp4 && (rotation == 90 || rotation == 270)
            let (width, height) = quarter ? (size.height, size.width) : (size.width, size.height)
            return "videoscale add-borders=true ! video/x-raw,\(format),width=\(width),height=\(height),pixel-aspect-ratio=1/1 "
                + "! capssetter caps=\"video/x-raw,framerate=\(max(1, frameRate))/1\" "
        } ?? "video/x-raw,\(format) "
        var parts = [
            "queue name=video_in \(inputQueue) ! \(turn)videoconvert ! \(pinned)! \(encoder) "
                + "! h264parse ! video/x-h264,stream-format=avc,alignment=au ! tee name=vt",
            "vt. ! \(muxQueue) ! mux.video_0",
        ]
        if container == .mp4 { parts.append("vt. ! \(muxQueue) ! sidecar.video_0") }
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
                "at. ! \(muxQueue) ! mux.audio_0",
            ]
            if container == .mp4 { parts.append("at. ! \(muxQueue) ! sidecar.audio_0") }
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
