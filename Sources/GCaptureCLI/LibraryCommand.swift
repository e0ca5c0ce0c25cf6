import ArgumentParser
import Foundation
import GCapture
import GCapturePhotos

/// `gcapture library`: the photo library (GCapturePhotos) from the shell: list, import, export, albums.
struct LibraryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "library",
        abstract: "List, import and export the photo library's photos and movies, and keep its albums.",
        discussion: """
            The library is a folder (--library, else $GCAPTURE_PHOTO_LIBRARY, else ~/Pictures/gcapture): its files are \
            the truth, an index beside them makes listing fast, and albums and favourites live in a file beside them too. \
            Files other programs add or delete are picked up at the start of every library command.
            """,
        subcommands: [LibraryList.self, LibraryImport.self, LibraryExport.self, LibraryAlbum.self])
}

struct LibraryOptions: ParsableArguments {
    @Option(name: .customLong("library"), help: ArgumentHelp("The library's folder.", valueName: "folder"))
    var folder: String?

    @Flag(help: "Print JSON instead of lines.")
    var json = false

    /// The library, brought up to date with its folder.
    func open() async throws -> PhotoLibrary {
        let library = folder.map { PhotoLibrary(folder: URL(fileURLWithPath: $0)) } ?? PhotoLibrary.shared()
        if library.authorizationStatus(for: .readWrite) == .notDetermined { return library }
        guard library.authorizationStatus(for: .readWrite) == .authorized else {
            throw CommandFailure(library.authorizationAdvice(for: .readWrite) ?? "\(library.folder.path) cannot be used")
        }
        try await library.refresh()
        return library
    }

    /// The assets `ids` name, in the library's order; an id it does not have is named in the error.
    func assets(_ ids: [String], in library: PhotoLibrary) throws -> [Asset] {
        let assets = Array(library.fetchAssets(withLocalIdentifiers: ids))
        let missing = Set(ids).subtracting(assets.map(\.localIdentifier))
        if !missing.isEmpty { throw CommandFailure("the library has no \(missing.sorted().joined(separator: ", "))") }
        return assets
    }

    func album(named title: String, in library: PhotoLibrary) throws -> AssetCollection {
        let albums = library.fetchAssetCollections().filter { $0.localizedTitle == title || $0.localIdentifier == title }
        guard let album = albums.first else {
            let known = library.fetchAssetCollections().compactMap(\.localizedTitle)
            throw CommandFailure("the library has no album '\(title)'" + (known.isEmpty ? "" : "; its albums: \(known.joined(separator: ", "))"))
        }
        return album
    }

    func print<Value: Encodable>(_ value: Value, lines: () -> [String]) throws {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            Swift.print(String(decoding: try encoder.encode(value), as: UTF8.self))
        } else {
            for line in lines() { Swift.print(line) }
        }
    }
}

/// An asset as `library list --json` prints it.
struct AssetSummary: Encodable {
    var id: String
    var mediaType: String
    var path: String
    var pixelWidth: Int
    var pixelHeight: Int
    var creationDate: Date?
    var duration: Double
    var favorite: Bool
    var bytes: Int

    init(_ asset: Asset) {
        id = asset.localIdentifier
        mediaType = asset.mediaType == .video ? "video" : asset.mediaType == .image ? "photo" : "other"
        path = asset.fileURL.path
        pixelWidth = asset.pixelWidth
        pixelHeight = asset.pixelHeight
        creationDate = asset.creationDate
        duration = asset.duration
        favorite = asset.isFavorite
        bytes = asset.fileSize
    }

    var line: String {
        let size = "\(pixelWidth)x\(pixelHeight)"
        let length = mediaType == "video" ? String(format: " %.1fs", duration) : ""
        return "\(id)\t\(mediaType)\t\(size)\(length)\t\(creationDate.map { ISO8601DateFormatter().string(from: $0) } ?? "-")\(favorite ? "\t★" : "")"
    }
}

enum LibraryMediaFilter: String, ExpressibleByArgument, CaseIterable {
    case all, photos, videos
}

struct LibraryList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the library's photos and movies, newest first.")

    @OptionGroup var library: LibraryOptions
    @Option(help: "all, photos or videos.") var media: LibraryMediaFilter = .all
    @Flag(help: "Only favourites.") var favorites = false
    @Option(help: ArgumentHelp("Only this album's assets, in its order.", valueName: "album")) var album: String?
    @Option(help: "At most this many.") var limit: Int?
    @Flag(help: "Oldest first.") var oldestFirst = false

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1, not \(limit)") }
    }

    func run() async throws {
        let opened = try await library.open()
        let options = FetchOptions()
        var conditions: [AssetPredicate] = []
        if media == .photos { conditions.append(.mediaType(.image)) }
        if media == .videos { conditions.append(.mediaType(.video)) }
        if favorites { conditions.append(.favorite(true)) }
        options.predicate = conditions.isEmpty ? nil : .all(conditions)
        if album == nil || oldestFirst { options.sortDescriptors = [.init(key: "creationDate", ascending: oldestFirst)] }
        options.fetchLimit = limit ?? 0
        let assets = try album.map { opened.fetchAssets(in: try library.album(named: $0, in: opened), options: options) }
            ?? opened.fetchAssets(with: options)
        let summaries = assets.map(AssetSummary.init)
        try library.print(summaries) { summaries.map(\.line) }
    }
}

struct LibraryImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add photos (JPEG) and movies (MP4, MOV, MKV) to the library, all or none.")

    @OptionGroup var library: LibraryOptions
    @Argument(help: ArgumentHelp("The files.", valueName: "file")) var files: [String]
    @Option(help: ArgumentHelp("Put them in this album (made when missing).", valueName: "album")) var album: String?
    @Flag(help: "Move the files into the library instead of copying them.") var move = false
    @Flag(help: "Mark them as favourites.") var favorite = false

    func validate() throws {
        if files.isEmpty { throw ValidationError("name at least one file to import") }
        for file in files where AssetMediaType(fileName: file) == nil {
            throw ValidationError("\(file): the library holds JPEG photos (.jpg) and MP4, MOV or MKV movies")
        }
    }

    func run() async throws {
        let opened = try await library.open()
        var placeholders: [ObjectPlaceholder] = []
        do {
            try await opened.performChanges {
                for file in files {
                    let url = URL(fileURLWithPath: file)
                    let type: AssetResourceType = AssetMediaType(fileName: file) == .image ? .photo : .video
                    let request = AssetCreationRequest.forAsset()
                    request.addResource(with: type, fileURL: url, options: AssetResourceCreationOptions(shouldMoveFile: move))
                    request.isFavorite = favorite
                    placeholders.append(request.placeholderForCreatedAsset!)
                }
                if let album { AssetCollectionChangeRequest.forAssetCollection(titled: album).addAssets(placeholders) }
            }
        } catch let error as PhotoLibraryError {
            throw CommandFailure("nothing was imported: \(error)")
        }
        let added = opened.fetchAssets(withLocalIdentifiers: placeholders.map(\.localIdentifier)).map(AssetSummary.init)
        try library.print(added) { added.map(\.line) }
    }
}

struct LibraryExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "export", abstract: "Copy photos and movies out of the library.")

    @OptionGroup var library: LibraryOptions
    @Argument(help: ArgumentHelp("The assets' ids (as `library list` prints them).", valueName: "id")) var ids: [String] = []
    @Option(help: ArgumentHelp("Every asset of this album.", valueName: "album")) var album: String?
    @Option(help: ArgumentHelp("The folder to copy them into (made when missing).", valueName: "folder")) var to: String

    func validate() throws {
        if ids.isEmpty && album == nil { throw ValidationError("name the assets' ids, or --album") }
    }

    func run() async throws {
        let opened = try await library.open()
        var assets = try library.assets(ids, in: opened)
        if let album { assets += opened.fetchAssets(in: try library.album(named: album, in: opened)) }
        let destination = URL(fileURLWithPath: to)
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
        var written: [String] = []
        for asset in assets {
            var target = destination.appendingPathComponent(asset.fileURL.lastPathComponent)
            var attempt = 1
            while FileManager.default.fileExists(atPath: target.path) {
                attempt += 1
                let name = asset.fileURL.deletingPathExtension().lastPathComponent + "-\(attempt)." + asset.fileURL.pathExtension
                target = destination.appendingPathComponent(name)
            }
            do {
                try FileManager.default.copyItem(at: asset.fileURL, to: target)
            } catch {
                throw CommandFailure("cannot copy \(asset.localIdentifier) to \(target.path): \(error.localizedDescription)")
            }
            written.append(target.path)
        }
        try library.print(written) { written }
    }
}

struct LibraryAlbum: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "album",
        abstract: "List albums, or create, delete, add to or remove from one.",
        discussion: "gcapture library album [list] | create NAME | delete NAME | add NAME ID... | remove NAME ID...")

    enum Action: String, ExpressibleByArgument, CaseIterable { case list, create, delete, add, remove }

    @OptionGroup var library: LibraryOptions
    @Argument(help: "list, create, delete, add or remove.") var action: Action = .list
    @Argument(help: ArgumentHelp("The album's name.", valueName: "name")) var name: String?
    @Argument(help: ArgumentHelp("The assets' ids, for add and remove.", valueName: "id")) var ids: [String] = []

    struct AlbumSummary: Encodable {
        var id: String
        var title: String
        var count: Int
    }

    func validate() throws {
        if action != .list && name == nil { throw ValidationError("album \(action.rawValue) needs the album's name") }
        if [.add, .remove].contains(action) && ids.isEmpty { throw ValidationError("album \(action.rawValue) needs the assets' ids") }
    }

    func run() async throws {
        let opened = try await library.open()
        do {
            switch action {
            case .list: break
            case .create:
                if opened.fetchAssetCollections().contains(where: { $0.localizedTitle == name }) {
                    throw CommandFailure("the library already has an album '\(name!)'")
                }
                try await opened.performChanges { _ = AssetCollectionChangeRequest.creationRequestForAssetCollection(withTitle: name!) }
            case .delete:
                let album = try library.album(named: name!, in: opened)
                try await opened.performChanges { AssetCollectionChangeRequest.deleteAssetCollections([album]) }
            case .add, .remove:
                let album = try library.album(named: name!, in: opened)
                let assets = try library.assets(ids, in: opened)
                try await opened.performChanges {
                    let request = AssetCollectionChangeRequest(for: album)
                    if action == .add { request?.addAssets(assets) } else { request?.removeAssets(assets) }
                }
            }
        } catch let error as PhotoLibraryError {
            throw CommandFailure("\(error)")
        }
        let albums = opened.fetchAssetCollections().map { AlbumSummary(id: $0.localIdentifier, title: $0.localizedTitle ?? "", count: $0.estimatedAssetCount) }
        try library.print(albums) { albums.map { "\($0.title)\t\($0.count)\t\($0.id)" } }
    }
}
