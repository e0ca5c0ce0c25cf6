import Foundation
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
    /// Writes each frame's capture time into its top rows (see `CaptureTimeStamp`), so a photo or a movie
    /// frame says by its pixels when it was exposed, whatever the engine reports.
    public var stampsCaptureTime: Bool
    /// A scripted change drawn over the pattern (an object appearing, the light slowly changing), for
    /// motion detection to be tested against a known truth. Nil: the pattern alone.
    public var scene: Scene?
    /// Seconds between a frame's capture (the time it is stamped with) and its delivery, as a USB camera's
    /// transfer and decoding take 50-200 ms: a camera switched to may deliver frames older than the last one
    /// the camera before it delivered.
    public var deliveryDelay: Double

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
                maxFrameRate: Int = 60, stampsCaptureTime: Bool = false, scene: Scene? = nil, deliveryDelay: Double = 0) {
        self.pattern = pattern
        self.motion = motion
        self.noiseLevel = max(0, min(noiseLevel, 127))
        self.noiseSeed = noiseSeed
        self.position = position
        self.sizes = sizes
        self.maxFrameRate = max(1, maxFrameRate)
        self.stampsCaptureTime = stampsCaptureTime
        self.scene = scene
        self.deliveryDelay = max(0, deliveryDelay)
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

extension TestCameraOptions {
    /// What happens in front of the test camera, over a still pattern (use `motion: 0`): drawn into the luma
    /// of every frame after the source, before the sensor noise and the capture-time stamp. Times count from
    /// the first frame the source delivers.
    public struct Scene: Sendable, Hashable, Codable {
        /// A solid rectangle that appears and stays.
        public var object: SceneObject?
        /// The whole picture's luma moves by this many 8-bit steps a second (negative: darker), clamped to
        /// 0-255: a slow change of the light, which is not motion.
        public var brightnessRamp: Double

        public init(object: SceneObject? = nil, brightnessRamp: Double = 0) {
            self.object = object
            self.brightnessRamp = brightnessRamp
        }
    }

    /// A rectangle of one luma (the chroma underneath is left as it was).
    public struct SceneObject: Sendable, Hashable, Codable {
        /// Where, in normalized coordinates of the picture (0...1, origin at the top left).
        public var rect: CGRect
        /// Its luma, 0-255; choose one far from the pattern's under it.
        public var luma: UInt8
        /// Seconds after the source's first frame: frames from then on show it.
        public var appearsAfter: Double

        public init(rect: CGRect, luma: UInt8 = 235, appearsAfter: Double) {
            self.rect = rect
            self.luma = luma
            self.appearsAfter = appearsAfter
        }
    }
}

/// The test camera's capture-time stamp: a band of square cells across the top of the luma plane, each
/// black (16) or white (235), big enough to survive JPEG and video coding.
///
/// Cells from the left: white, black (references for the threshold), then the capture time's 32 bits, most
/// significant first (white = 1), then 4 check bits (the sum of the time's eight nibbles, modulo 16). The
/// time is the clock time of the frame's timestamp in milliseconds, modulo 2^32, on GStreamer's system
/// clock, which is CLOCK_MONOTONIC: a test reads the same clock with clock_gettime.
public enum CaptureTimeStamp {
    public static let cellCount = 2 + 32 + 4
    /// The cells' side in pixels for a frame `width` wide: as big as fits, a multiple of 8 (JPEG's blocks).
    public static func cellSize(forWidth width: Int) -> Int { max(8, width / cellCount / 8 * 8) }

    /// The cells' values, left to right, for a time in milliseconds.
    public static func cells(milliseconds: UInt32) -> [Bool] {
        let check = (0..<8).reduce(0) { $0 + Int((milliseconds >> UInt32($1 * 4)) & 0xF) } & 0xF
        return [true, false] + (0..<32).map { milliseconds & (1 << UInt32(31 - $0)) != 0 }
            + (0..<4).map { check & (1 << (3 - $0)) != 0 }
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
