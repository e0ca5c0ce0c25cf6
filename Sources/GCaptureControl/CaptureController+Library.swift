import Foundation
import GCapturePhotos

extension CaptureController {
    // MARK: The photo library (`outputs.photo.album`)

    /// Puts a photo the run wrote into the album of the photo folder's library (made when missing). A failure
    /// is an event naming the photo and the album, never a lost photo: the file is written either way.
    func file(_ photo: URL, inAlbum title: String) async {
        let folder = settings.photoFolder.standardizedFileURL
        let library = photoLibraries[folder] ?? PhotoLibrary(folder: folder)
        photoLibraries[folder] = library
        do {
            try await library.file(photo, inAlbumTitled: title)
        } catch {
            let path = photo.standardizedFileURL.path
            events.emit("photoAlbumFailed", ["path": path, "album": title, "error": "\(error)"],
                        text: "photo \(path) not put in album '\(title)': \(error)")
        }
    }
}
