import Foundation

/// PhotoKit's PHAssetMediaType.
public enum AssetMediaType: Int, Sendable, Codable, CaseIterable {
    case unknown = 0, image = 1, video = 2, audio = 3

    /// What a library holds a file as, by its name's extension: JPEG (.jpg, .jpeg) photos, MP4, MOV and MKV
    /// movies; nil for any other file (a Linux addition: a library is a folder of files).
    public init?(fileName: String) {
        guard let type = FolderScan.mediaType(ofName: fileName) else { return nil }
        self = type
    }
}

/// One photo or movie of a library: a file in its folder, as the index last read it. PhotoKit's PHAsset, a
/// value here: fetch again (or observe changes) to see what changed since.
public struct Asset: Sendable, Hashable, Identifiable {
    /// The file's path relative to the library's folder: stable across index rebuilds, so albums can name it.
    public let localIdentifier: String
    public let mediaType: AssetMediaType
    /// The picture as it is shown (EXIF orientation applied); 0 when the file does not say.
    public let pixelWidth: Int
    public let pixelHeight: Int
    /// When the photo was taken (EXIF), else when the file was last written; or the date a change request gave.
    public let creationDate: Date?
    /// When the file was last written.
    public let modificationDate: Date?
    /// Seconds; 0 for a photo.
    public let duration: TimeInterval
    public let isFavorite: Bool
    /// Linux's addition: where the asset's file is. PhotoKit hides it; a folder library has nothing to hide.
    public let fileURL: URL
    /// EXIF orientation of a photo's pixels (1 upright … 8), what the image manager turns them by.
    public let exifOrientation: Int
    public let fileSize: Int

    public var id: String { localIdentifier }
}

extension Asset {
    /// The assets of the shared library of one media type (PhotoKit's `fetchAssets(with:options:)`). Reads the
    /// index synchronously, as PhotoKit does: one indexed query.
    public static func fetchAssets(with mediaType: AssetMediaType, options: FetchOptions? = nil) -> FetchResult<Asset> {
        PhotoLibrary.shared().fetchAssets(with: mediaType, options: options)
    }

    /// The assets of the shared library that `options` select.
    public static func fetchAssets(with options: FetchOptions?) -> FetchResult<Asset> {
        PhotoLibrary.shared().fetchAssets(with: options)
    }

    /// The assets in an album of the shared library.
    public static func fetchAssets(in collection: AssetCollection, options: FetchOptions? = nil) -> FetchResult<Asset> {
        PhotoLibrary.shared().fetchAssets(in: collection, options: options)
    }

    /// The assets of the shared library with these identifiers.
    public static func fetchAssets(withLocalIdentifiers identifiers: [String], options: FetchOptions? = nil) -> FetchResult<Asset> {
        PhotoLibrary.shared().fetchAssets(withLocalIdentifiers: identifiers, options: options)
    }
}

/// PhotoKit's PHAssetCollectionType: a folder library has albums only.
public enum AssetCollectionType: Int, Sendable {
    case album = 1
}

/// PhotoKit's PHAssetCollectionSubtype, the part that applies: albums the user made.
public enum AssetCollectionSubtype: Int, Sendable {
    case albumRegular = 2
    case any = 0x7FFF_FFFF
}

/// An album (PhotoKit's PHAssetCollection): a title and an ordered list of assets. Albums live in the
/// library's album file beside the media (`.gcapture-library.json`), so an index rebuilt from the folder
/// keeps them.
public struct AssetCollection: Sendable, Hashable, Identifiable {
    public let localIdentifier: String
    public let localizedTitle: String?
    /// How many of the album's assets exist now.
    public let estimatedAssetCount: Int
    public let startDate: Date?
    public let assetCollectionType: AssetCollectionType = .album
    public let assetCollectionSubtype: AssetCollectionSubtype = .albumRegular

    public var id: String { localIdentifier }

    /// The albums of the shared library.
    public static func fetchAssetCollections(with type: AssetCollectionType, subtype: AssetCollectionSubtype,
                                             options: FetchOptions? = nil) -> FetchResult<AssetCollection> {
        PhotoLibrary.shared().fetchAssetCollections(with: type, subtype: subtype, options: options)
    }

    public static func fetchAssetCollections(withLocalIdentifiers identifiers: [String],
                                             options: FetchOptions? = nil) -> FetchResult<AssetCollection> {
        PhotoLibrary.shared().fetchAssetCollections(withLocalIdentifiers: identifiers, options: options)
    }
}
