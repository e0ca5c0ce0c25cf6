import Foundation
@testable import GCaptureDescription
import XCTest

/// `--safe` and the preview's sink (issue 24): a gst-launch fragment there could write files anywhere or
/// send the camera onto the network, so under --safe the sink is one display sink by name. The malformed
/// files safe-preview-* check `gcapture inspect --safe` itself; this checks the reader's every case.
final class SafeDescriptionFileTests: XCTestCase {
    private func errors(sink: String, safe: Bool = true) -> [DescriptionDiagnostic] {
        // The sink's value starts at line 5, column 11.
        let yaml = "version: 1\ncamera: test\noutputs:\n  preview:\n    sink: \(sink)\n"
        return DescriptionReader.read(yaml, file: "kiosk.yaml", safe: safe).errors
    }

    func testUnderSafeASinkThatCouldWriteOrSendIsAnErrorAtItsValue() {
        let refused: [(sink: String, says: String)] = [
            (#""jpegenc ! filesink location=/tmp/escape.jpg""#, "chain of GStreamer elements"),
            ("xvimagesink ! fakesink", "chain of GStreamer elements"),
            ("filesink location=/tmp/escape.raw", "'filesink' is not a display sink"),
            ("multifilesink location=/tmp/frame-%05d.raw", "'multifilesink' is not a display sink"),
            ("tcpserversink host=0.0.0.0 port=5000", "'tcpserversink' is not a display sink"),
            ("udpsink host=198.51.100.7 port=5000", "'udpsink' is not a display sink"),
            ("autovideosink location=/tmp/escape.raw", "the property 'location' is not allowed"),
            ("kmssink driver-name=vc4 bus-id=/dev/dri/card1", "the property 'driver-name' is not allowed"),
            ("waylandsink display=/run/user/0/wayland-1", "the property 'display' is not allowed"),
            ("ximagesink sync=false display=attacker.example:0", "the property 'display' is not allowed"),
            ("fakesink sync=\"false\"", "'sync=\"false\"' is not a plain property=value"),
            ("fakesink sync", "'sync' is not a plain property=value"),
            ("ximagesink,sync=false", "'ximagesink,sync=false' is not a display sink"),
        ]
        for (sink, says) in refused {
            let found = errors(sink: sink)
            XCTAssertEqual(found.count, 1, "\(sink): \(found)")
            XCTAssertEqual(found.first.map { [$0.position.line, $0.position.column] }, [5, 11], sink)
            XCTAssertTrue(found.first?.message.contains(says) == true, "\(sink): \(found.first?.message ?? "no error")")
            XCTAssertTrue(found.first?.message.hasPrefix("outputs.preview.sink") == true, "\(sink): \(found)")
            XCTAssertEqual(errors(sink: sink, safe: false).count, 0, "without --safe, \(sink) is the machine check's")
        }
    }

    func testUnderSafeADisplaySinkByNameIsAccepted() {
        for sink in ["auto", "autovideosink", "fakesink", "ximagesink", "xvimagesink", "glimagesink", "waylandsink", "kmssink",
                     "ximagesink sync=false", "fakesink sync=false async=false", "xvimagesink force-aspect-ratio=true qos=false",
                     "  glimagesink   sync=false  "] {
            XCTAssertEqual(errors(sink: "\"\(sink)\"").map(\.message), [], sink)
        }
    }
}
