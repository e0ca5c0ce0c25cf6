import GStreamerKit

/// How the built-in test camera looks: a live, moving pattern with optional sensor noise, at any of the
/// standard sizes from 1 to 60 frames per second.
public struct TestCameraOptions: Sendable, Hashable, Codable {
    public enum Pattern: String, Sendable, Codable, CaseIterable {
        case smpte, ball, gradient = "gradient", checkers = "checkers-8", black, white, snow
    }

    public var pattern: Pattern
    /// Horizontal scroll in pixels per frame, so consecutive frames differ (0 = still).
    public var motion: Int
    /// Uniform noise added to every sample, ± this many 8-bit steps (0 = clean; 8 is a dim room).
    public var noiseLevel: Int
    /// Seed of the noise generator: the same seed gives the same noise.
    public var noiseSeed: UInt32
    public var position: CaptureDevice.Position
    /// The sizes the camera offers, like a real sensor's modes (default: 320x240 up to 3840x2160).
    public var sizes: [Size]
    /// The fastest frame rate every size offers.
    public var maxFrameRate: Int

    /// 320x240, 640x480, 1280x720, 1920x1080 and 3840x2160.
    public static let standardSizes = FormatReader.standardSizes.map { Size(width: $0.0, height: $0.1) }

    public struct Size: Sendable, Hashable, Codable {
        public var width: Int
        public var height: Int
        public init(width: Int, height: Int) { self.width = width; self.height = height }
    }

    public init(pattern: Pattern = .smpte, motion: Int = 2, noiseLevel: Int = 0, noiseSeed: UInt32 = 1,
                position: CaptureDevice.Position = .unspecified,
                sizes: [Size] = TestCameraOptions.standardSizes,
                maxFrameRate: Int = 60) {
        self.pattern = pattern
        self.motion = motion
        self.noiseLevel = max(0, min(noiseLevel, 127))
        self.noiseSeed = noiseSeed
        self.position = position
        self.sizes = sizes
        self.maxFrameRate = max(1, maxFrameRate)
    }

    static let pixelFormats = ["NV12", "I420", "YUY2"]

    var formats: [CaptureDevice.Format] {
        sizes.flatMap { size in
            Self.pixelFormats.map { pixelFormat in
                CaptureDevice.Format(pixelFormat: pixelFormat, width: size.width, height: size.height,
                                     videoSupportedFrameRateRanges: [.init(Fraction(1, 1), Fraction(maxFrameRate, 1))])
            }
        }
    }
}

/// The built-in test microphone: a live sine tone.
public struct TestMicrophoneOptions: Sendable, Hashable, Codable {
    public var frequency: Double
    public var volume: Double

    public init(frequency: Double = 440, volume: Double = 0.3) {
        self.frequency = frequency
        self.volume = volume
    }
}
