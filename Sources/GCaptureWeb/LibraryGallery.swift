import Foundation
import GCaptureControl
import GCapturePhotos
import GCaptureSupport

/// The gallery as the served folders' photo libraries (GCapturePhotos) see it: pages of assets newest first,
/// filtered by media type, favourite mark and album; favourite marks set from the page; a selection as one
/// zip; and a "library" event each time a library changes, whoever changed it (a capture, a file another
/// program copied in or deleted). An asset is named `FOLDER/NAME` (its folder's index among the served ones,
/// its name there) and reached through `MediaFolders`, by the same rules as any served file: a library's
/// subfolders are not served.
final class LibraryGallery: Sendable {
    let media: MediaFolders
    let libraries: [PhotoLibrary]
    private let changes = Broadcast<ControlEvent>()
    private let forwarders: [ChangeForwarder]
    private let following = Locked<Task<Void, Never>?>(nil)
    /// The libraries being refreshed for a capture (by folder), and whether another capture asked meanwhile.
    private let refreshing = Locked<[Int: Bool]>([:])
    /// The last refresh started for a capture, by folder: what `finish` waits for.
    private let refreshTasks = Locked<[Int: Task<Void, Never>]>([:])
    /// Each library's first refresh since the server started: a page waits for it, so that it never shows
    /// the index as an earlier run left it (or, when the index is new, an empty gallery).
    private let firstRefreshes: [Task<Void, Never>]

    static let pageSizes = 1...500
    static let defaultPageSize = 60

    init(media: MediaFolders) {
        self.media = media
        libraries = media.folders.map { PhotoLibrary(folder: $0) }
        forwarders = libraries.indices.map { [changes] folder in ChangeForwarder(folder: folder, changes: changes) }
        for (library, forwarder) in zip(libraries, forwarders) { library.register(forwarder) }
        firstRefreshes = libraries.map { library in Task { _ = try? await library.refresh() } }
    }

    /// Returns once every library has been brought up to date with its folder since the server started.
    func ready() async {
        for refresh in firstRefreshes { await refresh.value }
    }

    deinit {
        following.withLock { $0 }?.cancel()
        for (library, forwarder) in zip(libraries, forwarders) { library.unregisterChangeObserver(forwarder) }
    }

    /// Stops following the capture and watching the folders, and waits for the refreshes under way, for
    /// `limit` at most: a program about to exit should not leave a movie half read (a decoder's threads
    /// still running at exit), nor wait long for a first index of a large folder.
    func finish(limit: Duration = .seconds(5)) async {
        following.withLock { $0 }?.cancel()
        for (library, forwarder) in zip(libraries, forwarders) { library.unregisterChangeObserver(forwarder) }
        let done = AtomicFlag()
        let waiting = Task { [self] in
            for refresh in firstRefreshes { await refresh.value }
            for task in refreshTasks.withLock({ Array($0.values) }) { await task.value }
            // A folder-watch callback already due (after its 100 ms of settling) queues its refresh meanwhile.
            try? await Task.sleep(for: .milliseconds(150))
            for library in libraries { await library.waitUntilIdle() }
            done.set()
        }
        let deadline = ContinuousClock.now + limit
        while !done.isSet, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        withExtendedLifetime(waiting) {}
    }

    /// The libraries' changes from now on, as "library" events.
    func events() -> AsyncStream<ControlEvent> { changes.makeStream(bufferingPolicy: .bufferingNewest(64)) }

    /// Brings the library a capture wrote into up to date as soon as the capture says so: a movie is listed
    /// while it is recorded (the folder watch sees a file only once it is closed), a photo without waiting
    /// for the watch's settling time.
    func follow(_ captureEvents: AsyncStream<ControlEvent>) {
        let task = Task { [weak self] in
            for await event in captureEvents where Self.wroteFiles.contains(event.name) {
                guard let self else { return }
                for folder in self.foldersHolding(event.fields["path"] as? String) { self.refreshSoon(folder) }
            }
        }
        following.withLock { $0 = task }
    }

    private static let wroteFiles: Set<String> = ["photo", "recordingStarted", "recordingFinished", "eventStarted", "eventEnded"]

    private func foldersHolding(_ path: String?) -> [Int] {
        let holding = libraries.indices.filter { path?.hasPrefix(libraries[$0].folder.path + "/") == true }
        return holding.isEmpty ? Array(libraries.indices) : holding
    }

    /// One refresh of a library at a time, and at most one more after it however many captures asked
    /// meanwhile: a burst of photos into a folder of 100,000 files walks it twice, not once a shot.
    private func refreshSoon(_ folder: Int) {
        let starts = refreshing.withLock { asked -> Bool in
            if asked[folder] != nil { asked[folder] = true; return false }
            asked[folder] = false
            return true
        }
        guard starts else { return }
        let library = libraries[folder]
        let task = Task { [weak self] in
            while true {
                _ = try? await library.refresh()
                guard let self else { return }
                let again = self.refreshing.withLock { asked -> Bool in
                    if asked[folder] == true { asked[folder] = false; return true }
                    asked[folder] = nil
                    return false
                }
                if !again { return }
            }
        }
        refreshTasks.withLock { $0[folder] = task }
    }

    // MARK: Pages

    struct PageRequest {
        var mediaType: AssetMediaType?
        var favoritesOnly = false
        var album: (folder: Int, identifier: String)?
        var offset = 0
        var limit = LibraryGallery.defaultPageSize

        /// The request a page's query asks: `type` (photo, video or all), `favorites=1`, `album` (an id from
        /// /api/library/albums), `offset`, `limit`. A value it cannot read is named in the error.
        static func read(_ query: [String: String]) -> Result<PageRequest, GalleryRefusal> {
            var request = PageRequest()
            switch query["type"] ?? "all" {
            case "all", "": break
            case "photo", "photos": request.mediaType = .image
            case "video", "videos": request.mediaType = .video
            case let other: return .failure(.badRequest("type=\(other): the gallery shows photo, video or all"))
            }
            request.favoritesOnly = ["1", "true", "yes"].contains(query["favorites"] ?? "")
            if let album = query["album"], !album.isEmpty {
                guard let (folder, identifier) = LibraryGallery.split(album) else {
                    return .failure(.badRequest("album=\(album): not an album of this gallery"))
                }
                request.album = (folder, identifier)
            }
            for (name, range) in [("offset", 0...Int(Int32.max)), ("limit", LibraryGallery.pageSizes)] {
                guard let text = query[name] else { continue }
                guard let value = Int(text), range.contains(value) else {
                    return .failure(.badRequest("\(name)=\(text): a whole number from \(range.lowerBound) to \(range.upperBound)"))
                }
                if name == "offset" { request.offset = value } else { request.limit = value }
            }
            return .success(request)
        }
    }

    /// One page of the gallery: its items, how many the filters select in all, and the offset of the next page
    /// (nil on the last). Reads the indexes: blocks for as long as their queries take.
    func page(_ request: PageRequest) throws(GalleryRefusal) -> [String: any Sendable] {
        // The folder's own files, as the server has always served: a library's subfolders are not on the web.
        var conditions: [AssetPredicate] = [.inFolder("")]
        if let type = request.mediaType { conditions.append(.mediaType(type)) }
        if request.favoritesOnly { conditions.append(.favorite(true)) }
        let options = FetchOptions()
        options.predicate = .all(conditions)
        options.sortDescriptors = [.init(key: "creationDate", ascending: false)]
        // One library answers the page itself; several each give their first offset + limit, merged, and the
        // page is the same slice of the merged order.
        let merging = request.album == nil && libraries.count > 1
        options.fetchLimit = merging ? request.offset + request.limit : request.limit
        options.fetchOffset = merging ? 0 : request.offset

        var found: [(folder: Int, asset: Asset)] = []
        var total = 0
        if let album = request.album {
            guard libraries.indices.contains(album.folder),
                  let collection = libraries[album.folder].fetchAssetCollections(withLocalIdentifiers: [album.identifier]).firstObject
            else { throw .notFound("no such album: it may have been deleted") }
            let library = libraries[album.folder]
            found = library.fetchAssets(in: collection, options: options).map { (album.folder, $0) }
            total = library.countAssets(in: collection, options: options)
        } else {
            for (folder, library) in libraries.enumerated() {
                found += library.fetchAssets(with: options).map { (folder, $0) }
                total += library.countAssets(with: options)
            }
        }
        let newestFirst = found.sorted { a, b in
            let first = a.asset.creationDate ?? .distantPast, second = b.asset.creationDate ?? .distantPast
            if first != second { return first > second }
            if a.asset.localIdentifier != b.asset.localIdentifier { return a.asset.localIdentifier > b.asset.localIdentifier }
            return a.folder < b.folder
        }
        let slice = newestFirst.dropFirst(merging ? request.offset : 0).prefix(request.limit)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions.insert(.withFractionalSeconds)
        let items: [[String: any Sendable]] = slice.map { item(folder: $0.folder, asset: $0.asset, formatter: formatter) }
        let next = request.offset + items.count
        return ["items": items, "total": total, "offset": request.offset, "next": next < total && !items.isEmpty ? next : NSNull()]
    }

    private func item(folder: Int, asset: Asset, formatter: ISO8601DateFormatter) -> [String: any Sendable] {
        let identifier = asset.localIdentifier
        let kind: MediaFolders.Kind = asset.mediaType == .video ? .movie : .photo
        let base = media.folders[folder]
        let marks = media.marks(of: identifier, kind: kind, folder: folder) { name in
            access(base.appendingPathComponent(name).path, F_OK) == 0
        }
        let encoded = Self.urlPart(identifier)
        var item: [String: any Sendable] = [
            "id": "\(folder)/\(identifier)", "name": (identifier as NSString).lastPathComponent, "kind": kind.rawValue,
            "bytes": asset.fileSize, "favorite": asset.isFavorite, "width": asset.pixelWidth, "height": asset.pixelHeight,
            "unfinished": marks.unfinished, "event": marks.isEventClip, "timelapse": marks.isTimelapse,
            "url": "/media/\(folder)/\(encoded)", "thumbnail": "/thumbs/\(folder)/\(encoded)",
        ]
        if let created = asset.creationDate { item["created"] = formatter.string(from: created) }
        if asset.mediaType == .video { item["duration"] = asset.duration }
        return item
    }

    /// The albums of every library, in the order they were made.
    func albums() -> [String: any Sendable] {
        var albums: [[String: any Sendable]] = []
        for (folder, library) in libraries.enumerated() {
            for album in library.fetchAssetCollections() {
                albums.append(["id": "\(folder):\(album.localIdentifier)", "title": album.localizedTitle ?? "",
                               "count": album.estimatedAssetCount])
            }
        }
        return ["albums": albums]
    }

    // MARK: Changes and downloads

    /// Marks the items as favourites, or unmarks them: all or none (one change block per library).
    func setFavorite(_ ids: [String], to favorite: Bool) async throws(GalleryRefusal) -> Int {
        let assets = try resolve(ids)
        for (folder, library) in libraries.enumerated() {
            let mine = assets.filter { $0.folder == folder }.map(\.asset)
            guard !mine.isEmpty else { continue }
            do {
                try await library.performChanges {
                    for asset in mine { AssetChangeRequest(for: asset).isFavorite = favorite }
                }
            } catch {
                throw .unprocessable("the favourite marks could not be saved: \(error)")
            }
        }
        return assets.count
    }

    /// The items in one zip, each under its own name (a name taken twice gets "-2"). Blocks while the
    /// archive is written.
    func archive(_ ids: [String]) throws(GalleryRefusal) -> (descriptor: Int32, size: Int) {
        let assets = try resolve(ids)
        var taken = Set<String>()
        var entries: [StoredZip.Entry] = []
        for (folder, asset) in assets {
            let path: String
            do { path = try media.resolve(folder: folder, name: asset.localIdentifier) } catch {
                throw .notFound("\((asset.localIdentifier as NSString).lastPathComponent) is no longer in the gallery")
            }
            let name = Self.uniqueName((asset.localIdentifier as NSString).lastPathComponent, taken: &taken)
            entries.append(StoredZip.Entry(name: name, path: path, modified: asset.creationDate ?? asset.modificationDate ?? Date()))
        }
        do {
            return try StoredZip.write(entries)
        } catch {
            switch error {
            case .tooLarge(let bytes):
                throw .tooLarge(String(format: "the selection is %.1f GB; one zip holds at most 4 GB: select fewer", Double(bytes) / 1e9))
            case .tooMany(let count): throw .tooLarge("\(count) items; one zip holds at most \(StoredZip.maximumEntries): select fewer")
            case .unreadable(let name): throw .notFound("\(name) cannot be read any more")
            case .cannotWrite(let reason): throw .unprocessable("the zip could not be written: \(reason)")
            }
        }
    }

    static func uniqueName(_ name: String, taken: inout Set<String>) -> String {
        var candidate = name, number = 2
        let stem = (name as NSString).deletingPathExtension, ext = (name as NSString).pathExtension
        while !taken.insert(candidate).inserted {
            candidate = "\(stem)-\(number)" + (ext.isEmpty ? "" : ".\(ext)")
            number += 1
        }
        return candidate
    }

    /// The assets `ids` name, in their order, each once. An id that is not a served photo or movie of a
    /// library is refused with its name.
    private func resolve(_ ids: [String]) throws(GalleryRefusal) -> [(folder: Int, asset: Asset)] {
        guard !ids.isEmpty else { throw .badRequest("no items: name them as the gallery's ids, e.g. 0/photo.jpg") }
        var wanted: [(folder: Int, identifier: String)] = []
        var seen = Set<String>()
        for id in ids where seen.insert(id).inserted {
            guard let slash = id.firstIndex(of: "/"), let folder = Int(id[..<slash]), libraries.indices.contains(folder) else {
                throw .badRequest("\(id) is not an item of this gallery")
            }
            let identifier = String(id[id.index(after: slash)...])
            do { _ = try media.resolve(folder: folder, name: identifier) } catch {
                throw error == .badName ? .badRequest("\(id) is not an item of this gallery") : .notFound("no such photo or movie: \(id)")
            }
            wanted.append((folder, identifier))
        }
        var assets: [String: Asset] = [:]
        for (folder, library) in libraries.enumerated() {
            let identifiers = wanted.filter { $0.folder == folder }.map(\.identifier)
            guard !identifiers.isEmpty else { continue }
            for asset in library.fetchAssets(withLocalIdentifiers: identifiers) { assets["\(folder)/\(asset.localIdentifier)"] = asset }
        }
        return try wanted.map { (folder, identifier) throws(GalleryRefusal) in
            guard let asset = assets["\(folder)/\(identifier)"] else { throw .notFound("no such photo or movie: \(folder)/\(identifier)") }
            return (folder, asset)
        }
    }

    /// "3:ALBUM" as (3, "ALBUM").
    static func split(_ id: String) -> (Int, String)? {
        guard let colon = id.firstIndex(of: ":"), let folder = Int(id[..<colon]), folder >= 0 else { return nil }
        let rest = String(id[id.index(after: colon)...])
        return rest.isEmpty ? nil : (folder, rest)
    }

    /// An asset's name as one URL path component.
    static func urlPart(_ identifier: String) -> String {
        identifier.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#;"))) ?? identifier
    }
}

/// Why the gallery refused a request, in the user's words, with the status it is answered with.
enum GalleryRefusal: Error, Equatable {
    case badRequest(String)
    case notFound(String)
    case tooLarge(String)
    case unprocessable(String)
}

/// Forwards one library's changes to the page as "library" events.
private final class ChangeForwarder: PhotoLibraryChangeObserver {
    let folder: Int
    let changes: Broadcast<ControlEvent>

    init(folder: Int, changes: Broadcast<ControlEvent>) {
        self.folder = folder
        self.changes = changes
    }

    func photoLibraryDidChange(_ change: Change) {
        changes.yield(ControlEvent(name: "library", fields: [
            "folder": folder, "inserted": change.insertedAssetIdentifiers.count, "removed": change.removedAssetIdentifiers.count,
            "changed": change.changedAssetIdentifiers.count, "albumsChanged": change.albumsChanged,
        ], text: nil))
    }
}
