import GStreamerKit

/// An H.264 encoder element and how to give it the recording's rate control. Hardware encoders come first:
/// GStreamer registers them only where the device exists (VA-API on Intel and AMD, NVENC, Quick Sync, a
/// V4L2 memory-to-memory encoder on boards like the Raspberry Pi), so their presence means they can run.
struct H264Encoder: Sendable, Equatable {
    let factory: String

    static let hardware = ["vah264enc", "vaapih264enc", "nvh264enc", "qsvh264enc", "v4l2h264enc"]
    static let software = ["x264enc", "openh264enc"]

    var isHardware: Bool { Self.hardware.contains(factory) }

    /// The encoder to use: `requested` when given (it must exist), else the first installed of the lists.
    static func choose(_ requested: String? = nil, isInstalled: (String) -> Bool = GStreamer.hasElement) throws(CaptureError) -> H264Encoder {
        if let requested {
            guard isInstalled(requested) else { throw .missingPlugin(requested) }
            return H264Encoder(factory: requested)
        }
        guard let factory = (hardware + software).first(where: isInstalled) else {
            throw .missingPlugin("an H.264 encoder (\((hardware + software).joined(separator: ", ")))")
        }
        return H264Encoder(factory: factory)
    }

    /// What `build` makes with this encoder; when that fails and the encoder is a hardware one the user did
    /// not ask for (`mayFallBack`), what it makes with the first software encoder, rather than failing.
    func withSoftwareFallback<T>(_ mayFallBack: Bool, _ build: (H264Encoder) throws -> T) throws(CaptureError) -> (T, H264Encoder) {
        do {
            do {
                return (try build(self), self)
            } catch {
                guard mayFallBack, isHardware, let software = Self.software.first(where: GStreamer.hasElement) else { throw error }
                let fallback = H264Encoder(factory: software)
                return (try build(fallback), fallback)
            }
        } catch let error as CaptureError {
            throw error
        } catch {
            throw .configurationFailed(reason: "cannot set up the H.264 encoder \(factory)", underlying: error as? GStreamerError)
        }
    }

    /// The raw format the encoder is given: the camera's own where the encoder takes it as it is, so
    /// videoconvert passes frames through untouched (converting 1080p30 NV12 to I420 cost ~6% of a
    /// recording's CPU); x264enc encodes NV12 and I420 alike, the hardware encoders all take NV12.
    func inputFormat(forCameraFormat camera: String?) -> String {
        switch factory {
        case "x264enc": if let camera, ["NV12", "I420"].contains(camera) { camera } else { "I420" }
        case "openh264enc": "I420"
        default: "NV12"
        }
    }

    /// The software encoders' settings are known and fixed in the description; the hardware ones are set
    /// after creation (`configure`), by whichever property names the element has.
    func description(name: String, bitRate: Int, keyInterval: Int) -> String {
        switch factory {
        case "x264enc":
            // veryfast keeps 1080p30 at 3.5x real time on one core; zerolatency keeps frames from queuing
            // inside the encoder, so a stop or a crash loses none of them.
            "x264enc name=\(name) speed-preset=veryfast tune=zerolatency bitrate=\(bitRate / 1000) key-int-max=\(keyInterval) bframes=0"
        case "openh264enc":
            "openh264enc name=\(name) bitrate=\(bitRate) gop-size=\(keyInterval) rate-control=bitrate"
        default:
            "\(factory) name=\(name)"
        }
    }

    /// Constant bit rate, a key frame every `keyInterval` frames and no B-frames, through the properties
    /// the element really has (names differ between the hardware plugins).
    func configure(_ element: Element, bitRate: Int, keyInterval: Int) throws(CaptureError) {
        guard isHardware else { return }
        do {
            if factory == "v4l2h264enc" {
                try element.set("extra-controls", "controls,video_bitrate=\(bitRate),h264_i_frame_period=\(keyInterval)")
                return
            }
            guard try Self.setFirst(of: ["bitrate"], on: element, to: bitRate / 1000) else {
                throw CaptureError.configurationFailed(reason: "\(factory) has no bitrate property", underlying: nil)
            }
            _ = try Self.setFirst(of: ["key-int-max", "gop-size", "keyframe-period"], on: element, to: keyInterval)
            _ = try Self.setFirst(of: ["rate-control", "rc-mode"], on: element, to: "cbr")
            _ = try Self.setFirst(of: ["b-frames", "bframes", "max-bframes"], on: element, to: 0)
            _ = try Self.setFirst(of: ["zerolatency"], on: element, to: true)
        } catch let error as CaptureError {
            throw error
        } catch {
            throw .configurationFailed(reason: "cannot set up \(factory)", underlying: error as? GStreamerError)
        }
    }

    private static func setFirst(of names: [String], on element: Element, to value: some CustomStringConvertible) throws -> Bool {
        guard let name = names.first(where: element.hasProperty) else { return false }
        try element.set(name, value)
        return true
    }
}
