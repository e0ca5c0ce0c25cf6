import GStreamerKit

extension CaptureDevice {
    /// A range of frame rates a format supports, in frames per second (a discrete rate has min == max).
    public struct FrameRateRange: Sendable, Hashable, Codable, CustomStringConvertible {
        public var minFrameRate: Double
        public var maxFrameRate: Double
        // Exact rates as GStreamer states them (12.5 is 25/2, 29.97 is 30000/1001): caps need fractions.
        var minimum: Fraction
        var maximum: Fraction

        init(_ minimum: Fraction, _ maximum: Fraction) {
            self.minimum = minimum
            self.maximum = maximum
            minFrameRate = minimum.doubleValue
            maxFrameRate = maximum.doubleValue
        }

        public func contains(_ rate: Double) -> Bool { rate >= minFrameRate - 1e-6 && rate <= maxFrameRate + 1e-6 }

        public var description: String {
            minimum == maximum ? fps(maxFrameRate) : "\(fps(minFrameRate))-\(fps(maxFrameRate))"
        }

        private enum CodingKeys: String, CodingKey { case minFrameRate, maxFrameRate }
        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(Fraction(approximating: try container.decode(Double.self, forKey: .minFrameRate)),
                      Fraction(approximating: try container.decode(Double.self, forKey: .maxFrameRate)))
        }
        public func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(minFrameRate, forKey: .minFrameRate)
            try container.encode(maxFrameRate, forKey: .maxFrameRate)
        }
    }

    /// One way a camera can deliver frames: pixel format, size and frame rates.
    public struct Format: Sendable, Hashable, Codable, CustomStringConvertible {
        /// GStreamer's raw format name ("YUY2", "NV12", "I420"...) or "MJPG" for motion JPEG.
        public var pixelFormat: String
        public var width: Int
        public var height: Int
        public var videoSupportedFrameRateRanges: [FrameRateRange]

        public var isCompressed: Bool { pixelFormat == "MJPG" }
        public var maxFrameRate: Double { videoSupportedFrameRateRanges.map(\.maxFrameRate).max() ?? 0 }
        public var dimensionsDescription: String { "\(width)x\(height)" }

        public var description: String {
            "\(pixelFormat) \(width)x\(height) @ " + videoSupportedFrameRateRanges.map(\.description).joined(separator: ", ") + " fps"
        }
    }
}

private func fps(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(format2: value)
}

extension String {
    init(format2 value: Double) {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        self = "\(hundredths / 100)." + (fraction < 10 ? "0\(fraction)" : "\(fraction)")
    }
}

extension Fraction {
    /// The fraction GStreamer would use for a rate given as a decimal (30, 12.5, 29.97).
    init(approximating value: Double) {
        if value == value.rounded() { self.init(Int(value), 1); return }
        if abs(value * 1001 / 1000 - (value * 1001 / 1000).rounded()) < 0.01 {
            self.init(Int((value * 1001 / 1000).rounded()) * 1000, 1001); return
        }
        self.init(Int((value * 1000).rounded()), 1000)
    }
}
