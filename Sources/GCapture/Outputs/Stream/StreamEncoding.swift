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

    var keyInterval: Int { max(1, Int((Double(frameRate) * keyFrameInterval).rounded())) }

    static let encodedVideo = "vparse"
    static let encodedAudio = "aparse"

    func description() throws(CaptureError) -> String {
        var encoder = videoEncoder.description(name: "video_encoder", bitRate: videoBitRate, keyInterval: keyInterval)
        // x264 adds a key frame at every scene cut (the test camera's moving picture made one each 0.2 s):
        // HLS segments and a server's GOP cache want them exactly at the interval asked.
        if videoEncoder.factory == "x264enc" { encoder += " option-string=scenecut=0" }
        // Raw frames queue only briefly: a stream that falls behind must drop, not lag further and further.
        let inputQueue = "leaky=downstream max-size-buffers=0 max-size-bytes=\(MovieEncoding.inputQueueBytes) max-size-time=500000000"
        let (sink, videoPad, audioPad) = destination.sinkDescription(hlsSegmentSeconds: max(1, Int(keyFrameInterval.rounded(.up))),
                                                                     hlsPlaylistLength: 5)
        // Raw 4:2:0 in (I420 or the camera's NV12), the profile pinned on the encoder's output.
        var parts = [
            "queue name=video_in \(inputQueue) ! videoconvert ! video/x-raw,format=\(videoEncoder.inputFormat(forCameraFormat: cameraPixelFormat)) "
                + "! \(encoder) ! video/x-h264,profile=\(profile.rawValue) ! h264parse name=\(Self.encodedVideo) config-interval=-1 "
                + "! queue max-size-buffers=0 max-size-bytes=0 max-size-time=2000000000 ! \(videoPad)",
            sink,
        ]
        if withAudio {
            let encoder: String
            switch audioCodec {
            case .aac:
                guard let aac = MovieEncoding.aacEncoder else { throw .missingPackage(element: "voaacenc", package: "gstreamer1.0-plugins-bad") }
                encoder = "\(aac) bitrate=\(audioBitRate) ! aacparse name=\(Self.encodedAudio)"
            case .opus:
                encoder = "opusenc bitrate=\(audioBitRate) ! opusparse name=\(Self.encodedAudio)"
            }
            parts.append("queue name=audio_in \(inputQueue) ! audioconvert ! audioresample ! audio/x-raw,rate=48000,channels=2 "
                         + "! \(encoder) ! queue max-size-buffers=0 max-size-bytes=0 max-size-time=2000000000 ! \(audioPad)")
        }
        return parts.joined(separator: "  ")
    }
}
