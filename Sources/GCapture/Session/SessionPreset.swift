import Foundation
import GStreamerKit

extension CaptureSession {
    /// Quality levels, as AVCaptureSession.Preset. Fixed-size presets need exactly that size from the camera.
    public enum Preset: String, Sendable, Codable, CaseIterable {
        /// The camera's largest size.
        case photo
        /// The largest size up to 1920x1080 that keeps a fluid frame rate.
        case high
        /// Around 640x480.
        case medium
        /// Around 320x240.
        case low
        case vga640x480
        case hd1280x720
        case hd1920x1080
        case hd4K3840x2160
        /// The camera's first (default) format; no size constraint.
        case inputPriority

        var requiredSize: (width: Int, height: Int)? {
            switch self {
            case .vga640x480: (640, 480)
            case .hd1280x720: (1280, 720)
            case .hd1920x1080: (1920, 1080)
            case .hd4K3840x2160: (3840, 2160)
            default: nil
            }
        }
    }
}

/// The format and rate a session asks its camera for.
struct FormatSelection: Sendable, Equatable {
    var format: CaptureDevice.Format
    var frameRate: Fraction

    /// Caps for the source's output, pinned completely so nothing downstream renegotiates.
    var caps: String {
        let size = "width=\(format.width),height=\(format.height),framerate=\(frameRate)"
        return format.isCompressed ? "image/jpeg,\(size)" : "video/x-raw,format=\(format.pixelFormat),\(size)"
    }
}

/// Chooses a camera format for a preset from the formats the device really offers.
enum FormatSelector {
    static let preferredFrameRate = Fraction(30, 1)
    /// Raw formats in order of preference: what the video encoders and the photo encoder (libjpeg) take
    /// without conversion first.
    static let rawPreference = ["NV12", "I420", "YUY2", "UYVY", "YV12", "NV21", "RGBx", "BGRx", "RGB", "BGR"]

    static func select(_ preset: CaptureSession.Preset, from formats: [CaptureDevice.Format],
                       deviceName: String) throws(CaptureError) -> FormatSelection {
        let usable = formats.filter { $0.isCompressed || rawPreference.contains($0.pixelFormat) }
        guard !usable.isEmpty else {
            throw .presetUnsupported(preset: preset, device: deviceName, offered: offeredDescription(formats),
                                     needs: "a raw YUV/RGB or MJPEG format")
        }
        let candidates: [CaptureDevice.Format]
        switch preset {
        case .inputPriority:
            candidates = [usable[0]]
        case .vga640x480, .hd1280x720, .hd1920x1080, .hd4K3840x2160:
            let size = preset.requiredSize!
            candidates = usable.filter { $0.width == size.width && $0.height == size.height }
            guard !candidates.isEmpty else {
                throw .presetUnsupported(preset: preset, device: deviceName, offered: offeredDescription(usable),
                                         needs: "\(size.width)x\(size.height)")
            }
        case .photo:
            candidates = sized(usable, closestTo: usable.map(area).max() ?? 0)
        case .high:
            let fluid = usable.filter { $0.height <= 1080 && $0.maxFrameRate >= 24 }
            let pool = fluid.isEmpty ? usable.filter { $0.height <= 1080 } : fluid
            let from = pool.isEmpty ? usable : pool
            candidates = sized(from, closestTo: from.map(area).max() ?? 0)
        case .medium:
            candidates = sized(usable, closestTo: 640 * 480)
        case .low:
            candidates = sized(usable, closestTo: 320 * 240)
        }
        return best(of: candidates)
    }

    private static func area(_ format: CaptureDevice.Format) -> Int { format.width * format.height }

    /// Formats of the one size whose area is nearest `target` (in ratio, so 480p is nearer 720p than 240p).
    private static func sized(_ formats: [CaptureDevice.Format], closestTo target: Int) -> [CaptureDevice.Format] {
        func distance(_ f: CaptureDevice.Format) -> Double { abs(log2(Double(area(f))) - log2(Double(max(target, 1)))) }
        guard let nearest = formats.min(by: { distance($0) < distance($1) }) else { return [] }
        return formats.filter { $0.width == nearest.width && $0.height == nearest.height }
    }

    /// Picks the rate nearest 30 fps (without going over when 30 is not offered), then the best pixel format
    /// reaching it: raw before MJPEG, in `rawPreference` order.
    private static func best(of formats: [CaptureDevice.Format]) -> FormatSelection {
        let options = formats.map { format in (format, rate(for: format)) }
        let chosen = options.max { a, b in
            let scoreA = score(a.0, a.1), scoreB = score(b.0, b.1)
            return scoreA.lexicographicallyPrecedes(scoreB)
        }!
        return FormatSelection(format: chosen.0, frameRate: chosen.1)
    }

    private static func score(_ format: CaptureDevice.Format, _ rate: Fraction) -> [Double] {
        let cappedRate = min(rate.doubleValue, preferredFrameRate.doubleValue)
        let preference = rawPreference.firstIndex(of: format.pixelFormat).map { Double(rawPreference.count - $0) } ?? 0
        return [cappedRate, format.isCompressed ? 0 : 1, preference]
    }

    static func rate(for format: CaptureDevice.Format) -> Fraction {
        let ranges = format.videoSupportedFrameRateRanges
        if ranges.contains(where: { $0.minimum <= preferredFrameRate && preferredFrameRate <= $0.maximum }) {
            return preferredFrameRate
        }
        let below = ranges.map(\.maximum).filter { $0 < preferredFrameRate }.max()
        return below ?? ranges.map(\.minimum).min() ?? preferredFrameRate
    }

    static func offeredDescription(_ formats: [CaptureDevice.Format]) -> String {
        var sizes: [String] = []
        var pixelFormats: [String] = []
        for format in formats.sorted(by: { area($0) < area($1) }) {
            if !sizes.contains(format.dimensionsDescription) { sizes.append(format.dimensionsDescription) }
            if !pixelFormats.contains(format.pixelFormat) { pixelFormats.append(format.pixelFormat) }
        }
        let shownFormats = pixelFormats.prefix(6).joined(separator: ", ") + (pixelFormats.count > 6 ? ", ..." : "")
        return sizes.joined(separator: ", ") + " (\(shownFormats))"
    }
}
