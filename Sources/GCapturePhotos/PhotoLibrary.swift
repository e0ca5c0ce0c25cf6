import Foundation
import GCaptureSupport
import GRDB
import Logging

/// A photo and movie library over a folder, in PhotoKit's shape (PHPhotoLibrary): the files are the truth,
/// an index beside them (`.gcapture-library.sqlite`, SQLite) makes fetching fast, and an album file
/// (`.gcapture-library.json`) holds the albums and favourites. Any program may add or delete files; `refresh()`
/// (and, when observed, the folder watch) brings the index up to date.
///
/// Changes are made in `performChanges` blocks with change requests, applied all or nothing on the library's
/// own queue. Fetches read the index synchronously, one indexed query each, as PhotoKit's do.
public final class PhotoLibrary: Sendable {
    public let folder: URL

    /// Writes take turns here: a refresh, a change block. Never the caller's thread.
    let work: BlockingQueue
    /// Held by whatever writes (a refresh, a change block), so that `performChangesAndWait`, which runs on the
    /// caller's thread, still takes its turn.
    let writing = Lock()
    private let opening = Lock()
    private let state = Locked(State())
    private let logger = Logger(label: "gcapture.photos")

    private struct State {
        var index: LibraryIndex?
        var indexRecoveryReason: String?
        var observers: [WeakObserver] = []
        /// The folder's inotify watch, while anyone observes.
        var watch: FolderWatch?
    }

    /// A library over `folder`. Nothing is read or created until it is used; the first use opens (or
    /// rebuilds) its index and starts bringing it up to date in the background.
    public init(folder: URL) {
        self.folder = folder.standardizedFileURL
        work = BlockingQueue(label: "gcapture.photos.library")
    }

    private static let sharedLibrary = Locked<PhotoLibrary?>(nil)

    /// The user's library: the folder `GCAPTURE_PHOTO_LIBRARY` names, else `~/Pictures/gcapture`
    /// (XDG_PICTURES_DIR's, when set).
    public static func shared() -> PhotoLibrary {
        sharedLibrary.withLock { shared in
            if let shared { return shared }
            let library = PhotoLibrary(folder: defaultFolder())
            shared = library
            return library
        }
    }

    static func defaultFolder(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let named = environment["GCAPTURE_PHOTO_LIBRARY"], !named.isEmpty { return URL(fileURLWithPath: named) }
        let pictures = environment["XDG_PICTURES_DIR"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent("Pictures")
        return pictures.appendingPathComponent("gcapture")
    }

    /// Why the index was rebuilt from the folder when it was opened (it was corrupt, or of another schema);
    /// nil when it was sound or new. The warning is logged as well.
    public var indexRecoveryReason: String? { state.withLock { $0.indexRecoveryReason } }

    // MARK: The index

    /// The index, opened on first use; nil while the folder does not exist (nothing to index yet). One
    /// thread opens it: two opening a corrupt index at once would each delete what the other made.
    func openIndex() throws -> LibraryIndex? {
        if let index = state.withLock({ $0.index }) { return index }
        let opened: LibraryIndex? = try opening.withLock {
            if let index = state.withLock({ $0.index }) { return index }
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else { return nil }
            let index = try LibraryIndex(folder: folder)
            state.withLock { state in
                state.index = index
                state.indexRecoveryReason = index.rebuildReason
            }
            if let reason = index.rebuildReason {
                logger.warning("photo library index rebuilt from the folder", metadata: ["folder": "\(folder.path)", "reason": "\(reason)"])
            }
            // The first refresh brings an index made now, or left by an earlier run, up to date with the folder.
            Task { [self] in _ = try? await refresh() }
            return index
        }
        if opened != nil { startWatchIfObserved() }
        return opened
    }

    /// Brings the index up to date with the folder: files added, changed or removed by any program, and the
    /// album file. Returns what changed (nil when nothing did); observers are told as well.
    @discardableResult
    public func refresh() async throws -> Change? {
        let change = try await work.run { [self] () throws -> Change? in
            guard let index = try openIndex() else { return nil }
            return try writing.withLock { try IndexRefresh(folder: folder, index: index, logger: logger).run() }
        }
        if let change { notify(change) }
        return change
    }

    /// Returns once the work queued before it (a refresh, a change block) is done: a program about to exit
    /// waits here, so that no movie is left half read (its decoder's threads still running).
    public func waitUntilIdle() async {
        await work.run {}
    }

    // MARK: Observing

    /// Tells `observer` of every change made through the library, or by any other program to the folder
    /// (watched with inotify while anyone observes), on a queue of the library's. Held weakly, as in PhotoKit.
    public func register(_ observer: some PhotoLibraryChangeObserver) {
        state.withLock { $0.observers.append(WeakObserver(observer: observer)) }
        _ = try? openIndex()
        startWatchIfObserved()
    }

    public func unregisterChangeObserver(_ observer: some PhotoLibraryChangeObserver) {
        let idle = state.withLock { state -> FolderWatch? in
            state.observers.removeAll { $0.observer == nil || $0.observer === observer }
            guard state.observers.isEmpty else { return nil }
            defer { state.watch = nil }
            return state.watch
        }
        idle?.stop()
    }

    private func startWatchIfObserved() {
        let wanted = state.withLock { !$0.observers.isEmpty && $0.watch == nil && $0.index != nil }
        guard wanted, let watch = FolderWatch(folder: folder, onChange: { [weak self] in
            guard let self else { return }
            Task { _ = try? await self.refresh() }
        }) else { return }
        let surplus = state.withLock { state -> FolderWatch? in
            if state.watch == nil { state.watch = watch; return nil }
            return watch
        }
        surplus?.stop()
    }

    deinit {
        state.withLock { $0.watch }?.stop()
    }

    private static let notifications = DispatchQueue(label: "gcapture.photos.observers")

    func notify(_ change: Change) {
        let observers = state.withLock { state -> [any PhotoLibraryChangeObserver] in
            state.observers.removeAll { $0.observer == nil }
            return state.observers.compactMap(\.observer)
        }
        guard !observers.isEmpty else { return }
        Self.notifications.async {
            for observer in observers { observer.photoLibraryDidChange(change) }
        }
    }
}

private struct WeakObserver: Sendable {
    weak var observer: (any PhotoLibraryChangeObserver)?
}

/// Told of a library's changes (PhotoKit's PHPhotoLibraryChangeObserver).
public protocol PhotoLibraryChangeObserver: AnyObject, Sendable {
    func photoLibraryDidChange(_ changeInstance: Change)
}
