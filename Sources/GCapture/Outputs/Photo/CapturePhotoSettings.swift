import Foundation
import Synchronization

extension CapturePhotoOutput {
    /// What matters most for a photo (AVCapturePhotoOutput.QualityPrioritization).
    public enum QualityPrioritization: Int, Sendable, Codable, Comparable, CaseIterable, CustomStringConvertible {
        /// The newest frame, encoded fast (JPEG quality 75).
        case speed = 1
        /// The frame exposed at the request instant (JPEG quality 85). The default.
        case balanced = 2
        /// Several frames up to the request instant averaged into one (less noise), JPEG quality 95.
        case quality = 3

        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
        public var description: String { ["", "speed", "balanced", "quality"][rawValue] }

        var jpegQuality: Int {
            switch self { case .speed: 75; case .balanced: 85; case .quality: 95 }
        }

        /// Frames averaged for one photo.
        var frameCount: Int { self == .quality ? 4 : 1 }

        /// Whether auto-deferred delivery applies: the averaging of several frames is what is deferred, so
        /// at any other quality there is nothing to defer, and asking for it is a mistake to refuse.
        public var defersDelivery: Bool { self == .quality }

        var lower: Self { Self(rawValue: rawValue - 1) ?? .speed }
    }

    /// Whether pixels are turned upright or only tagged (EXIF Orientation) for viewers to turn.
    public enum OrientationHandling: String, Sendable, Codable {
        /// Rotated pixels, EXIF Orientation 1: right in every viewer. The default.
        case rotatePixels
        /// Pixels as the sensor saw them, the rotation in EXIF Orientation: cheaper.
        case exifOrientationOnly
    }
}

/// How to take one photo (AVCapturePhotoSettings). Use each settings object for one capture.
public final class CapturePhotoSettings: @unchecked Sendable {
    // @unchecked: the output reads the vars only inside capturePhoto, on the caller's thread, before it returns.
    private static let counter = Atomic<Int64>(0)

    public let uniqueID: Int64
    public var photoQualityPrioritization: CapturePhotoOutput.QualityPrioritization
    public var orientationHandling: CapturePhotoOutput.OrientationHandling
    /// Where to write the JPEG (atomically: it appears complete or not at all). Nil keeps it in memory.
    public var fileURL: URL?

    public init(photoQualityPrioritization: CapturePhotoOutput.QualityPrioritization = .balanced,
                orientationHandling: CapturePhotoOutput.OrientationHandling = .rotatePixels,
                fileURL: URL? = nil) {
        uniqueID = Self.counter.add(1, ordering: .relaxed).newValue
        self.photoQualityPrioritization = photoQualityPrioritization
        self.orientationHandling = orientationHandling
        self.fileURL = fileURL
    }
}

/// The settings as applied to a capture (AVCaptureResolvedPhotoSettings).
public struct CaptureResolvedPhotoSettings: Sendable {
    public let uniqueID: Int64
    /// The prioritization used: lower than asked when fast capture prioritization stepped it down.
    public let photoQualityPrioritization: CapturePhotoOutput.QualityPrioritization
    public let photoDimensions: (width: Int, height: Int)
    public let jpegQuality: Int
    public let isZeroShutterLag: Bool
    public let isDeferred: Bool
    public let rotationAngle: Int
    public let isMirrored: Bool
    /// Frames averaged into the photo.
    public let frameCount: Int
}

extension CaptureResolvedPhotoSettings {
    /// A capture that failed before a frame was chosen (or whose deferred work failed): no size, no frames.
    init(unfinished id: Int64, prioritization: CapturePhotoOutput.QualityPrioritization, zeroShutterLag: Bool,
         isDeferred: Bool, rotationAngle: Int, isMirrored: Bool) {
        self.init(uniqueID: id, photoQualityPrioritization: prioritization, photoDimensions: (0, 0),
                  jpegQuality: prioritization.jpegQuality, isZeroShutterLag: zeroShutterLag, isDeferred: isDeferred,
                  rotationAngle: rotationAngle, isMirrored: isMirrored, frameCount: 0)
    }

    init(unfinished job: PhotoJob, isDeferred: Bool) {
        self.init(unfinished: job.id, prioritization: job.prioritization, zeroShutterLag: job.zeroShutterLag,
                  isDeferred: isDeferred, rotationAngle: job.rotation, isMirrored: job.mirrored)
    }
}

/// A finished photo (AVCapturePhoto). The delegate also receives one for a capture that failed, as
/// AVFoundation's does: then `fileDataRepresentation()` is nil and the times are NaN.
public struct CapturePhoto: Sendable {
    public let resolvedSettings: CaptureResolvedPhotoSettings
    /// Session running time of the exposure, in seconds (the frame's timestamp).
    public let timestamp: Double
    /// Session running time of the capture request, in seconds.
    public let requestTimestamp: Double
    /// Exposure minus request, in milliseconds: ≤ 0 means the frame was exposed before the press.
    public let shutterLagMilliseconds: Double
    /// Request to encoded (and written) photo, in milliseconds.
    public let latencyMilliseconds: Double
    /// EXIF fields written: Make, Model, Software, DateTimeOriginal, Orientation.
    public let metadata: [String: String]
    /// Where the JPEG was written, if anywhere.
    public let fileURL: URL?
    /// A deferred photo's proxy: replaced on disk when processing finishes.
    public let isProxy: Bool
    /// Always false: photos are JPEG, never RAW (AVCapturePhoto.isRawPhoto).
    public var isRawPhoto: Bool { false }
    private let data: Data?

    init(resolvedSettings: CaptureResolvedPhotoSettings, timestamp: Double, requestTimestamp: Double,
         latencyMilliseconds: Double, metadata: [String: String], fileURL: URL?, isProxy: Bool, data: Data) {
        self.resolvedSettings = resolvedSettings
        self.timestamp = timestamp
        self.requestTimestamp = requestTimestamp
        shutterLagMilliseconds = (timestamp - requestTimestamp) * 1000
        self.latencyMilliseconds = latencyMilliseconds
        self.metadata = metadata
        self.fileURL = fileURL
        self.isProxy = isProxy
        self.data = data
    }

    /// The photo of a capture that failed: no data.
    init(failed resolvedSettings: CaptureResolvedPhotoSettings, fileURL: URL?) {
        self.resolvedSettings = resolvedSettings
        timestamp = .nan
        requestTimestamp = .nan
        shutterLagMilliseconds = .nan
        latencyMilliseconds = .nan
        metadata = [:]
        self.fileURL = fileURL
        isProxy = false
        data = nil
    }

    /// The JPEG file's bytes, EXIF included; nil for a capture that failed.
    public func fileDataRepresentation() -> Data? { data }
}

/// A deferred photo's proxy (AVCaptureDeferredPhotoProxy): a CapturePhoto whose `isProxy` is true, its file
/// replaced by the final image when processing is done.
public typealias CaptureDeferredPhotoProxy = CapturePhoto

/// Follows one capture (AVCapturePhotoCaptureDelegate), with AVFoundation's names and types so a delegate
/// written for it conforms after renaming. Called on the output's delegate queue, in this order: willBegin,
/// willCapture, didCapture (the frames are chosen: with zero shutter lag they were exposed at the press),
/// didFinishProcessingPhoto or, for a deferred capture, didFinishCapturingDeferredPhotoProxy, then
/// didFinishCapture. A capture that fails is told through didFinishProcessingPhoto (a photo without data)
/// and didFinishCapture, both with the error, where AVFoundation may raise an exception instead. Errors are
/// `CaptureError`s, typed `Error?` as in AVFoundation.
public protocol CapturePhotoCaptureDelegate: AnyObject, Sendable {
    func photoOutput(_ output: CapturePhotoOutput, willBeginCaptureFor resolvedSettings: CaptureResolvedPhotoSettings)
    func photoOutput(_ output: CapturePhotoOutput, willCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings)
    func photoOutput(_ output: CapturePhotoOutput, didCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings)
    func photoOutput(_ output: CapturePhotoOutput, didFinishProcessingPhoto photo: CapturePhoto, error: (any Error)?)
    /// The proxy is optional as in AVFoundation's SDK, though never nil here (failures go to
    /// didFinishProcessingPhoto).
    func photoOutput(_ output: CapturePhotoOutput, didFinishCapturingDeferredPhotoProxy deferredPhotoProxy: CaptureDeferredPhotoProxy?,
                     error: (any Error)?)
    /// The same with a non-optional proxy, as the seed documents (and much published code) declare it: a
    /// method of that shape would otherwise compile as an unrelated overload and never be called.
    func photoOutput(_ output: CapturePhotoOutput, didFinishCapturingDeferredPhotoProxy deferredPhotoProxy: CaptureDeferredPhotoProxy,
                     error: (any Error)?)
    func photoOutput(_ output: CapturePhotoOutput, didFinishCaptureFor resolvedSettings: CaptureResolvedPhotoSettings, error: (any Error)?)
}

extension CapturePhotoCaptureDelegate {
    public func photoOutput(_ output: CapturePhotoOutput, willBeginCaptureFor resolvedSettings: CaptureResolvedPhotoSettings) {}
    public func photoOutput(_ output: CapturePhotoOutput, willCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings) {}
    public func photoOutput(_ output: CapturePhotoOutput, didCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings) {}
    public func photoOutput(_ output: CapturePhotoOutput, didFinishProcessingPhoto photo: CapturePhoto, error: (any Error)?) {}
    public func photoOutput(_ output: CapturePhotoOutput, didFinishCapturingDeferredPhotoProxy deferredPhotoProxy: CaptureDeferredPhotoProxy?,
                            error: (any Error)?) {}
    public func photoOutput(_ output: CapturePhotoOutput, didFinishCapturingDeferredPhotoProxy deferredPhotoProxy: CaptureDeferredPhotoProxy,
                            error: (any Error)?) {}
    public func photoOutput(_ output: CapturePhotoOutput, didFinishCaptureFor resolvedSettings: CaptureResolvedPhotoSettings, error: (any Error)?) {}
}
