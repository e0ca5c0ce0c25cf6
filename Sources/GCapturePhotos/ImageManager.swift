import Foundation
import GCapture
import GCaptureSupport

/// PhotoKit's PHImageContentMode.
public enum ImageContentMode: Int, Sendable {
    /// The whole picture within the target size.
    case aspectFit = 0
    /// The target size covered by the picture (which may overhang it).
    case aspectFill = 1
    public static let `default` = ImageContentMode.aspectFit
}

/// PhotoKit's PHImageRequestOptions, the parts a folder library has. Read when a request starts.
public final class ImageRequestOptions {
    /// JPEG quality of the image delivered, 1 to 100.
    public var quality = 80
    /// Accepted for ports; a folder library has no degraded stages: the one image delivered is the final one.
    public var allowSecondaryDegradedImage = false
    public init() {}
}

/// In a result handler's info: whether the image is a low-quality stage. Always false here.
public let ImageResultIsDegradedKey = "PHImageResultIsDegradedKey"
/// In a result handler's info: why there is no image.
public let ImageErrorKey = "PHImageErrorKey"

/// A picture the image manager made: a JPEG, upright (the photo's EXIF orientation applied), small enough for
/// where it is shown. What PhotoKit hands over as a UIImage; Linux has no UIImage, and a JPEG goes straight
/// to a web page, a file or a GUI toolkit.
public struct LibraryImage: Sendable, Equatable {
    public let jpegData: Data
    public let pixelWidth: Int
    public let pixelHeight: Int
}

/// Makes pictures of assets for display (PhotoKit's PHImageManager): a photo downsampled with libjpeg's
/// scaled decoding (a 48-megapixel photo is never decoded whole) and turned upright; a movie's poster from its
/// first frame through GStreamer. The work runs on queues of its own, never the caller's thread. Unchecked
/// only because a class that can be subclassed (PhotoKit's caching manager is one) cannot be checked: it
/// holds nothing mutable.
public class ImageManager: @unchecked Sendable {
    private static let shared = ImageManager()

    public static func `default`() -> ImageManager { shared }

    /// Photos decode here; one at a time per manager, so a gallery of a hundred thumbnails costs one core.
    private let decoding = BlockingQueue(label: "gcapture.photos.images")
    /// Movies one at a time too: each starts a decoder.
    private let posters = BlockingQueue(label: "gcapture.photos.posters")

    public init() {}

    /// The picture of `asset` for `targetSize` (pixels), as PhotoKit's `requestImage`: the result handler is
    /// called once, on a queue of the manager's, with nil and an error under `ImageErrorKey` when the file
    /// cannot be read. Returns an identifier (PhotoKit's PHImageRequestID).
    @discardableResult
    public func requestImage(for asset: Asset, targetSize: CGSize, contentMode: ImageContentMode, options: ImageRequestOptions?,
                             resultHandler: @escaping @Sendable (LibraryImage?, [String: any Sendable]?) -> Void) -> Int32 {
        let identifier = Self.nextRequest.withLock { value -> Int32 in
            value += 1
            return value
        }
        let quality = options?.quality ?? 80
        Task {
            do {
                let image = try await makeImage(for: asset, targetSize: targetSize, contentMode: contentMode, quality: quality)
                resultHandler(image, [ImageResultIsDegradedKey: false])
            } catch {
                resultHandler(nil, [ImageErrorKey: "\(error)", ImageResultIsDegradedKey: false])
            }
        }
        return identifier
    }

    private static let nextRequest = Locked<Int32>(0)

    /// The picture of `asset` for `targetSize`, awaited.
    public func requestImage(for asset: Asset, targetSize: CGSize, contentMode: ImageContentMode = .aspectFit,
                             options: ImageRequestOptions? = nil) async throws -> LibraryImage {
        try await makeImage(for: asset, targetSize: targetSize, contentMode: contentMode, quality: options?.quality ?? 80)
    }

    func makeImage(for asset: Asset, targetSize: CGSize, contentMode: ImageContentMode, quality: Int) async throws -> LibraryImage {
        let longest = Self.longestSide(of: asset, fitting: targetSize, contentMode: contentMode)
        switch asset.mediaType {
        case .image:
            return try await decoding.run { try Self.photo(asset, longestSide: longest, quality: quality) }
        case .video:
            return try await posters.run { try Self.poster(asset, longestSide: longest, quality: quality) }
        case .audio, .unknown:
            throw PhotoLibraryError.unsupportedResource(asset.fileURL, reason: "it has no picture")
        }
    }

    /// The longer side of the picture shown at `targetSize`, from the asset's shown size. PhotoKit's
    /// PHImageManagerMaximumSize (a negative size) asks for the whole picture.
    static func longestSide(of asset: Asset, fitting targetSize: CGSize, contentMode: ImageContentMode) -> Int {
        let width = Double(max(asset.pixelWidth, 1)), height = Double(max(asset.pixelHeight, 1))
        guard targetSize.width > 0, targetSize.height > 0 else { return Int(max(width, height)) }
        let fit = min(Double(targetSize.width) / width, Double(targetSize.height) / height)
        let fill = max(Double(targetSize.width) / width, Double(targetSize.height) / height)
        let scale = min(1, contentMode == .aspectFit ? fit : fill)
        return max(8, Int((max(width, height) * scale).rounded()))
    }

    private static func photo(_ asset: Asset, longestSide: Int, quality: Int) throws -> LibraryImage {
        guard let data = FileManager.default.contents(atPath: asset.fileURL.path) else {
            throw PhotoLibraryError.unreadable(asset.fileURL, reason: "the file is gone or unreadable")
        }
        let orientation = (try? JPEGHeader.read(data: data).orientation) ?? asset.exifOrientation
        do {
            let jpeg = try JPEGEncoder.thumbnail(ofJPEG: data, maximumDimension: longestSide, quality: quality, orientation: orientation)
            let header = try JPEGHeader.read(data: jpeg)
            return LibraryImage(jpegData: jpeg, pixelWidth: header.pixelWidth, pixelHeight: header.pixelHeight)
        } catch {
            throw PhotoLibraryError.unsupportedResource(asset.fileURL, reason: "\(error)")
        }
    }

    private static func poster(_ asset: Asset, longestSide: Int, quality: Int) throws -> LibraryImage {
        var generator = MovieThumbnailGenerator(url: asset.fileURL)
        let wide = asset.pixelWidth >= asset.pixelHeight || asset.pixelHeight == 0
        generator.width = wide ? longestSide : max(8, longestSide * max(asset.pixelWidth, 1) / max(asset.pixelHeight, 1))
        generator.quality = quality
        do {
            let jpeg = try generator.firstFrameJPEG()
            let header = try JPEGHeader.read(data: jpeg)
            return LibraryImage(jpegData: jpeg, pixelWidth: header.pixelWidth, pixelHeight: header.pixelHeight)
        } catch {
            throw PhotoLibraryError.unsupportedResource(asset.fileURL, reason: "no poster: \(error)")
        }
    }
}

/// A manager that keeps the pictures it made, at most `countLimit` of them (PhotoKit's
/// PHCachingImageManager): a scrolled-back gallery is served from memory. A picture is kept for its asset's
/// file as it was (path, size, modification): a changed file is made again.
public final class CachingImageManager: ImageManager, @unchecked Sendable {
    private struct Key: Hashable {
        var identifier: String
        var fileSize: Int
        var modified: Date?
        var longestSide: Int
        var quality: Int
    }

    public let countLimit: Int
    private let cache = Locked<(entries: [Key: LibraryImage], order: [Key])>(([:], []))

    public init(countLimit: Int = 500) {
        self.countLimit = max(1, countLimit)
        super.init()
    }

    override func makeImage(for asset: Asset, targetSize: CGSize, contentMode: ImageContentMode, quality: Int) async throws -> LibraryImage {
        let key = Key(identifier: asset.localIdentifier, fileSize: asset.fileSize, modified: asset.modificationDate,
                      longestSide: Self.longestSide(of: asset, fitting: targetSize, contentMode: contentMode), quality: quality)
        if let kept = cache.withLock({ $0.entries[key] }) { return kept }
        let made = try await super.makeImage(for: asset, targetSize: targetSize, contentMode: contentMode, quality: quality)
        cache.withLock { cache in
            if cache.entries.updateValue(made, forKey: key) == nil { cache.order.append(key) }
            while cache.order.count > countLimit { cache.entries[cache.order.removeFirst()] = nil }
        }
        return made
    }

    /// How many pictures are kept now.
    public var cachedImageCount: Int { cache.withLock { $0.entries.count } }

    public func stopCachingImagesForAllAssets() { cache.withLock { $0 = ([:], []) } }
}
