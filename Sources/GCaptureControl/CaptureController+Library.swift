import Foundation
import GCapturePhotos

extension CaptureController {
    // MARK: The photo library (`outputs.photo.album`)

    /// Puts a photo the run wrote into the album of the photo folder's library (made when missing). A failure
    /// is an event naming the photo and the album, never a lost photo: the file is written either way.
    func file(_ photo: URL, inAlbum title: String) async {
        let folder = settings.photoFolder.standardizedFileURL
        let path = photo.standardizedFileURL.path
        guard path.hasPrefix(folder.path + "/") else {
            events.emit("photoAlbumFailed", ["path": path, "album": title, "error": "the photo is not in the photo folder \(folder.path)"],
                        text: "photo \(path) not put in album '\(title)': it is not in the photo folder \(folder.path)")
            return
        }
        let library = photoLibraries[folder] ?? PhotoLibrary(folder: folder)
        photoLibraries[folder] = library
        let identifier = String(path.dropFirst(folder.path.count + 1))
        do {
            try await library.performChanges {
                AssetCollectionChangeRequest.forAssetCollection(titled: title).addAssets(withLocalIdentifiers: [identifier])
            }
        } catch {
            events.emit("photoAlbumFailed", ["path": path, "album": title, "error": "\(error)"],
                        text: "photo \(path) not put in album '\(title)': \(error)")
        }
    }
}
