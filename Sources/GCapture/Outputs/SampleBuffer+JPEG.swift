import Foundation

extension SampleBuffer {
    /// Blocks reused by every frame's JPEG: a live view encodes 10 to 30 a second.
    private static let jpegBlocks = MemoryBlockPool(keeping: 4)

    /// The frame as a baseline JPEG (`quality` 1-100), encoded from its YUV planes in place with libjpeg, as
    /// photos are. Frames in a format the encoder cannot read (see `jpegPixelFormats`) throw: ask for one of
    /// those in the output's videoSettings. Blocks the calling thread for the encode (a few milliseconds at 720p).
    public func jpegData(quality: Int = 80) throws(CaptureError) -> Data {
        guard (1...100).contains(quality) else { throw .invalidSettings("JPEG quality \(quality) is not within 1...100") }
        return try YUVJPEGEncoder.encode(sample, info: videoInfo, quality: quality, app1: nil, blocks: Self.jpegBlocks)
    }

    /// The pixel formats `jpegData(quality:)` reads.
    public static var jpegPixelFormats: [String] { YUVJPEGEncoder.formats }
}
