import Foundation

/// What the library knows that its media files cannot say: the albums, the favourites, and creation dates
/// set by change requests. It is a small JSON file beside the media (`.gcapture-library.json`), replaced
/// atomically on each change, so the index can always be rebuilt from the folder without losing any of it.
struct AlbumFile: Codable, Equatable, Sendable {
    struct Album: Codable, Equatable, Sendable {
        var identifier: String
        var title: String
        var created: Date
        /// Asset identifiers (paths in the folder), in the album's order.
        var assets: [String]
    }

    static let name = ".gcapture-library.json"

    var version = 1
    var albums: [Album] = []
    var favorites: Set<String> = []
    var creationDates: [String: Date] = [:]

    /// The album file of `folder`; an empty one when there is none yet. A file that cannot be read is an
    /// error, never silently replaced: it holds what nothing else holds.
    static func read(in folder: URL) throws -> AlbumFile {
        let url = folder.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            if FileManager.default.fileExists(atPath: url.path) { throw PhotoLibraryError.unreadable(url, reason: "permission denied") }
            return AlbumFile()
        }
        do {
            return try decoder.decode(AlbumFile.self, from: data)
        } catch {
            throw PhotoLibraryError.unreadable(url, reason: "not a gcapture album file (\(error.localizedDescription))")
        }
    }

    /// Writes the file whole and renames it into place: a crash leaves the old file or the new, never half.
    func write(in folder: URL) throws {
        let url = folder.appendingPathComponent(Self.name)
        do {
            try Self.encoder.encode(self).write(to: url, options: .atomic)
        } catch {
            throw PhotoLibraryError.unwritable(url, reason: error.localizedDescription)
        }
    }

    /// Forgets an asset that was deleted.
    mutating func remove(asset identifier: String) {
        favorites.remove(identifier)
        creationDates[identifier] = nil
        for index in albums.indices { albums[index].assets.removeAll { $0 == identifier } }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()
}
