import CImaging
import Foundation

/// The C kernel's Swift face (CImaging's motion.c): one detector for grey pictures of one size. Not
/// thread-safe: its owner calls it from one thread at a time. Each frame is read where it lies and compared
/// with state allocated once, at the picture's size: nothing is allocated per frame.
final class MotionDetector {
    /// What one frame showed.
    struct Measurement {
        /// The detector is still learning the background (its first frames): nothing else counts.
        var isLearning: Bool
        /// Share of the zones' area that changed, 0...1.
        var score: Double
        /// Where it changed, in normalized coordinates; nil when nothing did.
        var boundingBox: CGRect?
        /// How many luma steps the whole picture's brightness moved (compensated, not motion).
        var brightnessChange: Int
        /// The pixels' mean noise, in luma steps.
        var noise: Double
    }

    let width: Int
    let height: Int
    private let detector: OpaquePointer
    private var result = CImagingMotionResult()

    init?(width: Int, height: Int) {
        guard let detector = CImaging_motion_create(Int32(width), Int32(height)) else { return nil }
        self.width = width
        self.height = height
        self.detector = detector
    }

    deinit { CImaging_motion_destroy(detector) }

    /// Marks which pixels count: those whose centre lies in a zone (every pixel when there is none) and in no
    /// mask. Masked pixels are not even read for the picture's brightness.
    func setRegions(zones: [CGRect], masks: [CGRect]) {
        guard let map = CImaging_motion_regions(detector) else { return }
        for y in 0..<height {
            let centreY = (Double(y) + 0.5) / Double(height)
            for x in 0..<width {
                let centre = CGPoint(x: (Double(x) + 0.5) / Double(width), y: centreY)
                let region: Int
                if masks.contains(where: { $0.contains(centre) }) {
                    region = Int(CImagingMotionRegionMasked)
                } else if zones.isEmpty || zones.contains(where: { $0.contains(centre) }) {
                    region = Int(CImagingMotionRegionZone)
                } else {
                    region = Int(CImagingMotionRegionWatchedForLight)
                }
                map[y * width + x] = UInt8(region)
            }
        }
    }

    /// The next frame starts the background again.
    func restart() { CImaging_motion_restart(detector) }

    /// Compares a `width`x`height` grey picture, `stride` bytes a row, with the background.
    func measure(_ pixels: UnsafeRawBufferPointer, stride: Int, parameters: CImagingMotionParameters) -> Measurement? {
        guard let base = pixels.baseAddress, stride >= width, pixels.count >= stride * (height - 1) + width else { return nil }
        withUnsafePointer(to: parameters) { parameters in
            CImaging_motion_process(detector, base.assumingMemoryBound(to: UInt8.self), stride, parameters, &result)
        }
        let box: CGRect? = result.changed_pixels > 0
            ? CGRect(x: Double(result.left) / Double(width), y: Double(result.top) / Double(height),
                     width: Double(result.right - result.left) / Double(width),
                     height: Double(result.bottom - result.top) / Double(height))
            : nil
        return Measurement(isLearning: result.learning != 0,
                           score: result.zone_pixels > 0 ? Double(result.changed_pixels) / Double(result.zone_pixels) : 0,
                           boundingBox: box, brightnessChange: Int(result.brightness_change), noise: Double(result.mean_noise))
    }
}

extension CImagingMotionParameters {
    /// The kernel's settings for a sensitivity (0...1). Higher: a smaller difference from a pixel's own
    /// noise counts as change. At 0.5 a pixel must differ by 4x its mean noise and by 10 luma steps.
    static func forSensitivity(_ sensitivity: Double) -> CImagingMotionParameters {
        let insensitivity = 1 - min(max(sensitivity, 0), 1)
        var parameters = CImagingMotionParameters()
        parameters.threshold_scale = Float(2 + 4 * insensitivity)
        parameters.minimum_threshold = Int32((4 + 12 * insensitivity).rounded())
        // A synthetic picture has no noise at all; half a step keeps the threshold above rounding.
        parameters.minimum_deviation_q8 = 128
        // At 30 fps a still pixel's background follows it with a time constant of about a second (so a slow
        // change of the light is learnt), one under an object with about two: an object that stays becomes
        // background within several seconds, and its motion ends.
        parameters.still_shift = 5
        parameters.changed_shift = 6
        parameters.deviation_shift = 6
        parameters.confirming_neighbours = 3
        parameters.learning_frames = 10
        return parameters
    }
}
