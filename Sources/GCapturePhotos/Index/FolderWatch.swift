import Foundation
import GCaptureSupport

/// Watches a library's folder (and its subfolders) with inotify, so that files any program adds, replaces or
/// removes reach the index and the observers without anyone calling `refresh()`. A burst of events (a
/// hundred photos copied at once) makes one refresh, a tenth of a second after the burst's first event.
final class FolderWatch: Sendable {
    private let descriptor: Int32
    private let wake: (read: Int32, write: Int32)
    private let pending = Locked(false)
    private let watched = Locked<[Int32: String]>([:])
    private let folder: URL
    private let onChange: @Sendable () -> Void

    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF)
    /// Events closer together than this make one refresh.
    static let settle: DispatchTimeInterval = .milliseconds(100)

    /// Starts watching; nil when inotify cannot be had (too many watches, an unsupported file system): the
    /// library then changes only through `refresh()`.
    init?(folder: URL, onChange: @escaping @Sendable () -> Void) {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard descriptor >= 0 else { return nil }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { close(descriptor); return nil }
        self.descriptor = descriptor
        wake = (ends[0], ends[1])
        self.folder = folder
        self.onChange = onChange
        guard add(folder.path) else { close(descriptor); close(ends[0]); close(ends[1]); return nil }
        addSubfolders(of: folder.path, depth: 0)
        let thread = Thread { [self] in run() }
        thread.name = "gcapture.photos.watch"
        thread.start()
    }

    /// Ends the watch; its thread closes the descriptors on its way out.
    func stop() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    @discardableResult
    private func add(_ path: String) -> Bool {
        let watch = inotify_add_watch(descriptor, path, Self.mask)
        guard watch >= 0 else { return false }
        watched.withLock { $0[watch] = path }
        return true
    }

    private func addSubfolders(of path: String, depth: Int) {
        guard depth < 16, let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for name in names where !name.hasPrefix(".") {
            let child = path + "/" + name
            // lstat: a link to a folder is not watched, as FolderScan does not walk it.
            var info = stat()
            if lstat(child, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
                add(child)
                addSubfolders(of: child, depth: depth + 1)
            }
        }
    }

    private func run() {
        defer {
            close(descriptor)
            close(wake.read)
            close(wake.write)
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            var polls = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            guard poll(&polls, 2, -1) >= 0 || errno == EINTR else { return }
            if polls[1].revents != 0 { return }
            guard polls[0].revents != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { continue }
            if matters(buffer, count: count) { schedule() }
        }
    }

    /// Whether the events in `buffer` touch the library: a visible file or folder, or the album file. The
    /// index's own files and a change block's hidden incoming files do not.
    private func matters(_ buffer: [UInt8], count: Int) -> Bool {
        var offset = 0, relevant = false
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= count {
            let (watch, mask, length) = buffer.withUnsafeBytes { raw -> (Int32, UInt32, Int) in
                let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                return (event.wd, event.mask, Int(event.len))
            }
            let nameBytes = buffer[(offset + header)..<min(offset + header + length, count)].prefix { $0 != 0 }
            let name = String(decoding: nameBytes, as: UTF8.self)
            offset += header + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { relevant = true; continue }
            if mask & UInt32(IN_IGNORED) != 0 { watched.withLock { $0[watch] = nil }; continue }
            if mask & UInt32(IN_DELETE_SELF) != 0 { relevant = true; continue }
            guard name == AlbumFile.name || !name.hasPrefix(".") else { continue }
            if mask & UInt32(IN_ISDIR) != 0, mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0,
               let parent = watched.withLock({ $0[watch] }) {
                add(parent + "/" + name)
                addSubfolders(of: parent + "/" + name, depth: 1)
                relevant = true
                continue
            }
            // A file created empty is indexed when it is closed after writing (IN_CLOSE_WRITE), not while it
            // fills; one that arrives whole by a hard link (link(2), as the engine and this library write
            // atomically) is never closed here, and counts now.
            if mask & UInt32(IN_CREATE) != 0 && mask & UInt32(IN_ISDIR) == 0 {
                guard let parent = watched.withLock({ $0[watch] }) else { continue }
                var info = stat()
                guard lstat(parent + "/" + name, &info) == 0, info.st_size > 0 else { continue }
            }
            relevant = true
        }
        return relevant
    }

    private func schedule() {
        let isFirst = pending.withLock { pending in
            defer { pending = true }
            return !pending
        }
        guard isFirst else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.settle) { [self] in
            pending.withLock { $0 = false }
            onChange()
        }
    }
}
