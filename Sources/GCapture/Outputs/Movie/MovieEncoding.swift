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

    /// The video comes from the session's shared encoder (SharedVideoEncoder) rather than one of its own.
    var sharesEncoder = false
    /// The video (H.264) and the audio (AAC, whatever the container) come from a PreRollRing, pushed into
    /// appsrcs at the bin's head, rather than from the session's tees.
    var fedByPreRoll = false {
        didSet { if fedByPreRoll { sharesEncoder = true } }
    }

    /// One frame kept every so often, played at its own rate, without audio (nil: every frame, as captured).
    /// Always encoded by the recording's own encoder: the frames it drops never reach one.
    var timelapse: Timelapse?

    /// The appsrcs a bin fed by a pre-roll ring starts with.
    static let videoSource = "video_src", audioSource = "audio_src"

    /// This encoding completed from the session: the camera's format and rate, the connection's turn, a
    /// bit rate for the frame size when none is set (then `bitRateIsDefault`), audio when there is a source.
    func completed(for output: CaptureMovieFileOutput, in graph: any OutputGraph) -> (MovieEncoding, bitRateIsDefault: Bool) {
        var encoding = self
        let selection = graph.videoSelection
        encoding.withAudio = graph.hasSource(.audio)
        encoding.frameRate = Int((selection?.frameRate.doubleValue ?? 30).rounded())
        encoding.rotation = Int(output.connection.videoRotationAngle)
        encoding.mirrored = output.connection.mirrorsCapturedFrames
        if let timelapse = encoding.timelapse {
            encoding.withAudio = false
            encoding.frameRate = timelapse.frameRate
        }
        encoding.cameraPixelFormat = selection?.format.pixelFormat
        encoding.frameSize = selection.map { ($0.format.width, $0.format.height) }
        let bitRateIsDefault = encoding.videoBitRate == 0
        if bitRateIsDefault {
            encoding.videoBitRate = Self.defaultBitRate(width: selection?.format.width ?? 1280, height: selection?.format.height ?? 720)
        }
        return (encoding, bitRateIsDefault)
    }

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

    /// What every audio encoder of a recording or a stream is given: the session's audio as 48 kHz stereo.
    static let encoderInput = "audioconvert ! audioresample ! audio/x-raw,rate=48000,channels=2"

    /// Raw audio in, parsed AAC out: an MP4's audio, and what a pre-roll ring keeps of the session's.
    static func aacEncode() throws(CaptureError) -> String {
        guard let aac = aacEncoder else { throw .missingPlugin("voaacenc or avenc_aac") }
        return "\(encoderInput) ! \(aac) bitrate=128000 ! aacparse"
    }

    /// Bits per second for a frame size at about 0.13 bit per pixel at 30 fps (1080p: 8 Mbit/s).
    static func defaultBitRate(width: Int, height: Int) -> Int {
        max(1_000_000, width * height * 4)
    }

    /// How long a track's encoded data may wait in front of the muxers for the other track's.
    static let muxQueueNanoseconds: UInt64 = 3_000_000_000

    /// The bin: video (and audio) inputs → encoders → the movie's muxer and a crash-recovery sidecar.
    /// Every encoded buffer passes the sink pad of the tee named `encodedVideo` or `encodedAudio` on its way
    /// to both files: where the recording counts what it writes and enforces its size limit.
    /// A key frame a second: each fragment can start with one, and a cut loses at most a second's frames.
    /// A timelapse's frames are far apart in time and little alike: each is a key frame, so a fragment
    /// can end after any of them and a crash costs the sidecar at most the one being written.
    var keyInterval: Int { timelapse == nil ? max(1, frameRate) : 1 }

    /// The muxer's fragment, in the movie's time (see Timelapse.fragmentDuration), nanoseconds.
    var muxFragmentDuration: UInt64 {
        timelapse?.fragmentDuration(holdingCaptureOf: fragmentInterval) ?? UInt64((fragmentInterval * 1e9).rounded())
    }

    /// The H.264 the recording's video is: Main profile, the profile streams are pinned to by default, so
    /// that a stream of the same session can carry the recording's encode.
    var videoEncode: VideoEncode {
        VideoEncode(encoder: videoEncoder, bitRate: videoBitRate, keyInterval: keyInterval, profile: "main", frameRate: frameRate,
                    frameSize: frameSize.map { VideoEncode.Size(width: $0.width, height: $0.height) },
                    inputFormat: videoEncoder.inputFormat(forCameraFormat: cameraPixelFormat), pixelTransform: pixelTransform)
    }

    /// The longest key interval a recording takes from an encode it joins (a stream's, every 2 s by
    /// default): its fragments begin at key frames, so a crash may cost that much of the fragmented file
    /// (the sidecar still recovers it).
    var longestSharedKeyInterval: Int { 2 * max(1, frameRate) }

    /// Whether the recording can take its video from an encoder it shares: not when its pixels are turned
    /// (no one else wants them so), nor when it must tell the session's filler frames from the camera's
    /// (`dropsFillerFrames`: the mark of a filler frame does not survive the encoder).
    func canShareEncoder(dropsFillerFrames: Bool) -> Bool { pixelTransform == .identity && !dropsFillerFrames && timelapse == nil }

    static let encodedVideo = "vt"
    static let encodedAudio = "at"

    func description() throws(CaptureError) -> String {
        let inputQueue = "leaky=downstream max-size-buffers=0 max-size-bytes=\(VideoEncode.inputQueueBytes) max-size-time=1000000000"
        // A muxer waits for every track's first data: a fresh PulseAudio source delivers its first buffer up to
        // ~2 s late, and meanwhile the video piles up in front of the muxers. It waits here, encoded (3 s of
        // 1080p: ~3 MB), not as raw frames in the input queue (3 s: 280 MB).
        let muxQueue = "queue max-size-buffers=0 max-size-bytes=0 max-size-time=\(Self.muxQueueNanoseconds)"
        // Encoded frames from a shared encoder queue here only until the branch falls behind (KeyFrameGate).
        // From a pre-roll ring, seconds of frames arrive at once: the appsrc holds them (unbounded: the feed
        // bounds it) and its own thread pushes them on, so no queue follows it (one thread hop less a buffer).
        let ringSource = "format=time is-live=true max-bytes=0 block=false"
        let video = fedByPreRoll
            ? "appsrc name=\(Self.videoSource) \(ringSource) ! h264parse"
            : sharesEncoder
            ? "\(VideoEncode.encodedInputQueue(frameRate: frameRate)) ! h264parse"
            : videoEncode.description()
        var parts = [
            "\(video) ! video/x-h264,stream-format=avc,alignment=au ! tee name=vt",
            "vt. ! \(muxQueue) ! mux.video_0",
        ]
        if container == .mp4 { parts.append("vt. ! \(muxQueue) ! sidecar.video_0") }
        if withAudio {
            let audio = fedByPreRoll
                ? "appsrc name=\(Self.audioSource) \(ringSource) ! aacparse"
                : "queue name=audio_in \(inputQueue) ! " + (container == .mp4 ? try Self.aacEncode()
                    : "\(Self.encoderInput) ! opusenc bitrate=128000")
            parts += [
                "\(audio) ! tee name=at",
                "at. ! \(muxQueue) ! mux.audio_0",
            ]
            if container == .mp4 { parts.append("at. ! \(muxQueue) ! sidecar.audio_0") }
        }
        let muxer = container == .mp4
            ? "mp4mux name=mux fragment-duration=\(max(1, muxFragmentDuration / 1_000_000))"
            : "matroskamux name=mux"
        // Unbuffered, both files: what the muxers have written is on disk, so a kill cuts the movie only
        // inside a fragment being written then (filesink's own 64 KiB buffer left the last fragment
        // incomplete on disk between fragments too, and ffmpeg reported the killed file partial), and
        // costs the sidecar only the frames in flight.
        parts.append("\(muxer) ! filesink name=file async=false buffer-mode=unbuffered")
        // Fragmented MP4 loses the fragment being written when the process dies; Matroska streams every
        // frame to disk, so a sidecar of the same encoded data recovers all but the last few milliseconds.
        if container == .mp4 { parts.append("matroskamux name=sidecar ! filesink name=sidecar_file async=false buffer-mode=unbuffered") }
        return parts.joined(separator: "  ")
    }
}
