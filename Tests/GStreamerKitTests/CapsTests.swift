import GStreamerKit
import XCTest

final class CapsTests: XCTestCase {
    func testStructuresDecodeListsRangesAndFractions() throws {
        let caps = try Caps("video/x-raw, format=(string){ NV12, YUY2 }, width=(int)[ 16, 1920 ], height=(int)1080, "
                            + "framerate=(fraction){ 30/1, 25/2 }; image/jpeg, width=(int)640, height=(int)480, "
                            + "framerate=(fraction)[ 0/1, 60/1 ]")
        let structures = caps.structures
        XCTAssertEqual(structures.count, 2)
        XCTAssertEqual(structures[0].name, "video/x-raw")
        XCTAssertEqual(structures[0]["format"]?.alternatives, [.string("NV12"), .string("YUY2")])
        XCTAssertEqual(structures[0]["width"], .intRange(16...1920))
        XCTAssertEqual(structures[0]["height"], .int(1080))
        XCTAssertEqual(structures[0]["framerate"]?.alternatives, [.fraction(Fraction(30, 1)), .fraction(Fraction(25, 2))])
        XCTAssertEqual(structures[1]["framerate"], .fractionRange(Fraction(0, 1)...Fraction(60, 1)))
        XCTAssertFalse(caps.isFixed)
    }

    func testInvalidCapsAreAnError() {
        XCTAssertThrowsError(try Caps("this is, not=caps((")) { error in
            XCTAssertEqual((error as? GStreamerError)?.kind, .caps)
        }
    }

    func testVideoInfoDescribesPlanes() throws {
        let info = try XCTUnwrap(VideoInfo(caps: Caps("video/x-raw,format=NV12,width=320,height=240,framerate=30/1")))
        XCTAssertEqual(info.planeCount, 2)
        XCTAssertEqual(info.planeHeights, [240, 120])
        XCTAssertEqual(info.planeRowBytes, [320, 320])
        XCTAssertEqual(info.size, 320 * 240 * 3 / 2)
        XCTAssertEqual(info.frameRate, Fraction(30, 1))
    }
}
