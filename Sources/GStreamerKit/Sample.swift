import CGst
import CGstShim
import Foundation
import GCaptureSupport

/// Size, pixel format and layout of raw video, read from caps.
public struct VideoInfo: Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// GStreamer's format name ("NV12", "I420", "YUY2", "RGBA"...).
    public var format: String
    public var frameRate: Fraction
    /// Bytes of one frame.
    public var size: Int
    public var planeCount: Int
    public var strides: [Int]
    public var offsets: [Int]
    /// Height in rows of each plane (chroma planes may be subsampled).
    public var planeHeights: [Int]
    /// Width in bytes of the meaningful part of each plane's rows.
    public var planeRowBytes: [Int]
    /// Whether samples span 16-235 (luma) and 16-240 (chroma), as most YUV video does, rather than 0-255.
    public var isLimitedRange: Bool

    public init?(caps: Caps) {
        var info = GstVideoInfo()
        guard gst_video_info_from_caps(&info, caps.pointer) != 0, let finfo = info.finfo else { return nil }
        self.init(info, finfo: finfo)
    }

    init(_ info: GstVideoInfo, finfo: UnsafePointer<GstVideoFormatInfo>) {
        width = Int(info.width)
        height = Int(info.height)
        format = String(cString: gst_video_format_to_string(finfo.pointee.format))
        frameRate = Fraction(info.fps_n, info.fps_d)
        size = Int(info.size)
        planeCount = Int(finfo.pointee.n_planes)
        strides = tupleArray(info.stride, as: gint.self).prefix(planeCount).map { Int($0) }
        offsets = tupleArray(info.offset, as: gsize.self).prefix(planeCount).map { Int($0) }
        let componentPlane = tupleArray(finfo.pointee.plane, as: guint.self)
        let heightShift = tupleArray(finfo.pointee.h_sub, as: guint.self)
        let widthShift = tupleArray(finfo.pointee.w_sub, as: guint.self)
        let pixelStride = tupleArray(finfo.pointee.pixel_stride, as: gint.self)
        var heights = Array(repeating: Int(info.height), count: planeCount)
        var rowBytes = Array(repeating: 0, count: planeCount)
        for component in 0..<Int(finfo.pointee.n_components) {
            let plane = Int(componentPlane[component])
            guard plane < planeCount else { continue }
            // GST_VIDEO_SUB_SCALE: round up when subsampling.
            heights[plane] = -((-Int(info.height)) >> Int(heightShift[component]))
            let compWidth = -((-Int(info.width)) >> Int(widthShift[component]))
            rowBytes[plane] = max(rowBytes[plane], compWidth * Int(pixelStride[component]))
        }
        planeHeights = heights
        planeRowBytes = rowBytes
        isLimitedRange = info.colorimetry.range == GST_VIDEO_COLOR_RANGE_16_235
    }
}

private func tupleArray<Tuple, Element>(_ tuple: Tuple, as _: Element.Type) -> [Element] {
    withUnsafeBytes(of: tuple) { Array($0.bindMemory(to: Element.self)) }
}

/// One mapped plane of a video frame: memory owned by GStreamer, valid inside the closure only.
public struct VideoPlane {
    public let bytes: UnsafeRawBufferPointer
    public let stride: Int
    public let height: Int
    /// Meaningful bytes per row (stride may add padding).
    public let rowBytes: Int
}

/// An owned GstSample: a buffer with its caps. Immutable, so it can cross threads. Holding one holds its
/// buffer by reference: no copy, but a buffer lent by a bounded pool is not returned to it meanwhile.
public final class Sample: @unchecked Sendable {
    // @unchecked Sendable: one reference to an immutable GstSample (its buffer is only read through it).
    package let pointer: OpaquePointer

    init(adopting pointer: OpaquePointer) { self.pointer = pointer }
    deinit {
        // What this side read of the buffer comes before whoever makes it (or its reused memory) writable.
        if let buffer = gst_sample_get_buffer(pointer) { CGstShim_tsan_published(buffer) }
        gst_sample_unref(pointer)
    }

    /// A sample of `buffer` (referenced, not taken) with `caps`, or nil.
    private convenience init?(buffer: UnsafeMutablePointer<GstBuffer>, caps: UnsafeMutablePointer<GstCaps>?,
                              segment: UnsafePointer<GstSegment>? = nil) {
        guard let sample = gst_sample_new(buffer, caps, segment, nil) else { return nil }
        self.init(adopting: sample)
    }

    /// A new buffer of `byteCount` bytes in memory of its own (lent by no pool), written by `fill`,
    /// stamped with `presentationTime`.
    public convenience init?(caps: Caps, presentationTime: ClockTime?, byteCount: Int,
                             fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        GStreamer.initialize()
        guard let buffer = gst_buffer_new_allocate(nil, gsize(byteCount), nil) else { return nil }
        try self.init(filling: buffer, caps: caps, presentationTime: presentationTime, fill: fill)
    }

    /// Takes `buffer` (a new one, writable), writes it with `fill` and stamps it.
    convenience init?(filling buffer: UnsafeMutablePointer<GstBuffer>, caps: Caps, presentationTime: ClockTime?,
                      fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        defer { gst_buffer_unref(buffer) }
        // A new (or pooled) buffer: whoever used it, or its memory, last let go before it was handed out.
        CGstShim_tsan_received(buffer)
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_WRITE) != 0 else { return nil }
        do {
            defer { gst_buffer_unmap(buffer, &map) }
            try fill(UnsafeMutableRawBufferPointer(start: map.data, count: Int(map.size)))
        }
        buffer.pointee.pts = presentationTime ?? ClockTime.none
        self.init(buffer: buffer, caps: caps.pointer)
    }

    private var buffer: UnsafeMutablePointer<GstBuffer>? { gst_sample_get_buffer(pointer) }

    /// The same frame in memory of its own (a deep copy, lent by no pool), with the same caps, timestamps
    /// and metadata: what to keep instead of a buffer its pool needs back.
    public func copy() -> Sample? {
        guard let buffer, let copied = gst_buffer_copy_deep(buffer) else { return nil }
        defer { gst_buffer_unref(copied) }
        return Sample(buffer: copied, caps: gst_sample_get_caps(pointer), segment: gst_sample_get_segment(pointer))
    }

    /// The bounds of the pool that lent the buffer; nil when no pool did (the buffer is the sample's alone).
    public var bufferPool: BufferPoolBounds? {
        var minimum: guint = 0, maximum: guint = 0
        guard CGstShim_buffer_pool_bounds(buffer, &minimum, &maximum) != 0 else { return nil }
        return BufferPoolBounds(minimum: Int(minimum), maximum: maximum == 0 ? nil : Int(maximum))
    }

    /// Presentation timestamp in running time (pipeline clock minus base time) for live sources.
    public var presentationTime: ClockTime? {
        guard let pts = buffer?.pointee.pts, pts != ClockTime.none else { return nil }
        return pts
    }

    public var duration: ClockTime? {
        guard let value = buffer?.pointee.duration, value != ClockTime.none else { return nil }
        return value
    }

    /// Bytes held by the buffer.
    public var byteCount: Int { buffer.map { Int(gst_buffer_get_size($0)) } ?? 0 }

    public var caps: Caps? { gst_sample_get_caps(pointer).map { Caps(retaining: $0) } }

    public var videoInfo: VideoInfo? { caps.flatMap { VideoInfo(caps: $0) } }

    /// The frame layout, parsed once per caps when `cache` is shared by a stream of samples.
    public func videoInfo(cache: VideoInfoCache) -> VideoInfo? { cache.entry(for: self)?.info }

    /// Maps the whole buffer read-only, without copying.
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard let buffer else { return nil }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return nil }
        defer { gst_buffer_unmap(buffer, &map) }
        return try body(UnsafeRawBufferPointer(start: map.data, count: Int(map.size)))
    }

    /// The buffer's bytes as Data without copying them: the buffer stays mapped, and alive, as long as the
    /// Data (or a copy of it) does.
    public func mappedData() -> Data? {
        guard let buffer, let mapping = ReadMapping(buffer, owner: self) else { return nil }
        guard let base = mapping.info.data, mapping.info.size > 0 else { return Data() }
        return Data(bytesNoCopy: base, count: Int(mapping.info.size), deallocator: .custom { _, _ in mapping.release() })
    }

    /// Maps the frame's planes read-only, without copying (honours per-buffer video meta layouts).
    public func withVideoPlanes<R>(cache: VideoInfoCache? = nil, _ body: ([VideoPlane]) throws -> R) rethrows -> R? {
        guard let buffer else { return nil }
        var info: GstVideoInfo
        if let entry = cache?.entry(for: self) {
            info = entry.raw
        } else {
            guard let capsPointer = gst_sample_get_caps(pointer) else { return nil }
            info = GstVideoInfo()
            guard gst_video_info_from_caps(&info, capsPointer) != 0 else { return nil }
        }
        guard let finfo = info.finfo else { return nil }
        var frame = GstVideoFrame()
        guard gst_video_frame_map(&frame, &info, buffer, GST_MAP_READ) != 0 else { return nil }
        defer { gst_video_frame_unmap(&frame) }
        let layout = VideoInfo(frame.info, finfo: finfo)
        let data = tupleArray(frame.data, as: UnsafeMutableRawPointer?.self)
        var planes: [VideoPlane] = []
        for plane in 0..<layout.planeCount {
            guard let base = data[plane] else { continue }
            let length = layout.strides[plane] * layout.planeHeights[plane]
            planes.append(VideoPlane(bytes: UnsafeRawBufferPointer(start: base, count: length),
                                     stride: layout.strides[plane], height: layout.planeHeights[plane],
                                     rowBytes: layout.planeRowBytes[plane]))
        }
        return try body(planes)
    }
}

/// How many buffers a pool keeps: `minimum` for the pipeline's own needs, at most `maximum` (nil: the pool
/// allocates as many as are asked for). A bounded pool whose buffers are all held stalls its producer.
public struct BufferPoolBounds: Sendable, Equatable {
    public var minimum: Int
    public var maximum: Int?

    public init(minimum: Int, maximum: Int?) {
        self.minimum = minimum
        self.maximum = maximum
    }
}

/// A buffer mapped for reading until `release`, keeping its owner (and so the buffer) alive meanwhile.
private final class ReadMapping: @unchecked Sendable {
    // @unchecked Sendable: made, then released once by whoever holds it last (the Data's deallocator or deinit).
    private var owner: Sample?
    private let buffer: UnsafeMutablePointer<GstBuffer>
    var info = GstMapInfo()

    init?(_ buffer: UnsafeMutablePointer<GstBuffer>, owner: Sample) {
        self.buffer = buffer
        guard gst_buffer_map(buffer, &info, GST_MAP_READ) != 0 else { return nil }
        self.owner = owner
    }

    deinit { release() }

    /// Called by the Data's deallocator (and at the latest when the mapping goes).
    func release() {
        guard owner != nil else { return }
        gst_buffer_unmap(buffer, &info)
        owner = nil
    }
}

/// Remembers the layout of the last caps seen, so a stream of frames whose caps do not change parses them
/// once instead of once per frame.
public final class VideoInfoCache: Sendable {
    struct Entry {
        let caps: UnsafeMutablePointer<GstCaps>
        let info: VideoInfo
        let raw: GstVideoInfo
    }

    private let entry = Locked<Entry?>(nil)

    public init() {}
    deinit { if let caps = entry.withLock({ $0?.caps }) { gst_caps_unref(caps) } }

    func entry(for sample: Sample) -> Entry? {
        guard let caps = gst_sample_get_caps(sample.pointer) else { return nil }
        return entry(forCaps: caps)
    }

    func entry(forCaps caps: UnsafeMutablePointer<GstCaps>) -> Entry? {
        entry.withLock { entry -> Entry? in
            // The cache keeps its caps alive, so an equal pointer is the same caps.
            if let entry, entry.caps == caps { return entry }
            var raw = GstVideoInfo()
            guard gst_video_info_from_caps(&raw, caps) != 0, let finfo = raw.finfo else { return nil }
            if let old = entry?.caps { gst_caps_unref(old) }
            entry = Entry(caps: gst_caps_ref(caps), info: VideoInfo(raw, finfo: finfo), raw: raw)
            return entry
        }
    }
}
