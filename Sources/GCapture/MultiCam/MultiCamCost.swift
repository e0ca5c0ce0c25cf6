import Foundation

/// What a set of cameras streaming at once asks of the machine: `hardwareCost` is the largest share of a USB
/// bus's isochronous bandwidth that the cameras on it reserve (a UVC camera reserves its frames' bandwidth
/// when it starts streaming, and the kernel refuses the one that does not fit: VIDIOC_STREAMON answers
/// ENOSPC); `systemPressureCost` is the share of the machine's processors their frames keep busy.
/// AVFoundation's figures mean the same of a phone's sensors and ISP: over 1.0, the configuration cannot run.
struct MultiCamCost: Sendable, Equatable {
    /// One camera as it will stream.
    struct Camera: Sendable {
        var device: CaptureDevice
        var format: CaptureDevice.Format
        var frameRate: Double
    }

    /// The USB bus a camera is on, as sysfs says.
    struct Bus: Sendable, Hashable {
        var number: Int
        /// The bus's signalling rate in Mbit/s (sysfs `speed`: 12, 480, 5000...).
        var speed: Double

        /// Bytes per second the bus gives periodic (isochronous) transfers that cameras can count on. USB 2.0
        /// high speed: one high-bandwidth isochronous endpoint moves at most 3 × 1024 bytes per 125 µs
        /// microframe, 24.6 MB/s, and in practice that is what a second uncompressed camera on the bus
        /// finds taken; full speed: 1023 bytes per 1 ms frame; SuperSpeed: 48 × 1024 bytes per microframe.
        var isochronousCapacity: Double {
            switch speed {
            case ..<13: 1023 * 1000
            case ..<481: 3 * 1024 * 8000
            default: 48 * 1024 * 8000 * (speed / 5000).rounded(.down)
            }
        }
    }

    /// The bus carrying the most, against its capacity (nil: no camera is on USB).
    var busiest: (bus: Bus, bytesPerSecond: Double, cameras: [CaptureDevice])?
    var hardwareCost: Double
    var systemPressureCost: Double

    static func == (a: MultiCamCost, b: MultiCamCost) -> Bool {
        a.hardwareCost == b.hardwareCost && a.systemPressureCost == b.systemPressureCost
    }

    init(cameras: [Camera], sysfs: String = "/sys", processors: Int = ProcessInfo.processInfo.activeProcessorCount) {
        var load: [Bus: (bytes: Double, cameras: [CaptureDevice])] = [:]
        for camera in cameras {
            guard let bus = Self.usbBus(of: camera.device, sysfs: sysfs) else { continue }
            load[bus, default: (0, [])].bytes += Self.bytesPerSecond(camera.format, frameRate: camera.frameRate)
            load[bus, default: (0, [])].cameras.append(camera.device)
        }
        let worst = load.max { $0.value.bytes / $0.key.isochronousCapacity < $1.value.bytes / $1.key.isochronousCapacity }
        busiest = worst.map { ($0.key, $0.value.bytes, $0.value.cameras) }
        hardwareCost = worst.map { $0.value.bytes / $0.key.isochronousCapacity } ?? 0
        let pixelWork = cameras.reduce(0.0) { sum, camera in
            sum + Double(camera.format.width * camera.format.height) * camera.frameRate
                * (camera.format.isCompressed ? Self.decodeWeight : 1)
        }
        systemPressureCost = pixelWork / (Double(max(processors, 1)) * Self.pixelsPerSecondPerProcessor)
    }

    /// Pixels per second one processor takes through a camera's usual job, a recording: the frames converted
    /// to I420 and encoded by x264enc as the movie output does (veryfast, zerolatency, no B-frames). Measured on
    /// this 2-core class of machine: 300 SMPTE 1080p frames took 4.3 s of CPU beyond the pattern's own 0.7 s
    /// (`gst-launch-1.0 videotestsrc pattern=smpte num-buffers=300 ! video/x-raw,format=YUY2,width=1920,
    /// height=1080 ! videoconvert ! video/x-raw,format=I420 ! x264enc speed-preset=veryfast tune=zerolatency
    /// bframes=0 ! fakesink`), 145 Mpx/s.
    static let pixelsPerSecondPerProcessor = 145_000_000.0
    /// Motion JPEG is decoded first: jpegdec took 0.29 s for 100 such frames, a fifth of the recording's work.
    static let decodeWeight = 1.2

    /// Bytes per second a camera's format moves over the bus. Motion JPEG is estimated at a quarter byte per
    /// pixel (UVC cameras reserve by their largest compressed frame, roughly an eighth of the raw one).
    static func bytesPerSecond(_ format: CaptureDevice.Format, frameRate: Double) -> Double {
        Double(format.width * format.height) * bytesPerPixel(format.pixelFormat) * frameRate
    }

    static func bytesPerPixel(_ pixelFormat: String) -> Double {
        switch pixelFormat {
        case "MJPG": 0.25
        case "NV12", "NV21", "I420", "YV12": 1.5
        case "GRAY8": 1
        case "RGB", "BGR": 3
        case "RGBx", "BGRx", "xRGB", "xBGR", "RGBA", "BGRA", "ARGB", "ABGR": 4
        default: 2  // YUY2, UYVY, YVYU and the other packed 4:2:2 formats cameras send
        }
    }

    /// The USB bus of a V4L2 camera: its sysfs device's nearest ancestor that is a USB device (has `busnum`
    /// and `speed`). nil for a camera that is not on USB (a platform camera, vivid, the test camera).
    static func usbBus(of device: CaptureDevice, sysfs: String) -> Bus? {
        guard let node = device.nodePath else { return nil }
        let resolvedNode = URL(fileURLWithPath: node).resolvingSymlinksInPath().lastPathComponent
        var folder = URL(fileURLWithPath: "\(sysfs)/class/video4linux/\(resolvedNode)/device").resolvingSymlinksInPath()
        while folder.path.count > sysfs.count + 1 {
            if let number = read(folder.appendingPathComponent("busnum")).flatMap(Int.init),
               let speed = read(folder.appendingPathComponent("speed")).flatMap(Double.init) {
                return Bus(number: number, speed: speed)
            }
            folder.deleteLastPathComponent()
        }
        return nil
    }

    private static func read(_ url: URL) -> String? {
        (try? String(contentsOf: url, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Why a configuration over 1.0 cannot run, naming the bus and its cameras and what to do.
    var overageReason: String {
        guard let busiest, hardwareCost > 1 else {
            return String(format: "the cameras' frames need %.0f%% of the processors", systemPressureCost * 100)
        }
        let megabytes = { (bytes: Double) in String(format: "%.1f MB/s", bytes / 1_000_000) }
        return "the cameras on USB bus \(busiest.bus.number) (\(busiest.cameras.map(\.description).joined(separator: ", "))) "
            + "need \(megabytes(busiest.bytesPerSecond)) of its \(megabytes(busiest.bus.isochronousCapacity)) of USB bandwidth; "
            + "choose a smaller size or a lower frame rate, use MJPEG, or plug a camera into another USB bus"
    }
}
