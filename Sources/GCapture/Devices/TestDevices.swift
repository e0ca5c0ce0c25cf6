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

    public init(pattern: Pattern = .smpte, motion: Int = 2, noiseLevel: Int = 0, noiseSeed: UInt32 = 1,
                position: CaptureDevice.Position = .unspecified) {
        self.pattern = pattern
        self.motion = motion
        self.noiseLevel = max(0, min(noiseLevel, 127))
        self.noiseSeed = noiseSeed
        self.position = position
    }

    static let pixelFormats = ["NV12", "I420", "YUY2"]

    static let formats: [CaptureDevice.Format] = FormatReader.standardSizes.flatMap { size in
        pixelFormats.map { pixelFormat in
            CaptureDevice.Format(pixelFormat: pixelFormat, width: size.0, height: size.1,
                                 videoSupportedFrameRateRanges: [.init(Fraction(1, 1), Fraction(60, 1))])
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
