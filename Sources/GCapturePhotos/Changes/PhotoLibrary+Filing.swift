import Foundation

extension PhotoLibrary {
    /// Puts a file a capture wrote into the library's folder into the album titled `title` (made when
    /// missing): the engine's outputs write files, and this files them (a Linux addition; on iOS a capture is
    /// saved with a creation request, which copies it). Throws when the file is not in the library's folder.
    public func file(_ url: URL, inAlbumTitled title: String) async throws {
        let path = url.standardizedFileURL.path
        guard path.hasPrefix(folder.path + "/") else {
            throw PhotoLibraryError.unsupportedResource(url, reason: "it is not in the library's folder \(folder.path)")
        }
        let identifier = String(path.dropFirst(folder.path.count + 1))
        try await performChanges {
            AssetCollectionChangeRequest.forAssetCollection(titled: title).addAssets(withLocalIdentifiers: [identifier])
        }
    }
}
