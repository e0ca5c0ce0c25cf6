import Foundation
@testable import GCapture
import XCTest

/// A photo never replaces a file (issue 24), as a recording never does: the library refuses one already at
/// the photo's URL with `fileAlreadyExists`, in the step that puts the photo in place.
final class PhotoFileTests: XCTestCase {
    private let old = Data("the user's own picture".utf8)
    private let photo = Data("a new photo".utf8)

    func testTheWriteNeverReplacesAFileOrFollowsALinkButAFinalReplacesItsProxy() throws {
        let folder = try temporaryFolder()
        let fresh = folder.appendingPathComponent("fresh.jpg")
        try PhotoProcessor.writeAtomically(photo, to: .init(fresh))
        XCTAssertEqual(try Data(contentsOf: fresh), photo)

        let existing = folder.appendingPathComponent("existing.jpg")
        try old.write(to: existing)
        XCTAssertThrowsError(try PhotoProcessor.writeAtomically(photo, to: .init(existing))) {
            XCTAssertEqual($0 as? CaptureError, .fileAlreadyExists(path: existing.path))
        }
        XCTAssertEqual(try Data(contentsOf: existing), old, "the existing file was replaced")

        // A link to where nothing is yet: writing through it would create its target, wherever that is.
        let target = try temporaryFolder().appendingPathComponent("target.jpg")
        let link = folder.appendingPathComponent("link.jpg")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        XCTAssertThrowsError(try PhotoProcessor.writeAtomically(photo, to: .init(link))) {
            XCTAssertEqual($0 as? CaptureError, .fileAlreadyExists(path: link.path))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.path), "written through the link")

        // A deferred photo's final replaces its own proxy.
        try PhotoProcessor.writeAtomically(photo, to: .init(existing), replacing: true)
        XCTAssertEqual(try Data(contentsOf: existing), photo)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: folder.path)), ["fresh.jpg", "existing.jpg", "link.jpg"],
                       "a temporary file was left")
    }

    func testACaptureToAnExistingFileFailsAndKeepsIt() async throws {
        let folder = try temporaryFolder()
        let existing = folder.appendingPathComponent("existing.jpg")
        try old.write(to: existing)
        let photos = CapturePhotoOutput()
        let session = try makeSession(outputs: [photos])
        try await session.start()
        do {
            _ = try await within(10, "the capture") { try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: existing)) }
            XCTFail("a photo replaced \(existing.path)")
        } catch {
            XCTAssertEqual(error as? CaptureError, .fileAlreadyExists(path: existing.path))
        }
        XCTAssertEqual(try Data(contentsOf: existing), old)
        await session.stop()
    }
}
