import GCaptureControl
import XCTest

/// The control protocol's typed model, which stdin's lines and the web page's JSON are both read into.
final class ControlModelTests: XCTestCase {
    func testAJSONLineAndPlainWordsReadIntoTheSameCommand() {
        let json = ControlParser.parse(#"{"id": 3, "command": "record", "action": "start", "path": "clip.mp4"}"#)
        XCTAssertEqual(json, .success(ControlRequest(id: .number(3), command: .recordStart(path: "clip.mp4"))))
        XCTAssertEqual(ControlParser.parse("record start clip.mp4"), .success(ControlRequest(command: .recordStart(path: "clip.mp4"))))
        XCTAssertEqual(ControlParser.parse(#"{"command": ["mirror", true]}"#), .success(ControlRequest(command: .mirror(true))))
    }

    func testAnAngleThatIsNotARightAngleIsRefusedWithTheAngles() {
        guard case .failure(let error) = ControlParser.parse("rotate 45") else { return XCTFail("rotate 45 was taken") }
        XCTAssertEqual(error.message, "rotate: the angle 45 is not one of 0, 90, 180 or 270 degrees")
        XCTAssertNil(error.id)
        XCTAssertEqual(ControlParser.parse(#"{"id": "a", "command": "rotate", "degrees": 90}"#),
                       .success(ControlRequest(id: .text("a"), command: .rotate(90))))
    }

    func testRepliesAndEventsAreSpeltAsOneJSONLineWithSortedKeys() {
        let failed = ControlResponse(id: .text("x"), .failure(ControlFailure("not recording")))
        XCTAssertFalse(failed.ok)
        XCTAssertEqual(String(decoding: failed.json, as: UTF8.self), #"{"error":"not recording","id":"x","ok":false}"#)
        let done = ControlResponse(id: nil, .success(ControlReply(fields: ["path": "/tmp/a.jpg"], text: "photo")))
        XCTAssertEqual(String(decoding: done.json, as: UTF8.self), #"{"ok":true,"path":"/tmp/a.jpg"}"#)
        let event = ControlEvent(name: "photo", fields: ["path": "/tmp/a.jpg", "width": 640], text: nil)
        XCTAssertEqual(event.json.map { String(decoding: $0, as: UTF8.self) }, #"{"event":"photo","path":"/tmp/a.jpg","width":640}"#)
    }
}
