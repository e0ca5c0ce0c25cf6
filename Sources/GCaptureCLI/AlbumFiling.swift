import ArgumentParser
import Foundation
import GCapture
import GCapturePhotos
import GCaptureSupport

/// `--album` of `photo` and `record`: each file the command writes goes into that album of its folder's photo
/// library (made when missing), as a description's `outputs.photo.album` does for `run`. A file that cannot
/// be filed is still written; an `albumFailed` event says why, and the command exits non-zero once every file
/// has been written.
final class AlbumFiling: Sendable {
    let title: String
    let library: PhotoLibrary
    private let failures = Locked<[String]>([])

    /// Nil without an album.
    init?(title: String?, folder: URL) {
        guard let title else { return nil }
        self.title = title
        library = PhotoLibrary(folder: folder.standardizedFileURL)
    }

    func file(_ url: URL, events: EventPrinter) async {
        do {
            try await library.file(url, inAlbumTitled: title)
        } catch {
            failures.withLock { $0.append(url.path) }
            events.emit(["event": "albumFailed", "path": url.path, "album": title, "error": "\(error)"],
                        text: "\(url.path) was written but not put in album '\(title)': \(error)")
        }
    }

    /// What the exit says when a file could not be filed.
    var failure: CommandFailure? {
        let paths = failures.withLock { $0 }
        guard !paths.isEmpty else { return nil }
        return CommandFailure("\(paths.count == 1 ? paths[0] : "\(paths.count) files") written but not put in album '\(title)' (see above)")
    }

    /// The album's name, as `--album` takes it: 1 to 200 characters on one line, as a description's album.
    static func validate(_ title: String?) throws {
        guard let title else { return }
        let trimmed = title.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, title.count <= 200, !title.contains(where: \.isNewline) else {
            throw ValidationError("--album \"\(title)\": an album's name is 1 to 200 characters on one line")
        }
    }
}
