import Foundation
import GCaptureSupport

/// Stands for an asset or album a change block creates, before it exists: its identifier is known once
/// `performChanges` has finished (PhotoKit's PHObjectPlaceholder). It can be added to an album in the same
/// block.
public final class ObjectPlaceholder: Sendable {
    private let assigned = Locked<String?>(nil)

    /// The created object's identifier; empty until the change has been made.
    public var localIdentifier: String { assigned.withLock { $0 ?? "" } }

    func assign(_ identifier: String) { assigned.withLock { $0 = identifier } }
}

/// PhotoKit's PHAssetResourceType, the kinds a folder library holds.
public enum AssetResourceType: Int, Sendable {
    case photo = 1
    case video = 2
    /// A deferred photo's proxy (CaptureDeferredPhotoProxy's JPEG). Linux has no Photos app to finish it
    /// later: the library keeps it as a photo, and the engine's `finishDeferredPhotosWhenIdle` writes the
    /// finished one.
    case photoProxy = 19
}

/// PhotoKit's PHAssetResourceCreationOptions.
public struct AssetResourceCreationOptions: Sendable {
    /// The file's name in the library (made unique with "-2", "-3" … when taken); else the source's name.
    public var originalFilename: String?
    /// Move the source file into the library instead of copying it.
    public var shouldMoveFile = false

    public init(originalFilename: String? = nil, shouldMoveFile: Bool = false) {
        self.originalFilename = originalFilename
        self.shouldMoveFile = shouldMoveFile
    }
}

/// A change to one asset: its favourite mark or creation date, or, made by a class method, a new asset or a
/// deletion (PhotoKit's PHAssetChangeRequest). Only inside `PhotoLibrary.performChanges`.
public class AssetChangeRequest {
    let target: String?
    var resources: [(type: AssetResourceType, source: ChangePlan.Source, options: AssetResourceCreationOptions)] = []
    let placeholder: ObjectPlaceholder?

    public var isFavorite: Bool
    /// When set, the asset's creation date from now on, whatever its file says.
    public var creationDate: Date? {
        didSet { creationDateWasSet = true }
    }
    var creationDateWasSet = false

    /// A change to `asset`: set `isFavorite` or `creationDate` on it.
    public init(for asset: Asset) {
        target = asset.localIdentifier
        placeholder = nil
        isFavorite = asset.isFavorite
        creationDate = asset.creationDate
        ChangeBlock.register(self, as: "AssetChangeRequest(for:)")
    }

    /// The asset this request creates; nil for a change to an existing one.
    public var placeholderForCreatedAsset: ObjectPlaceholder? { placeholder }

    /// A new photo, copied from the JPEG at `fileURL`.
    public class func creationRequestForAssetFromImage(atFileURL fileURL: URL) -> Self? {
        let request = Self(creating: ())
        request.resources.append((.photo, .file(fileURL), AssetResourceCreationOptions()))
        return request
    }

    /// A new movie, copied from `fileURL`.
    public class func creationRequestForAssetFromVideo(atFileURL fileURL: URL) -> Self? {
        let request = Self(creating: ())
        request.resources.append((.video, .file(fileURL), AssetResourceCreationOptions()))
        return request
    }

    /// Deletes the assets' files (and their places in albums).
    public class func deleteAssets(_ assets: some Sequence<Asset>) {
        ChangeBlock.delete(assets: assets.map(\.localIdentifier))
    }

    required init(creating: Void) {
        target = nil
        placeholder = ObjectPlaceholder()
        isFavorite = false
        ChangeBlock.register(self, as: "a creation request")
    }
}

/// A new asset from a resource (PhotoKit's PHAssetCreationRequest): `forAsset()` then `addResource`.
public final class AssetCreationRequest: AssetChangeRequest {
    public class func forAsset() -> AssetCreationRequest { AssetCreationRequest(creating: ()) }

    /// The asset's photo or movie, from a file.
    public func addResource(with type: AssetResourceType, fileURL: URL, options: AssetResourceCreationOptions?) {
        resources.append((type, .file(fileURL), options ?? AssetResourceCreationOptions()))
    }

    /// The asset's photo or movie, from bytes (a JPEG a photo output delivered, say).
    public func addResource(with type: AssetResourceType, data: Data, options: AssetResourceCreationOptions?) {
        resources.append((type, .data(data), options ?? AssetResourceCreationOptions()))
    }
}

/// A new album, or a change to one: its title and its assets (PhotoKit's PHAssetCollectionChangeRequest).
public final class AssetCollectionChangeRequest {
    enum Target { case identifier(String), titled(String) }

    let target: Target?
    let placeholder: ObjectPlaceholder?
    public var title: String
    var edits: [ChangePlan.AlbumEdit.Step] = []

    /// A change to `collection`; nil if it is not an album of the library (PhotoKit's failable init).
    public init?(for collection: AssetCollection) {
        target = .identifier(collection.localIdentifier)
        placeholder = nil
        title = collection.localizedTitle ?? ""
        ChangeBlock.register(self, as: "AssetCollectionChangeRequest(for:)")
    }

    private init(title: String, orExisting: Bool = false) {
        target = orExisting ? .titled(title) : nil
        placeholder = ObjectPlaceholder()
        self.title = title
        ChangeBlock.register(self, as: "AssetCollectionChangeRequest.creationRequestForAssetCollection")
    }

    /// Linux's addition: the album titled `title`, made when the library has none, found and made in the same
    /// step as the change (two runs filing photos at once make one album, not two).
    public class func forAssetCollection(titled title: String) -> AssetCollectionChangeRequest {
        AssetCollectionChangeRequest(title: title, orExisting: true)
    }

    /// Linux's addition: adds files already in the library's folder, by their paths in it (what another
    /// program wrote there, or a capture output); they are indexed with the change.
    public func addAssets(withLocalIdentifiers identifiers: [String]) { edits.append(.add(identifiers.map { .asset($0) })) }

    public class func creationRequestForAssetCollection(withTitle title: String) -> AssetCollectionChangeRequest {
        AssetCollectionChangeRequest(title: title)
    }

    public var placeholderForCreatedAssetCollection: ObjectPlaceholder? { placeholder }

    public class func deleteAssetCollections(_ collections: some Sequence<AssetCollection>) {
        ChangeBlock.delete(albums: collections.map(\.localIdentifier))
    }

    /// Adds assets at the album's end (an asset already in it stays where it is).
    public func addAssets(_ assets: some Sequence<Asset>) { edits.append(.add(assets.map { .asset($0.localIdentifier) })) }
    /// Adds assets this block creates.
    public func addAssets(_ placeholders: [ObjectPlaceholder]) { edits.append(.add(placeholders.map { .placeholder($0) })) }
    public func removeAssets(_ assets: some Sequence<Asset>) { edits.append(.remove(assets.map(\.localIdentifier))) }
}
