@testable import GCapture
import GStreamerKit
import XCTest

final class FormatSelectionTests: XCTestCase {
    /// What GStreamer reports for vivid's webcam input (a subset), as the device monitor gives it.
    let vividCaps = """
        video/x-raw, format=(string)YUY2, width=(int)640, height=(int)480, framerate=(fraction){ 25/1, 15/1, 5/1 }; \
        video/x-raw, format=(string)YUY2, width=(int)1280, height=(int)720, framerate=(fraction){ 25/2, 5/1 }; \
        video/x-raw, format=(string)NV12, width=(int)640, height=(int)480, framerate=(fraction){ 25/1, 15/1 }; \
        video/x-raw, format=(string)YUY2, width=(int)1920, height=(int)1080, framerate=(fraction){ 5/1, 1/1 }; \
        image/jpeg, width=(int)1280, height=(int)720, framerate=(fraction){ 30/1, 15/1 }; \
        video/x-bayer, format=(string)bggr, width=(int)640, height=(int)480, framerate=(fraction)25/1
        """

    func formats() throws -> [CaptureDevice.Format] { FormatReader.formats(from: try Caps(vividCaps)) }

    func testReadsFormatsFromCaps() throws {
        let formats = try formats()
        XCTAssertEqual(formats.count, 5, "bayer is skipped: \(formats)")
        let hd = try XCTUnwrap(formats.first { $0.pixelFormat == "YUY2" && $0.width == 1280 })
        XCTAssertEqual(hd.maxFrameRate, 12.5)
        XCTAssertTrue(formats.contains { $0.pixelFormat == "MJPG" && $0.maxFrameRate == 30 })
    }

    func testRangesBecomeStandardSizes() throws {
        let formats = FormatReader.formats(from: try Caps("video/x-raw,format=NV12,width=[16,1920],height=[16,1080],framerate=[0/1,60/1]"))
        XCTAssertEqual(formats.map(\.dimensionsDescription), ["320x240", "640x480", "1280x720", "1920x1080"])
        XCTAssertEqual(formats[0].videoSupportedFrameRateRanges.first?.minFrameRate, 1)
    }

    func testGreyOnlyNodesAreNotCameras() throws {
        let infrared = FormatReader.formats(from: try Caps("video/x-raw,format=GRAY8,width=640,height=360,framerate=30/1"))
        XCTAssertTrue(FormatReader.isGreyOnly(infrared))
        XCTAssertFalse(FormatReader.isGreyOnly(try formats()))
    }

    func testPresetsPickRealFormats() throws {
        let formats = try formats()
        let vga = try FormatSelector.select(.vga640x480, from: formats, deviceName: "vivid")
        XCTAssertEqual(vga.caps, "video/x-raw,format=NV12,width=640,height=480,framerate=25/1")
        // 720p: MJPEG reaches 30 fps where raw YUY2 manages 12.5.
        let hd = try FormatSelector.select(.hd1280x720, from: formats, deviceName: "vivid")
        XCTAssertEqual(hd.caps, "image/jpeg,width=1280,height=720,framerate=30/1")
        let photo = try FormatSelector.select(.photo, from: formats, deviceName: "vivid")
        XCTAssertEqual(photo.format.width, 1920)
        XCTAssertEqual(try FormatSelector.select(.high, from: formats, deviceName: "vivid").format.height, 720)
        XCTAssertEqual(try FormatSelector.select(.low, from: formats, deviceName: "vivid").format.width, 640)
    }

    func testImpossiblePresetSaysWhatTheDeviceOffers() throws {
        XCTAssertThrowsError(try FormatSelector.select(.hd4K3840x2160, from: try formats(), deviceName: "/dev/video0")) { error in
            XCTAssertEqual("\(error)", "/dev/video0 offers 640x480, 1280x720, 1920x1080 (YUY2, NV12, MJPG); preset hd4K3840x2160 needs 3840x2160")
        }
    }
}
