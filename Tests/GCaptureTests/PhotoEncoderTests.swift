import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// The photo encoder against GStreamer's own conversion: every raw layout libjpeg reads in place, sizes
/// that do and do not fill whole JPEG blocks, and formats that must be converted or turned first. Each
/// JPEG is compared by ffmpeg with a PNG that videoconvert and pngenc made of the same frame.
final class PhotoEncoderTests: XCTestCase {
    /// Photos here measure 37-54 dB. Limited-range samples written as they are (what jpegenc does: grey
    /// blacks, dull whites) measure ~25 dB, a swapped or shifted plane less.
    let minimumPSNR = 35.0
    /// Shared by the encodes of a test, so that most of them write into a block an earlier one gave back.
    let blocks = MemoryBlockPool(keeping: 1)

    func testEveryLayoutReadInPlaceEncodesTheFrameFaithfully() throws {
        let folder = try temporaryFolder()
        // 320x240 fills whole blocks (rows used in place); 314x234 does not (edges copied and repeated).
        for (width, height) in [(320, 240), (314, 234)] {
            for format in YUVJPEGEncoder.formats {
                let frame = try testFrame(format: format, width: width, height: height)
                let jpeg = try YUVJPEGEncoder.encode(frame.sample, info: frame.info, quality: 95, app1: nil, blocks: blocks)
                let quality = try compare(jpeg, with: frame, named: "\(format)-\(width)x\(height)", in: folder)
                XCTAssertGreaterThan(quality, minimumPSNR, "\(format) \(width)x\(height)")
            }
        }
    }

    func testFormatsLibjpegCannotReadAreConvertedAndTurnedFramesKeepTheirColours() throws {
        let folder = try temporaryFolder()
        let encoder = try PhotoEncoder()
        for format in ["YUY2", "UYVY", "RGBx", "BGR", "NV12"] {
            let frame = try testFrame(format: format, width: 320, height: 240)
            let jpeg = try encoder.encode(frame, quality: 95, transform: .identity, rotatePixels: true, tags: TagList())
            XCTAssertGreaterThan(try compare(jpeg, with: frame, named: format, in: folder), minimumPSNR, format)
        }
        // Turned: the JPEG is 240x320 and, turned back by ffmpeg, matches the frame.
        let frame = try testFrame(format: "NV12", width: 320, height: 240)
        let turned = try encoder.encode(frame, quality: 95, transform: .rotate90, rotatePixels: true, tags: TagList())
        XCTAssertGreaterThan(try compare(turned, with: frame, named: "turned", in: folder, undo: "transpose=cclock"),
                             minimumPSNR)
    }

    func testAFrameTheEncoderPipelineRejectsFailsWithItsReasonAndTheNextPhotoWorks() throws {
        let encoder = try PhotoEncoder()
        // A YUY2 frame (converted by the pipeline, not read in place) whose buffer is far too small.
        let caps = try Caps("video/x-raw,format=YUY2,width=320,height=240,framerate=30/1")
        let sample = try XCTUnwrap(Sample(caps: caps, presentationTime: 0, byteCount: 100) { $0.initializeMemory(as: UInt8.self, repeating: 0) })
        let broken = CapturedFrame(sample: sample, presentationTime: 0, caps: caps, info: try XCTUnwrap(VideoInfo(caps: caps)))
        XCTAssertThrowsError(try encoder.encode(broken, quality: 90, transform: .identity, rotatePixels: true, tags: TagList())) { error in
            guard case .encodingFailed(let reason, let underlying) = error as? CaptureError else {
                return XCTFail("\(error)")
            }
            XCTAssertNotNil(underlying, "the pipeline's own report is the cause: \(reason)")
            XCTAssertTrue(reason.contains("320x240 YUY2 frame: "), reason)
        }
        let frame = try testFrame(format: "YUY2", width: 320, height: 240)
        let jpeg = try encoder.encode(frame, quality: 90, transform: .identity, rotatePixels: true, tags: TagList())
        XCTAssertEqual(Array(jpeg.prefix(2)), [0xFF, 0xD8])
    }

    func testTheEXIFSegmentFollowsStartOfImage() throws {
        let frame = try testFrame(format: "NV12", width: 320, height: 240)
        var tags = TagList()
        tags.set("device-model", "Model X")
        tags.set("image-orientation", "rotate-90")
        let jpeg = try PhotoEncoder().encode(frame, quality: 85, transform: .rotate90, rotatePixels: false, tags: tags)
        // SOI, then APP1 holding "Exif\0\0": where EXIF readers look first.
        XCTAssertEqual(Array(jpeg.prefix(4)), [0xFF, 0xD8, 0xFF, 0xE1])
        XCTAssertEqual(Array(jpeg.dropFirst(6).prefix(6)), Array("Exif\0\0".utf8))
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("exif.jpg")
        try jpeg.write(to: file)
        let facts = try exif(file)
        XCTAssertEqual(facts["Model"] as? String, "Model X")
        XCTAssertEqual(facts["Orientation"] as? Int, 6, "rotate-90 is EXIF orientation 6")
        XCTAssertEqual(facts["ImageWidth"] as? Int, 320, "EXIF-only rotation keeps the pixels")
    }

    /// A JPEG still held is never written over by the next encode; a block given back and reused yields
    /// the same bytes as a fresh one.
    func testReusedOutputBlocksNeverTouchAJPEGStillHeld() throws {
        let small = try testFrame(format: "NV12", width: 320, height: 240)
        let large = try testFrame(format: "I420", width: 640, height: 480)
        var first: Data? = try YUVJPEGEncoder.encode(small.sample, info: small.info, quality: 90, app1: nil, blocks: blocks)
        let snapshot = [UInt8](try XCTUnwrap(first))
        let firstAddress = first?.withUnsafeBytes { $0.baseAddress }
        let second = try YUVJPEGEncoder.encode(large.sample, info: large.info, quality: 90, app1: nil, blocks: blocks)
        XCTAssertEqual(first.map { [UInt8]($0) }, snapshot, "the second encode wrote into the first JPEG's block")
        // The first JPEG goes while the second is still held (used below), so the pool, which keeps one
        // block, keeps the first's; the next encode must write into it.
        first = nil
        XCTAssertNotEqual([UInt8](second), snapshot)
        let again = try YUVJPEGEncoder.encode(small.sample, info: small.info, quality: 90, app1: nil, blocks: blocks)
        XCTAssertEqual(again.withUnsafeBytes { $0.baseAddress }, firstAddress, "the block was not reused")
        XCTAssertEqual([UInt8](again), snapshot)
    }

    func testAFrameTheEncoderCannotReadIsAClearError() throws {
        let frame = try testFrame(format: "YUY2", width: 64, height: 48)
        XCTAssertThrowsError(try YUVJPEGEncoder.encode(frame.sample, info: frame.info, quality: 85, app1: nil, blocks: blocks)) { error in
            XCTAssertTrue("\(error)".contains("YUY2"), "\(error)")
        }
    }

    // MARK: Helpers

    /// Frame 0 of the SMPTE bars in `format`.
    private func testFrame(format: String, width: Int, height: Int) throws -> CapturedFrame {
        let pipeline = try Pipeline.launch("videotestsrc pattern=smpte num-buffers=1 "
                                           + "! video/x-raw,format=\(format),width=\(width),height=\(height) ! appsink name=sink")
        defer { pipeline.shutDown() }
        let sink = try XCTUnwrap(pipeline.element(named: "sink").flatMap(AppSink.init))
        try pipeline.setState(.playing)
        let sample = try XCTUnwrap(sink.pullSample(timeout: ClockTime(5_000_000_000)), "no \(format) frame")
        let caps = try XCTUnwrap(sample.caps)
        return CapturedFrame(sample: sample, presentationTime: 0, caps: caps, info: try XCTUnwrap(VideoInfo(caps: caps)))
    }

    /// PSNR of `jpeg` (after ffmpeg's `undo` filter) against the same frame as a PNG made by GStreamer.
    private func compare(_ jpeg: Data, with frame: CapturedFrame, named name: String, in folder: URL,
                         undo: String? = nil) throws -> Double {
        let jpegFile = folder.appendingPathComponent("\(name).jpg")
        try jpeg.write(to: jpegFile)
        // Both as RGB PNGs: ffmpeg's psnr filter would otherwise meet them in a YUV format of its choosing.
        let compared = folder.appendingPathComponent("\(name)-decoded.png")
        let decoded = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-i", jpegFile.path]
                                  + (undo.map { ["-vf", $0] } ?? []) + ["-pix_fmt", "rgb24", compared.path])
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
        let reference = folder.appendingPathComponent("\(name).png")
        let made = try runTool("/usr/bin/gst-launch-1.0", [
            "-q", "videotestsrc", "pattern=smpte", "num-buffers=1", "!",
            "video/x-raw,format=\(referenceFormat(frame.info.format)),width=\(frame.info.width),height=\(frame.info.height)", "!",
            "videoconvert", "!", "video/x-raw,format=RGB", "!", "pngenc", "!", "filesink", "location=\(reference.path)"])
        XCTAssertEqual(made.status, 0, made.stderr)
        return try psnr(compared, reference: reference)
    }

    /// I420 for subsampled YUV, Y444 for full chroma: videoconvert's RGB of NV12, Y42B or YUY2 frames
    /// differs from its RGB of the same bars in I420 by ~12 dB (other chroma upsampling), while the JPEGs
    /// of all of them are the same within 0.01 dB. RGB frames are their own reference: videotestsrc draws
    /// RGB bars in other colours than YUV ones.
    private func referenceFormat(_ format: String) -> String {
        switch format {
        case "Y444", "NV24": "Y444"
        case _ where YUVJPEGEncoder.layout(of: format) != nil || format == "YUY2" || format == "UYVY":
            format == "GRAY8" ? format : "I420"
        default: format
        }
    }
}
