import CImaging
import Foundation
import GStreamerKit

/// Encodes YUV frames to JPEG with libjpeg, reading the frame's planes in place (CImaging_encode_jpeg).
/// Limited-range video (most cameras' YUV) is stretched to the full range JPEG defines, which jpegenc does
/// not do: its photos of such frames have grey blacks and dull whites. Thread-safe: every call has its own
/// compressor.
enum YUVJPEGEncoder {
    /// How libjpeg reads one of the formats it can take without conversion.
    struct Layout {
        var layout: CImagingLayout
        var chromaShiftX: Int32
        var chromaShiftY: Int32
        /// Which of the frame's planes hold Y, Cb, Cr (planar) or Y and the chroma pairs (interleaved).
        var planeOrder: [Int]
    }

    static func layout(of format: String) -> Layout? {
        switch format {
        case "I420": Layout(layout: CImagingLayoutPlanar, chromaShiftX: 1, chromaShiftY: 1, planeOrder: [0, 1, 2])
        case "YV12": Layout(layout: CImagingLayoutPlanar, chromaShiftX: 1, chromaShiftY: 1, planeOrder: [0, 2, 1])
        case "Y42B": Layout(layout: CImagingLayoutPlanar, chromaShiftX: 1, chromaShiftY: 0, planeOrder: [0, 1, 2])
        case "Y444": Layout(layout: CImagingLayoutPlanar, chromaShiftX: 0, chromaShiftY: 0, planeOrder: [0, 1, 2])
        case "NV12": Layout(layout: CImagingLayoutInterleavedUV, chromaShiftX: 1, chromaShiftY: 1, planeOrder: [0, 1])
        case "NV21": Layout(layout: CImagingLayoutInterleavedVU, chromaShiftX: 1, chromaShiftY: 1, planeOrder: [0, 1])
        case "NV16": Layout(layout: CImagingLayoutInterleavedUV, chromaShiftX: 1, chromaShiftY: 0, planeOrder: [0, 1])
        case "NV61": Layout(layout: CImagingLayoutInterleavedVU, chromaShiftX: 1, chromaShiftY: 0, planeOrder: [0, 1])
        case "NV24": Layout(layout: CImagingLayoutInterleavedUV, chromaShiftX: 0, chromaShiftY: 0, planeOrder: [0, 1])
        case "GRAY8": Layout(layout: CImagingLayoutGray, chromaShiftX: 0, chromaShiftY: 0, planeOrder: [0])
        default: nil
        }
    }

    /// The formats `layout(of:)` knows, as a caps list for the conversion in front of the encoder.
    static let formats = ["I420", "YV12", "Y42B", "Y444", "NV12", "NV21", "NV16", "NV61", "NV24", "GRAY8"]

    /// A JPEG of the frame (baseline, `quality` 1-100), with `app1` (an EXIF segment) after SOI when given,
    /// written into a block of `blocks` that returns there when the Data is freed.
    static func encode(_ sample: Sample, info: VideoInfo, quality: Int, app1: Data?,
                       blocks: MemoryBlockPool) throws(CaptureError) -> Data {
        guard let layout = layout(of: info.format) else {
            throw .encodingFailed(reason: "the JPEG encoder cannot read \(info.format) frames", underlying: nil)
        }
        var block = blocks.take()
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status: Int32? = sample.withVideoPlanes { planes -> Int32 in
            guard planes.count > layout.planeOrder.max()! else { return -2 }
            var image = CImagingYUVImage()
            image.width = Int32(info.width)
            image.height = Int32(info.height)
            image.layout = layout.layout
            image.chroma_shift_x = layout.chromaShiftX
            image.chroma_shift_y = layout.chromaShiftY
            image.limited_range = info.isLimitedRange ? 1 : 0
            withUnsafeMutablePointer(to: &image.planes) { tuple in
                tuple.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 3) { pointers in
                    for (slot, plane) in layout.planeOrder.enumerated() {
                        pointers[slot] = planes[plane].bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    }
                }
            }
            withUnsafeMutablePointer(to: &image.strides) { tuple in
                tuple.withMemoryRebound(to: Int.self, capacity: 3) { strides in
                    for (slot, plane) in layout.planeOrder.enumerated() { strides[slot] = planes[plane].stride }
                }
            }
            let app1 = app1 ?? Data()
            return app1.withUnsafeBytes { segment in
                CImaging_encode_jpeg(&image, Int32(quality), segment.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                     segment.count, &block.bytes, &block.capacity, &length, &message, message.count)
            }
        }
        guard status == 0 else {
            blocks.giveBack(block)
            let reason = status == nil || status == -2 ? "the \(info.format) frame could not be mapped"
                : String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw .encodingFailed(reason: "JPEG encoding failed: \(reason)", underlying: nil)
        }
        return blocks.data(lending: block, count: length)
    }
}
