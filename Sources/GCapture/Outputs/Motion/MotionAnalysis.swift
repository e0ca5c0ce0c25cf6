import CImaging
import Foundation

/// What the motion output asks of the analysis, read at every frame: changes apply from the next one.
struct MotionSettings: Sendable, Equatable {
    var zones: [CGRect] = []
    var masks: [CGRect] = []
    var sensitivity = 0.5
    var minimumArea = 0.005
    /// Bumped when zones or masks change, so the region map is redrawn once rather than compared per frame.
    var regionsGeneration = 0
}

/// The per-frame work of a CaptureMotionOutput, on the branch's streaming thread (its owner keeps it behind a
/// lock): the detector for the current picture size, the began/ended hysteresis, and the running motion's
/// extent for its end.
final class MotionAnalysis {
    private var detector: MotionDetector?
    private var regionsGeneration = -1
    private var hysteresis = MotionHysteresis()
    /// The running motion: the union of its boxes, its highest score.
    private var extent: CGRect?
    private var peakScore = 0.0
    private var lastPresentationTime: UInt64 = 0
    /// Frames are not analyzed (the camera is interrupted: the session shows black frames in its place).
    private(set) var isPaused = false

    private(set) var analyzedFrames = 0
    private(set) var framesWithMotion = 0
    /// The highest score of a frame analyzed while no motion was running (how close noise came to the line).
    private(set) var largestStillScore = 0.0
    private(set) var lastMeasurement: MotionDetector.Measurement?

    var isMoving: Bool { hysteresis.isMoving }

    /// One grey frame; returns the event it makes, if any.
    func analyze(_ pixels: UnsafeRawBufferPointer, width: Int, height: Int, stride: Int, presentationTime: UInt64,
                 settings: MotionSettings) -> CaptureMotionOutput.Event? {
        guard !isPaused else { return nil }
        if detector?.width != width || detector?.height != height {
            detector = MotionDetector(width: width, height: height)
            regionsGeneration = -1
        }
        guard let detector else { return nil }
        if regionsGeneration != settings.regionsGeneration {
            detector.setRegions(zones: settings.zones, masks: settings.masks)
            regionsGeneration = settings.regionsGeneration
        }
        guard let measurement = detector.measure(pixels, stride: stride,
                                                 parameters: .forSensitivity(settings.sensitivity)) else { return nil }
        analyzedFrames += 1
        lastMeasurement = measurement
        lastPresentationTime = presentationTime
        guard !measurement.isLearning else { return nil }
        if measurement.score >= settings.minimumArea { framesWithMotion += 1 }
        if !hysteresis.isMoving { largestStillScore = max(largestStillScore, measurement.score) }
        let transition = hysteresis.update(score: measurement.score, minimumArea: settings.minimumArea)
        if hysteresis.isMoving, let box = measurement.boundingBox {
            extent = extent.map { $0.union(box) } ?? box
            peakScore = max(peakScore, measurement.score)
        }
        switch transition {
        case .began?:
            return .motionBegan(.init(boundingBox: measurement.boundingBox ?? .zero, score: measurement.score,
                                      presentationTimeStamp: presentationTime))
        case .ended?:
            return endMotion()
        case nil:
            return nil
        }
    }

    /// Stops analyzing (true) until resumed (false), which starts the background again; ends a running motion.
    func setPaused(_ paused: Bool) -> CaptureMotionOutput.Event? {
        isPaused = paused
        return restart()
    }

    /// Starts the background again at the next frame (a new camera, a new graph); ends a running motion.
    func restart() -> CaptureMotionOutput.Event? {
        detector?.restart()
        let ended = hysteresis.isMoving ? endMotion() : nil
        hysteresis.reset()
        return ended
    }

    private func endMotion() -> CaptureMotionOutput.Event {
        let motion = CaptureMotionOutput.Motion(boundingBox: extent ?? .zero, score: peakScore,
                                                presentationTimeStamp: lastPresentationTime)
        extent = nil
        peakScore = 0
        return .motionEnded(motion)
    }
}
