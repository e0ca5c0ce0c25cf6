import Foundation

extension PhotoLibrary {
    /// Runs `changes` (which makes change requests) at once, then applies its requests on the library's queue,
    /// all or nothing: new files appear under their final names only when every request can be made, the album
    /// file is replaced in one rename, and a failure removes what was added. Observers are told afterwards.
    public func performChanges(_ changes: () -> Void) async throws {
        let plan = ChangeBlock.collect(changes)
        guard !plan.isEmpty else { return }
        let change = try await work.run { [self] in try ChangeApplier(library: self).apply(plan) }
        notify(change)
    }

    /// PhotoKit's callback form: `completionHandler` gets whether it succeeded and the error.
    public func performChanges(_ changes: () -> Void, completionHandler: (@Sendable (Bool, (any Error)?) -> Void)?) {
        let plan = ChangeBlock.collect(changes)
        Task {
            do {
                if !plan.isEmpty {
                    let change = try await work.run { [self] in try ChangeApplier(library: self).apply(plan) }
                    notify(change)
                }
                completionHandler?(true, nil)
            } catch {
                completionHandler?(false, error)
            }
        }
    }

    /// Blocks the calling thread until the changes are made (PhotoKit's `performChangesAndWait`).
    public func performChangesAndWait(_ changes: () -> Void) throws {
        let plan = ChangeBlock.collect(changes)
        guard !plan.isEmpty else { return }
        let change = try ChangeApplier(library: self).apply(plan)
        notify(change)
    }
}

/// Applies one change block's plan to the folder, the album file and the index.
struct ChangeApplier {
    let library: PhotoLibrary
    private var folder: URL { library.folder }

    /// A file put in the library, to take out again if a later step fails.
    private struct Placed {
        var identifier: String
        var path: String
        var movedFrom: String?
        var metadata: MediaFileMetadata
    }

    func apply(_ plan: ChangePlan) throws -> Change {
        try library.writing.withLock { try applyInTurn(plan) }
    }

    private func applyInTurn(_ plan: ChangePlan) throws -> Change {
        try makeFolder()
        var albumFile = try AlbumFile.read(in: folder)
        let before = albumFile
        var placed: [Placed] = []
        do {
            // Check everything that can be checked before a file is touched.
            for edit in plan.assetEdits where !exists(edit.identifier) { throw PhotoLibraryError.noSuchObject(edit.identifier) }
            for identifier in plan.deletedAssets where !exists(identifier) { throw PhotoLibraryError.noSuchObject(identifier) }
            let knownAlbums = Set(albumFile.albums.map(\.identifier))
            for identifier in plan.deletedAlbums where !knownAlbums.contains(identifier) { throw PhotoLibraryError.noSuchObject(identifier) }
            for edit in plan.albumEdits {
                if case .existing(let identifier) = edit.target, !knownAlbums.contains(identifier) {
                    throw PhotoLibraryError.noSuchObject(identifier)
                }
            }

            for creation in plan.creations {
                guard let resource = creation.resources.first else {
                    throw PhotoLibraryError.unsupportedResource(nil, reason: "the creation request has no resource (addResource)")
                }
                let file = try place(resource)
                placed.append(file)
                creation.placeholder.assign(file.identifier)
                if creation.isFavorite { albumFile.favorites.insert(file.identifier) }
                if let date = creation.creationDate { albumFile.creationDates[file.identifier] = date }
            }
            for edit in plan.assetEdits {
                if edit.isFavorite { albumFile.favorites.insert(edit.identifier) } else { albumFile.favorites.remove(edit.identifier) }
                if let date = edit.creationDate { albumFile.creationDates[edit.identifier] = date }
            }
            for edit in plan.albumEdits { try apply(edit, to: &albumFile) }
            albumFile.albums.removeAll { plan.deletedAlbums.contains($0.identifier) }
            for identifier in plan.deletedAssets { albumFile.remove(asset: identifier) }
            if albumFile != before { try albumFile.write(in: folder) }
        } catch {
            for file in placed { unlink(file.path) }
            throw error
        }

        // Committed: the new files are in, the album file says what it should. What is left cannot be undone.
        for file in placed { if let source = file.movedFrom { unlink(source) } }
        for identifier in plan.deletedAssets { unlink(folder.appendingPathComponent(identifier).path) }
        var records = placed.compactMap { file in
            FolderScan.stamp(ofPath: file.path).map { LibraryIndex.Record(identifier: file.identifier, metadata: file.metadata, stamp: $0) }
        }
        if let index = try library.openIndex() {
            records += try recordsOfUnindexedFiles(addedToAlbumsBy: plan, index: index)
            try index.apply(records: records, removals: plan.deletedAssets, albumFile: albumFile)
        }
        let edited = Set(plan.assetEdits.map(\.identifier))
        return Change(inserted: Set(placed.map(\.identifier)), changed: edited.subtracting(plan.deletedAssets),
                      removed: Set(plan.deletedAssets), albumsChanged: albumFile.albums != before.albums)
    }

    private func makeFolder() throws {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw PhotoLibraryError.unwritable(folder, reason: library.authorizationAdvice(for: .addOnly) ?? "\(error.localizedDescription)")
        }
        guard library.authorizationStatus(for: .addOnly) == .authorized else {
            throw PhotoLibraryError.accessDenied(library.authorizationAdvice(for: .addOnly) ?? "\(folder.path) is not writable")
        }
    }

    private func exists(_ identifier: String) -> Bool {
        Self.isSafeIdentifier(identifier) && FolderScan.stamp(ofPath: folder.appendingPathComponent(identifier).path) != nil
    }

    /// A path inside the folder: relative, no "..", no hidden component.
    static func isSafeIdentifier(_ identifier: String) -> Bool {
        let parts = identifier.split(separator: "/", omittingEmptySubsequences: false)
        return !identifier.isEmpty && !identifier.hasPrefix("/") && parts.allSatisfy { !$0.isEmpty && !$0.hasPrefix(".") }
            && !identifier.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    private func apply(_ edit: ChangePlan.AlbumEdit, to albumFile: inout AlbumFile) throws {
        let position: Int
        switch edit.target {
        case .existing(let identifier):
            guard let found = albumFile.albums.firstIndex(where: { $0.identifier == identifier }) else { throw PhotoLibraryError.noSuchObject(identifier) }
            position = found
        case .created(let placeholder):
            position = Self.makeAlbum(edit.title, for: placeholder, in: &albumFile)
        case .titled(let title, let placeholder):
            if let found = albumFile.albums.firstIndex(where: { $0.title == title }) {
                placeholder.assign(albumFile.albums[found].identifier)
                position = found
            } else {
                position = Self.makeAlbum(title, for: placeholder, in: &albumFile)
            }
        }
        albumFile.albums[position].title = edit.title
        for step in edit.steps {
            switch step {
            case .add(let members):
                for member in members {
                    let identifier = member.identifier
                    guard exists(identifier) else { throw PhotoLibraryError.noSuchObject(identifier.isEmpty ? "a placeholder of another block" : identifier) }
                    if !albumFile.albums[position].assets.contains(identifier) { albumFile.albums[position].assets.append(identifier) }
                }
            case .remove(let identifiers):
                albumFile.albums[position].assets.removeAll { identifiers.contains($0) }
            }
        }
    }

    /// Files put in an album by their paths that the index does not know as they are now (a capture output's
    /// photo written a moment ago): read with the change, so that the album shows them at once.
    private func recordsOfUnindexedFiles(addedToAlbumsBy plan: ChangePlan, index: LibraryIndex) throws -> [LibraryIndex.Record] {
        var named = Set<String>()
        for edit in plan.albumEdits {
            for case .add(let members) in edit.steps {
                for case .asset(let identifier) in members { named.insert(identifier) }
            }
        }
        guard !named.isEmpty else { return [] }
        let known = try index.stamps(of: named)
        let stale = named.compactMap { identifier -> (identifier: String, stamp: FileStamp)? in
            guard let stamp = FolderScan.stamp(ofPath: folder.appendingPathComponent(identifier).path), known[identifier] != stamp else { return nil }
            return (identifier, stamp)
        }
        return IndexRefresh.read(stale, in: folder)
    }

    private static func makeAlbum(_ title: String, for placeholder: ObjectPlaceholder, in albumFile: inout AlbumFile) -> Int {
        let identifier = UUID().uuidString
        albumFile.albums.append(.init(identifier: identifier, title: title, created: Date(), assets: []))
        placeholder.assign(identifier)
        return albumFile.albums.count - 1
    }

    /// Puts a resource in the folder under a name of its own, atomically: written (or linked) to a hidden
    /// file, checked, flushed, then linked to its final name, which `link` never lets overwrite another file.
    private func place(_ resource: (type: AssetResourceType, source: ChangePlan.Source, options: AssetResourceCreationOptions)) throws -> Placed {
        let mediaType: AssetMediaType = resource.type == .video ? .video : .image
        var sourceURL: URL?
        let temporary = folder.appendingPathComponent(".incoming-\(UUID().uuidString)").path
        defer { unlink(temporary) }
        switch resource.source {
        case .data(let data):
            guard FileManager.default.createFile(atPath: temporary, contents: data) else {
                throw PhotoLibraryError.unwritable(folder, reason: "cannot write a new file")
            }
        case .file(let url):
            sourceURL = url
            guard FileStamp.isReadableFile(url.path) else { throw PhotoLibraryError.unsupportedResource(url, reason: "no such file") }
            if !(resource.options.shouldMoveFile && link(url.path, temporary) == 0) {
                do {
                    try FileManager.default.copyItem(atPath: url.path, toPath: temporary)
                } catch {
                    throw PhotoLibraryError.unwritable(folder, reason: "cannot copy \(url.path): \(error.localizedDescription)")
                }
            }
        }
        let metadata: MediaFileMetadata
        do {
            metadata = try MediaFileMetadata.read(path: temporary, mediaType: mediaType)
        } catch {
            let what = mediaType == .image ? "it is not a JPEG photo" : "it is not a movie GStreamer can read"
            throw PhotoLibraryError.unsupportedResource(sourceURL, reason: "\(what): \(error)")
        }
        let descriptor = open(temporary, O_RDONLY)
        if descriptor >= 0 { fsync(descriptor); close(descriptor) }

        let wanted = name(for: resource, mediaType: mediaType, source: sourceURL)
        let stem = (wanted as NSString).deletingPathExtension, ext = (wanted as NSString).pathExtension
        for attempt in 1...10_000 {
            let identifier = attempt == 1 ? wanted : "\(stem)-\(attempt).\(ext)"
            let path = folder.appendingPathComponent(identifier).path
            if link(temporary, path) == 0 {
                let moved = resource.options.shouldMoveFile ? sourceURL?.path : nil
                return Placed(identifier: identifier, path: path, movedFrom: moved, metadata: metadata)
            }
            guard errno == EEXIST else {
                throw PhotoLibraryError.unwritable(URL(fileURLWithPath: path), reason: String(cString: strerror(errno)))
            }
        }
        throw PhotoLibraryError.unwritable(folder, reason: "every name like \(wanted) is taken")
    }

    /// The file's name in the library: the one asked for, else the source's, else one made from the date;
    /// always a plain visible name with the extension its kind needs.
    private func name(for resource: (type: AssetResourceType, source: ChangePlan.Source, options: AssetResourceCreationOptions),
                      mediaType: AssetMediaType, source: URL?) -> String {
        let allowed = mediaType == .image ? FolderScan.photoExtensions : FolderScan.movieExtensions
        var name = resource.options.originalFilename ?? source?.lastPathComponent ?? ""
        name = String(name.map { $0 == "/" || $0 == "\\" || $0.asciiValue.map { $0 < 0x20 } == true ? "_" : $0 })
        while name.hasPrefix(".") { name.removeFirst() }
        if name.isEmpty {
            let formatter = DateFormatter()
            formatter.dateFormat = "yyyyMMdd-HHmmss"
            formatter.locale = Locale(identifier: "en_US_POSIX")
            name = (mediaType == .image ? "IMG-" : "MOV-") + formatter.string(from: Date())
        }
        if !allowed.contains((name as NSString).pathExtension.lowercased()) { name += mediaType == .image ? ".jpg" : ".mp4" }
        return String(name.utf8.count > 200 ? String(name.suffix(120)) : name)
    }
}

extension FileStamp {
    static func isReadableFile(_ path: String) -> Bool {
        FolderScan.stamp(ofPath: path) != nil && access(path, R_OK) == 0
    }
}
