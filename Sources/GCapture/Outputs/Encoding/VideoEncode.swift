import GStreamerKit

/// One H.264 encode of the session's camera: everything that decides the encoded pictures, so that the
/// outputs one encode gives what they ask (`satisfies`: a recording and a stream) can share it
/// (SharedVideoEncoder).
struct VideoEncode: Sendable, Equatable {
    struct Size: Sendable, Equatable {
        var width: Int
        var height: Int
    }

    var encoder: H264Encoder
    var bitRate: Int
    /// Frames from one key frame to the next.
    var keyInterval: Int
    /// The H.264 profile pinned on the encoder's output ("main", "constrained-baseline"): the encoders'
    /// own choice is not always one players take (x264enc picks High 4:4:4 for some inputs).
    var profile: String
    /// The rate the encoder is told, whatever the camera delivers after a switch.
    var frameRate: Int
    /// The size every frame is scaled into (letterboxed), pinned so nothing after the scaler renegotiates
    /// when another camera takes over; nil lets the camera's size through.
    var frameSize: Size?
    /// The raw format given to the encoder.
    var inputFormat: String
    /// The turn done to the pixels before encoding.
    var pixelTransform = FrameTransform.identity

    /// Raw frames an encoder may hold while it catches up (at most 1 s of them), beyond which the oldest
    /// are dropped: the camera runs on and cannot wait. Raw frames are large (1080p NV12 3.1 MB, 2160p
    /// 12.4 MB): a second of them made a 1080p30 recording's peak memory 93 MB higher whenever the encoder
    /// fell behind (180 MiB against gst-launch's 64 on a loaded machine), and a 2160p one's 373 MB. 16 MiB
    /// still absorb a stall of 6 frames (200 ms) at 1080p30, 13 at 720p.
    static let inputQueueBytes = 16 << 20
    static let inputQueueNanoseconds = 1_000_000_000

    /// The `video_in` queue of a branch that takes H.264 from a shared encoder: two seconds of frames, of
    /// which KeyFrameGate lets it fill half, so it never blocks the encoder (measured in buffers: a time
    /// level is unknown until the queue has let a buffer out, and an aggregating muxer downstream may take
    /// none for a second while it waits for the first audio).
    static func encodedInputQueue(frameRate: Int) -> String {
        "queue name=video_in max-size-buffers=\(2 * max(1, frameRate)) max-size-bytes=0 max-size-time=0"
    }

    /// The encoder element's name in `description()`.
    static let encoderName = "video_encoder"

    /// Sets this encode's bit rate and key interval on the encoder of a bin made from `description()`.
    func configureEncoder(in bin: Bin) throws(CaptureError) {
        guard let element = bin.element(named: Self.encoderName) else { return }
        try encoder.configure(element, bitRate: bitRate, keyInterval: keyInterval)
    }

    /// From the `video_in` queue (raw frames in) to h264parse (H.264 out, 4:2:0 at the pinned profile).
    func description() -> String {
        var encoderPart = encoder.description(name: Self.encoderName, bitRate: bitRate, keyInterval: keyInterval)
        // x264 adds a key frame at every scene cut (the test camera's moving picture made one each 0.2 s):
        // HLS segments and a server's GOP cache want them exactly at the interval asked.
        if encoder.factory == "x264enc" { encoderPart += " option-string=scenecut=0" }
        let inputQueue = "queue name=video_in leaky=downstream max-size-buffers=0 max-size-bytes=\(Self.inputQueueBytes) "
            + "max-size-time=\(Self.inputQueueNanoseconds)"
        let turn = pixelTransform == .identity ? "" : "videoflip video-direction=\(pixelTransform.rawValue) ! "
        let format = "format=\(inputFormat)"
        // The same size passes videoscale untouched (passthrough); only another camera's frames are scaled.
        let pinned = frameSize.map { size in
            // Pixels turned a quarter before the scaler are the other way round.
            let (width, height) = pixelTransform.swapsDimensions ? (size.height, size.width) : (size.width, size.height)
            return "videoscale add-borders=true ! video/x-raw,\(format),width=\(width),height=\(height),pixel-aspect-ratio=1/1 "
                + "! capssetter caps=\"video/x-raw,framerate=\(max(1, frameRate))/1\" "
        } ?? "video/x-raw,\(format) "
        return "\(inputQueue) ! \(turn)videoconvert ! \(pinned)! \(encoderPart) ! video/x-h264,profile=\(profile) ! h264parse name=video_parse"
    }

    /// Whether frames encoded for `self` give a consumer asking for `request` everything it asks: the same
    /// pictures at the same rate, key frames where it wants them, its bit rate unless it leaves that to
    /// whoever encodes.
    func satisfies(_ request: VideoEncodeRequest) -> Bool {
        let asked = request.encode
        let keyFrames = request.longestKeyInterval.map { keyInterval <= $0 } ?? (keyInterval > 0 && asked.keyInterval % keyInterval == 0)
        return encoder == asked.encoder && profile == asked.profile && frameRate == asked.frameRate
            && frameSize == asked.frameSize && inputFormat == asked.inputFormat && pixelTransform == asked.pixelTransform
            && (bitRate == asked.bitRate || request.acceptsAnyBitRate) && keyFrames
    }
}

/// What an output asks of a shared encode: the encode it would make itself, and what it lets others decide.
struct VideoEncodeRequest: Sendable, Equatable {
    var encode: VideoEncode
    /// The output's bit rate is a default, not the user's: it takes the rate of an encode already running.
    var acceptsAnyBitRate = false
    /// Key frames at least this often (frames) will do, nil: one at every multiple of the encode's own
    /// interval (a stream's segments and GOPs are cut at its interval; a recording only needs them often).
    var longestKeyInterval: Int?
    /// The encoder is the default pick, not the user's: a hardware one that will not take the settings
    /// may give way to software.
    var mayFallBackToSoftware = true
}
