import GStreamerKit

/// The encoders of a stream, constrained to what servers and players accept: H.264 in 4:2:0 at a fixed
/// profile (x264enc left to itself picks High 4:4:4 10-bit from some inputs, which servers reject), a key
/// frame at a fixed interval, no B-frames, SPS/PPS before every key frame (a player joining mid-stream
/// decodes from the next one), AAC (or Opus where the container carries it) at 48 kHz stereo.
struct StreamEncoding: Sendable {
    var destination: StreamDestination
    var profile: CaptureStreamOutput.Profile
    var videoBitRate: Int
    var audioBitRate: Int
    var audioCodec: CaptureStreamOutput.AudioCodec = .aac
    var frameRate: Int
    /// Seconds between key frames.
    var keyFrameInterval: Double
    var withAudio: Bool
    var videoEncoder: H264Encoder
    var cameraPixelFormat: String?
    /// The camera's frame size when the stream began: the stream's for good (see VideoEncode.frameSize).
    var frameSize: VideoEncode.Size?
    /// The bit rate is the default one, not the user's: the stream carries an encode already running
    /// (a recording's) at whatever rate it has.
    var bitRateIsDefault = true
    var videoEncoderIsDefault = true

    var keyInterval: Int { max(1, Int((Double(frameRate) * keyFrameInterval).rounded())) }

    /// The stream's video comes from the session's shared H.264 encoder: the one a recording of the same
    /// session uses where it gives what the stream asks (see VideoEncode.satisfies), else its own.
    var videoEncodeRequest: VideoEncodeRequest {
        let encode = VideoEncode(encoder: videoEncoder, bitRate: videoBitRate, keyInterval: keyInterval, profile: profile.rawValue,
                                 frameRate: frameRate, frameSize: frameSize,
                                 inputFormat: videoEncoder.inputFormat(forCameraFormat: cameraPixelFormat))
        return VideoEncodeRequest(encode: encode, acceptsAnyBitRate: bitRateIsDefault, mayFallBackToSoftware: videoEncoderIsDefault)
    }

    static let encodedVideo = "vparse"
    static let encodedAudio = "aparse"

    func description() throws(CaptureError) -> String {
        // Raw audio queues only briefly: a stream that falls behind must drop, not lag further and further.
        let inputQueue = "leaky=downstream max-size-buffers=0 max-size-bytes=\(VideoEncode.inputQueueBytes) max-size-time=500000000"
        let (sink, videoPad, audioPad) = destination.sinkDescription(hlsSegmentSeconds: max(1, Int(keyFrameInterval.rounded(.up))),
                                                                     hlsPlaylistLength: 5)
        // H.264 from the shared encoder, queued only until the stream falls behind (KeyFrameGate: then it
        // skips to the next key frame); SPS/PPS before every key frame for players joining mid-stream.
        var parts = [
            "\(VideoEncode.encodedInputQueue(frameRate: frameRate)) ! h264parse name=\(Self.encodedVideo) config-interval=-1 "
                + "! queue max-size-buffers=0 max-size-bytes=0 max-size-time=2000000000 ! \(videoPad)",
            sink,
        ]
        if withAudio {
            let encoder: String
            switch audioCodec {
            case .aac:
                guard let aac = MovieEncoding.aacEncoder else { throw .missingPackage(element: "voaacenc", package: ElementPackages.package(providing: "voaacenc")!) }
                encoder = "\(aac) bitrate=\(audioBitRate) ! aacparse name=\(Self.encodedAudio)"
            case .opus:
                encoder = "opusenc bitrate=\(audioBitRate) ! opusparse name=\(Self.encodedAudio)"
            }
            parts.append("queue name=audio_in \(inputQueue) ! \(MovieEncoding.encoderInput) "
                         + "! \(encoder) ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=2000000000 ! \(audioPad)")
        }
        return parts.joined(separator: "  ")
    }
}
