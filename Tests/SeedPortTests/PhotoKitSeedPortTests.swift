import Foundation
import GCapture
import GCapturePhotos
import XCTest

/// Runs the ported PhotoKit patterns (PhotoKitPatterns.swift) against the real library of this process.
final class PhotoKitSeedPortTests: XCTestCase {
    override func setUp() {
        super.setUp()
        _ = seedLibraryFolder
    }

    private func waitUntil(_ what: String, timeout: TimeInterval = 10, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else { return XCTFail("timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func testTheAccessSwitchMakesTheLibraryThenSavedCapturesAreFetchedNewestFirstWithThumbnails() async throws {
        let status = await requestPhotoLibraryAccess()
        XCTAssertEqual(status, .authorized)
        XCTAssertTrue(FileManager.default.fileExists(atPath: seedLibraryFolder.path), "the request made the library's folder")
        XCTAssertEqual(PhotoLibrary.authorizationStatus(for: .addOnly), .authorized)

        // Saving a capture: the test camera's photos, saved with PhotoKit's creation request.
        let session = CaptureSession()
        let camera = CaptureDevice.makeTestCamera(uniqueID: "photokit-seed",
                                                  options: .init(position: .back, sizes: [.init(width: 640, height: 480)], maxFrameRate: 30))
        session.beginConfiguration()
        session.addInput(try CaptureDeviceInput(device: camera))
        let output = CapturePhotoOutput()
        session.addOutput(output)
        session.commitConfiguration()
        try await session.start()
        defer { session.stopRunning() }
        let before = PhotoLibrary.shared().countAssets()
        var saved: [String] = []
        for _ in 0..<3 {
            let photo = try await output.capturePhoto(with: CapturePhotoSettings())
            let data = try XCTUnwrap(photo.fileDataRepresentation())
            var placeholder: ObjectPlaceholder?
            try await PhotoLibrary.shared().performChanges {
                let request = AssetCreationRequest.forAsset()
                request.addResource(with: .photo, data: data, options: nil)
                placeholder = request.placeholderForCreatedAsset
            }
            saved.append(try XCTUnwrap(placeholder?.localIdentifier))
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(PhotoLibrary.shared().countAssets(), before + 3)

        let newest = newestPhotos(limit: 2)
        XCTAssertEqual(newest.map(\.localIdentifier), [saved[2], saved[1]], "newest first, two of them")
        let asset = try XCTUnwrap(newest.firstObject)
        XCTAssertEqual([asset.pixelWidth, asset.pixelHeight], [640, 480])

        let cell = GalleryCell()
        cell.load(asset, targetSize: CGSize(width: 100, height: 100))
        try await waitUntil("the thumbnail arrives") { !cell.finalImages.isEmpty }
        XCTAssertEqual(cell.temporaryImages.count, 0)
        let thumbnail = try XCTUnwrap(cell.finalImages.first ?? nil)
        XCTAssertEqual([thumbnail.pixelWidth, thumbnail.pixelHeight], [133, 100], "aspect fill of 100x100 from 640x480")
    }
}
