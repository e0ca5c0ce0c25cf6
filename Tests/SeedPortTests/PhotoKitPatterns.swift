// The photokit seed's code (../shared/seeds/003_*.txt: library access levels; 002_*.txt: requesting an
// image, with deferred processing awareness), ported to GCapturePhotos by dropping the PH prefix. As in
// CameraManager.swift, the compiler checks that renaming is all a port needs; what differs is marked LINUX.
// PHAuthorizationStatus becomes PhotoLibrary.AuthorizationStatus (AVAuthorizationStatus already took the
// plain name, as CaptureDevice.AuthorizationStatus), and NSSortDescriptor(key:ascending:), which Foundation
// on Linux lacks, FetchOptions.SortDescriptor(key:ascending:). UIImage is LibraryImage (a JPEG).
import Foundation
import GCapturePhotos

// MARK: 003, Photo Library Access: the access-level switch

func requestPhotoLibraryAccess() async -> PhotoLibrary.AuthorizationStatus {
    let status = PhotoLibrary.authorizationStatus(for: .readWrite)
    switch status {
    case .notDetermined:
        return await PhotoLibrary.requestAuthorization(for: .readWrite)
    case .authorized, .limited:
        return status
    case .denied, .restricted:
        return status
    @unknown default:
        return status
    }
}

// MARK: Fetching the newest photos (PhotoKit's common recipe; the seed's gallery needs it)

func newestPhotos(limit: Int) -> FetchResult<Asset> {
    let options = FetchOptions()
    options.sortDescriptors = [FetchOptions.SortDescriptor(key: "creationDate", ascending: false)]  // LINUX
    options.fetchLimit = limit
    return Asset.fetchAssets(with: .image, options: options)
}

// MARK: 002, Fetching images with deferred processing awareness

final class GalleryCell: @unchecked Sendable {
    private let lock = NSLock()
    private var _temporary: [LibraryImage?] = [], _final: [LibraryImage?] = []
    var temporaryImages: [LibraryImage?] { lock.withLock { _temporary } }
    var finalImages: [LibraryImage?] { lock.withLock { _final } }
    func showTemporaryImage(_ image: LibraryImage?) { lock.withLock { _temporary.append(image) } }
    func showFinalImage(_ image: LibraryImage?) { lock.withLock { _final.append(image) } }

    func load(_ asset: Asset, targetSize: CGSize) {
        // Request with secondary degraded image for smoother UX
        let options = ImageRequestOptions()
        options.allowSecondaryDegradedImage = true  // New in iOS 17

        ImageManager.default().requestImage(
            for: asset,
            targetSize: targetSize,
            contentMode: .aspectFill,
            options: options
        ) { image, info in
            let isDegraded = info?[ImageResultIsDegradedKey] as? Bool ?? false

            if isDegraded {
                // First: Low quality (immediate)
                // Second: Medium quality (new - while processing)
                // Third callback will be final quality
                self.showTemporaryImage(image)
            } else {
                // Final quality - processing complete
                self.showFinalImage(image)
            }
        }
    }
}

/// TEST: the library the seeds' `PhotoLibrary.shared()` opens, a fresh folder for this test process (not made
/// yet, so the access switch finds it `.notDetermined`).
let seedLibraryFolder: URL = {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("seed-library-\(UUID().uuidString)/photos")
    setenv("GCAPTURE_PHOTO_LIBRARY", folder.path, 1)
    return folder
}()
