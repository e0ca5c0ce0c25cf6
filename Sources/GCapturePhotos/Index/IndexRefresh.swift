import Foundation
import GCaptureSupport
import Logging

/// One pass that makes the index say what the folder says: new and changed files are read (their headers
/// only, on every core), removed ones forgotten, and the album file laid over them.
struct IndexRefresh {
    let folder: URL
    let index: LibraryIndex
    let logger: Logger

    func run() throws -> Change? {
        let files = try FolderScan.mediaFiles(in: folder)
        let known = try index.stamps()
        let stale = files.filter { known[$0.key] != $0.value }.map { (identifier: $0.key, stamp: $0.value) }
        let removals = known.keys.filter { files[$0] == nil }
        let laid = try index.albumFile()
        let albumFile: AlbumFile
        do {
            albumFile = try AlbumFile.read(in: folder)
        } catch {
            // The albums cannot be read now; the index keeps the ones it has rather than forgetting them.
            logger.warning("photo library album file unreadable", metadata: ["error": "\(error)"])
            albumFile = laid
        }
        let albumsChanged = albumFile != laid
        if stale.isEmpty && removals.isEmpty && !albumsChanged { return nil }
        try index.apply(records: Self.read(stale, in: folder), removals: removals, albumFile: albumFile)
        let staleIdentifiers = Set(stale.map(\.identifier))
        return Change(inserted: staleIdentifiers.subtracting(known.keys), changed: staleIdentifiers.intersection(known.keys),
                      removed: Set(removals), albumsChanged: albumsChanged)
    }

    /// Reads each file's metadata, on as many threads as there are cores. A file that cannot be read is still
    /// an asset (of unknown size): the folder says it is there.
    static func read(_ files: [(identifier: String, stamp: FileStamp)], in folder: URL) -> [LibraryIndex.Record] {
        guard !files.isEmpty else { return [] }
        let records = RecordSlots(count: files.count)
        let chunks = max(1, min(files.count / 64, ProcessInfo.processInfo.activeProcessorCount * 4))
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            for position in stride(from: chunk, to: files.count, by: chunks) {
                let file = files[position]
                let type = FolderScan.mediaType(ofName: file.identifier) ?? .unknown
                let path = folder.appendingPathComponent(file.identifier).path
                let metadata = (try? MediaFileMetadata.read(path: path, mediaType: type)) ?? MediaFileMetadata(mediaType: type)
                records.set(position, LibraryIndex.Record(identifier: file.identifier, metadata: metadata, stamp: file.stamp))
            }
        }
        return records.all
    }
}

/// One slot per file, each written by exactly one thread of `concurrentPerform` and read after it returns.
private final class RecordSlots: Sendable {
    private let slots: Locked<[LibraryIndex.Record?]>

    init(count: Int) { slots = Locked(Array(repeating: nil, count: count)) }

    func set(_ position: Int, _ record: LibraryIndex.Record) { slots.withLock { $0[position] = record } }

    var all: [LibraryIndex.Record] { slots.withLock { $0.compactMap { $0 } } }
}
