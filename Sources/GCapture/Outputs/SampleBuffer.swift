import GStreamerKit

/// One video frame delivered by a CaptureVideoDataOutput (CMSampleBuffer). It holds GStreamer's buffer, not
/// a copy: reading the planes maps the frame's memory in place.
public final class SampleBuffer: Sendable {
    let sample: Sample
    /// Size, pixel format and plane layout.
    public let videoInfo: VideoInfo

    private let layoutCache: VideoInfoCache

    /// `layoutCache` is shared by all frames of one output: their caps rarely change.
    init?(_ sample: Sample, layoutCache: VideoInfoCache) {
        guard let info = sample.videoInfo(cache: layoutCache) else { return nil }
        self.sample = sample
        self.layoutCache = layoutCache
        videoInfo = info
    }

    /// Nanoseconds of session running time at which the frame was captured.
    public var presentationTimeStamp: UInt64 { UInt64(sample.presentationTime ?? 0) }
    /// The same in seconds.
    public var presentationTime: Double { Double(presentationTimeStamp) / 1e9 }
    public var duration: Double? { sample.duration.map { Double($0) / 1e9 } }
    public var width: Int { videoInfo.width }
    public var height: Int { videoInfo.height }
    /// GStreamer format name ("NV12", "YUY2", "RGBA"...).
    public var pixelFormat: String { videoInfo.format }
    public var byteCount: Int { sample.byteCount }
    /// Whether the frame is still in the memory a camera lent it in (a V4L2 camera's bounded pool, delivered
    /// without a copy): keeping this buffer keeps one of the few the camera captures into, and the camera.
    public var isInCameraMemory: Bool { sample.bufferPool?.maximum != nil }

    /// The planes, mapped read-only for the duration of `body` without copying.
    public func withPlanes<R>(_ body: ([VideoPlane]) throws -> R) rethrows -> R? {
        try sample.withVideoPlanes(cache: layoutCache, body)
    }
}
