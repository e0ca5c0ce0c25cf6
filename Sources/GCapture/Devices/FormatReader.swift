import GStreamerKit

/// Turns the caps a device advertises into formats a user can choose from.
enum FormatReader {
    /// Sizes offered when a device accepts a continuous range (pipewire, vivid's HDMI input).
    static let standardSizes = [(320, 240), (640, 480), (1280, 720), (1920, 1080), (3840, 2160)]

    static func formats(from caps: Caps) -> [CaptureDevice.Format] {
        var formats: [CaptureDevice.Format] = []
        for structure in caps.structures {
            if let features = structure.features, features != "memory:SystemMemory" { continue }
            let pixelFormats: [String]
            switch structure.name {
            case "video/x-raw":
                pixelFormats = structure["format"]?.alternatives.compactMap {
                    if case .string(let name) = $0 { return name } else { return nil }
                } ?? []
            case "image/jpeg":
                pixelFormats = ["MJPG"]
            default:
                continue
            }
            let rates = frameRateRanges(structure["framerate"])
            guard !rates.isEmpty else { continue }
            for (width, height) in sizes(structure["width"], structure["height"]) {
                for pixelFormat in pixelFormats {
                    let format = CaptureDevice.Format(pixelFormat: pixelFormat, width: width, height: height,
                                                      videoSupportedFrameRateRanges: rates)
                    if !formats.contains(format) { formats.append(format) }
                }
            }
        }
        return formats
    }

    /// Infrared and depth nodes advertise only grey formats; they are not cameras a user means.
    static func isGreyOnly(_ formats: [CaptureDevice.Format]) -> Bool {
        !formats.isEmpty && formats.allSatisfy { $0.pixelFormat.hasPrefix("GRAY") || $0.pixelFormat.hasPrefix("Y1") }
    }

    private static func sizes(_ width: CapsValue?, _ height: CapsValue?) -> [(Int, Int)] {
        guard let width, let height else { return [] }
        switch (width, height) {
        case (.int(let w), .int(let h)):
            return [(w, h)]
        default:
            let widths = range(width), heights = range(height)
            guard let widths, let heights else { return [] }
            var result = standardSizes.filter { widths.contains($0.0) && heights.contains($0.1) }
            if !result.contains(where: { $0 == (widths.upperBound, heights.upperBound) }),
               widths.upperBound <= 7680, heights.upperBound <= 4320 {
                result.append((widths.upperBound, heights.upperBound))
            }
            return result
        }
    }

    private static func range(_ value: CapsValue) -> ClosedRange<Int>? {
        switch value {
        case .int(let v): v...v
        case .intRange(let r): r
        default: nil
        }
    }

    private static func frameRateRanges(_ value: CapsValue?) -> [CaptureDevice.FrameRateRange] {
        guard let value else { return [] }
        var ranges: [CaptureDevice.FrameRateRange] = []
        for alternative in value.alternatives {
            switch alternative {
            case .fraction(let f) where f.numerator > 0:
                ranges.append(.init(f, f))
            case .fractionRange(let r):
                // A range starting at 0/1 means "as slow as you like": 1 fps is the useful floor.
                let low = r.lowerBound.numerator == 0 ? Fraction(1, 1) : r.lowerBound
                if r.upperBound.numerator > 0 { ranges.append(.init(min(low, r.upperBound), r.upperBound)) }
            default:
                continue
            }
        }
        return ranges.sorted { $0.maxFrameRate > $1.maxFrameRate }
    }
}
