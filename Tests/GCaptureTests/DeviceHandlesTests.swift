import Foundation
@testable import GCapture
import XCTest

/// The handles a session left on a camera node, found once when it leaves the camera and checked by number
/// before it opens the camera again (a file stands in for the node: the check reads /proc/self/fd the same way).
final class DeviceHandlesTests: XCTestCase {
    func testTheHandlesFoundOnANodeCountUntilClosedAndNotOnceTheirNumberIsReused() throws {
        let folder = try temporaryFolder()
        let node = DeviceHandles.resolvedNode(folder.appendingPathComponent("video9").path)
        let other = folder.appendingPathComponent("other").path
        XCTAssertTrue(FileManager.default.createFile(atPath: node, contents: Data()))
        XCTAssertTrue(FileManager.default.createFile(atPath: other, contents: Data()))
        XCTAssertEqual(DeviceHandles.descriptors(on: node), [], "nothing open on the node yet")

        let first = open(node, O_RDONLY), second = open(node, O_RDONLY)
        XCTAssertGreaterThanOrEqual(first, 0)
        let found = DeviceHandles.descriptors(on: node)
        XCTAssertEqual(Set(found), [first, second])
        XCTAssertTrue(DeviceHandles.areOpen(found, on: node))

        close(first)
        XCTAssertTrue(DeviceHandles.areOpen(found, on: node), "one of them is still open")
        close(second)
        XCTAssertFalse(DeviceHandles.areOpen(found, on: node))

        // The lowest free number goes to the next open: another file now has the first one's number.
        let reused = open(other, O_RDONLY)
        defer { close(reused) }
        XCTAssertEqual(reused, min(first, second))
        XCTAssertFalse(DeviceHandles.areOpen(found, on: node), "a number reused for another file is not the node's handle")
        XCTAssertNil(DeviceHandles.waitUntilClosed([reused], on: other, within: .milliseconds(60)), "still open after the limit")
        XCTAssertNotNil(DeviceHandles.waitUntilClosed(found, on: node, within: .milliseconds(60)))
    }

    /// A link (as /dev/v4l/by-id names a camera) leads to the node it names.
    func testANodeIsNamedByWhereItsLinkLeads() throws {
        let folder = try temporaryFolder()
        let node = folder.appendingPathComponent("video3").path
        XCTAssertTrue(FileManager.default.createFile(atPath: node, contents: Data()))
        let link = folder.appendingPathComponent("usb-camera-video-index0").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: node)
        XCTAssertEqual(DeviceHandles.resolvedNode(link), DeviceHandles.resolvedNode(node))
        XCTAssertEqual(DeviceHandles.resolvedNode("/no/such/node"), "/no/such/node", "a path that leads nowhere stays as it is")
    }
}
