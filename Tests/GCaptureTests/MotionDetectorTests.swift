import CImaging
import Foundation
@testable import GCapture
import XCTest

/// The detector's kernel (CImaging's motion.c through MotionDetector) on synthetic grey pictures: what a
/// session cannot script exactly, such as a sudden step of the light (a camera's exposure step).
final class MotionDetectorTests: XCTestCase {
    private static let width = 160, height = 120

    /// A still gradient (luma 60-180, far from clipping) with uniform noise of ±`noise`, plus `brightness`,
    /// and a block of luma `object` over `rect` when given.
    private func picture(frame: Int, noise: Int = 4, brightness: Int = 0, object: (rect: CGRect, luma: UInt8)? = nil) -> [UInt8] {
        var state = UInt32(truncatingIfNeeded: frame &* 2_654_435_761) | 1
        var pixels = [UInt8](repeating: 0, count: Self.width * Self.height)
        for y in 0..<Self.height {
            for x in 0..<Self.width {
                state ^= state << 13; state ^= state >> 17; state ^= state << 5
                let noiseValue = Int(state % UInt32(2 * noise + 1)) - noise
                var value = 60 + x * 120 / Self.width + brightness + noiseValue
                if let object, object.rect.contains(CGPoint(x: (Double(x) + 0.5) / Double(Self.width),
                                                            y: (Double(y) + 0.5) / Double(Self.height))) {
                    value = Int(object.luma) + noiseValue
                }
                pixels[y * Self.width + x] = UInt8(clamping: value)
            }
        }
        return pixels
    }

    private func measure(_ detector: MotionDetector, _ pixels: [UInt8]) -> MotionDetector.Measurement? {
        pixels.withUnsafeBytes { detector.measure($0, stride: Self.width, parameters: .forSensitivity(0.5)) }
    }

    /// The whole picture 25 steps brighter from one frame to the next is no motion: the median difference is
    /// taken out before comparing.
    func testASuddenStepOfTheLightIsNotMotion() throws {
        let detector = try XCTUnwrap(MotionDetector(width: Self.width, height: Self.height))
        for frame in 0..<40 { _ = measure(detector, picture(frame: frame)) }
        var largest = 0.0, brightnessChange = 0
        for frame in 40..<50 {
            let measurement = try XCTUnwrap(measure(detector, picture(frame: frame, brightness: 25)))
            XCTAssertFalse(measurement.isLearning)
            largest = max(largest, measurement.score)
            if frame == 40 { brightnessChange = measurement.brightnessChange }
        }
        print("motion kernel: a 25-step light step measured as \(brightnessChange), largest score \(largest)")
        XCTAssertEqual(brightnessChange, 25, accuracy: 1)
        XCTAssertLessThan(largest, CaptureMotionOutput().minimumArea, "the light's step was taken for motion")
    }

    /// The same step with an object appearing in it: the object still counts, its box where it is; a mask
    /// over it hides it.
    func testAnObjectAppearingDuringALightStepIsMotionUnlessMasked() throws {
        let rect = CGRect(x: 0.5, y: 0.25, width: 0.25, height: 0.25)
        for masked in [false, true] {
            let detector = try XCTUnwrap(MotionDetector(width: Self.width, height: Self.height))
            detector.setRegions(zones: [], masks: masked ? [rect] : [])
            for frame in 0..<40 { _ = measure(detector, picture(frame: frame)) }
            let measurement = try XCTUnwrap(measure(detector, picture(frame: 40, brightness: 25, object: (rect, 220))))
            if masked {
                XCTAssertEqual(measurement.score, 0, "a masked object counted")
            } else {
                XCTAssertEqual(measurement.score, rect.width * rect.height, accuracy: 0.01)
                let box = try XCTUnwrap(measurement.boundingBox)
                XCTAssertEqual(box.midX, rect.midX, accuracy: 0.02)
                XCTAssertEqual(box.midY, rect.midY, accuracy: 0.02)
            }
        }
    }

    /// Motion begins on the second frame that shows it and ends after half a second of quiet, not on one
    /// quiet frame.
    func testHysteresisBeginsAfterTwoFramesAndEndsAfterFifteenQuietOnes() {
        var hysteresis = MotionHysteresis()
        XCTAssertNil(hysteresis.update(score: 0.1, minimumArea: 0.01))
        XCTAssertEqual(hysteresis.update(score: 0.1, minimumArea: 0.01), .began)
        // Between half the minimum and the minimum: neither moving nor quiet.
        for _ in 0..<30 { XCTAssertNil(hysteresis.update(score: 0.007, minimumArea: 0.01)) }
        for _ in 1..<MotionHysteresis.quietFramesToEnd { XCTAssertNil(hysteresis.update(score: 0, minimumArea: 0.01)) }
        XCTAssertEqual(hysteresis.update(score: 0, minimumArea: 0.01), .ended)
        XCTAssertFalse(hysteresis.isMoving)
    }
}
