import CImaging
import Foundation

/// JPEG encoding with the engine's libjpeg code, for pictures that are not camera frames (a frame has
/// `SampleBuffer.jpegData(quality:)`): a picture drawn in memory, a small copy of a photo. Thread-safe:
/// every call has its own compressor. Blocks the calling thread for the work.
public enum JPEGEncoder {
    /// A baseline JPEG of a greyscale picture: `pixels` holds `height` rows of `width` bytes, one per pixel.
    public static func encode(grayscale pixels: [UInt8], width: Int, height: Int, quality: Int = 80) throws(CaptureError) -> Data {
        guard (1...100).contains(quality) else { throw .invalidSettings("JPEG quality \(quality) is not within 1...100") }
        guard width > 0, height > 0, pixels.count >= width * height else {
            throw .invalidSettings("\(pixels.count) bytes are not a \(width)x\(height) greyscale picture")
        }
        var block: UnsafeMutablePointer<UInt8>?
        var capacity = 0, length = 0
        var message = [CChar](repeating: 0, count: 256)
        defer { free(block) }
        let status = pixels.withUnsafeBufferPointer { plane -> Int32 in
            var image = CImagingYUVImage()
            image.width = Int32(width)
            image.height = Int32(height)
            image.layout = CImagingLayoutGray
            image.planes.0 = plane.baseAddress
            image.strides.0 = width
            return CImaging_encode_jpeg(&image, Int32(quality), nil, 0, &block, &capacity, &length, &message, message.count)
        }
        guard status == 0, let block else {
            throw .encodingFailed(reason: "JPEG encoding failed: \(Self.reason(message))", underlying: nil)
        }
        return Data(bytes: block, count: length)
    }

    /// A small JPEG of a JPEG, its longer side `maximumDimension` pixels (or the picture's own size when
    /// smaller). Decoded at libjpeg's smallest scale that is still large enough (1/2, 1/4, 1/8): a
    /// 12-megapixel photo is never decoded whole.
    /// `orientation` (EXIF's 1 to 8) turns the small picture the way the photo is shown, so the thumbnail is
    /// upright.
    public static func thumbnail(ofJPEG jpeg: Data, maximumDimension: Int, quality: Int = 75, orientation: Int = 1) throws(CaptureError) -> Data {
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        var width: Int32 = 0, height: Int32 = 0
        var message = [CChar](repeating: 0, count: 200)
        let status = jpeg.withUnsafeBytes { bytes in
            CImaging_jpeg_thumbnail(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, Int32(maximumDimension),
                                    Int32(quality), Int32(orientation), &output, &length, &width, &height, &message, message.count)
        }
        defer { free(output) }
        guard status == 0, let output else {
            throw .encodingFailed(reason: "the picture cannot be read as a JPEG: \(Self.reason(message))", underlying: nil)
        }
        return Data(bytes: output, count: length)
    }

    private static func reason(_ message: [CChar]) -> String {
        String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
