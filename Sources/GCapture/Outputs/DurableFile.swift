import Foundation

/// Files that survive a power cut once the program says they are done. A rename alone is atomic only
/// against a crash of the process: after a power cut the kernel may have committed the rename but not the
/// file's data (an empty or short file under the new name), or neither the rename nor the file's directory
/// entry. So a file is published in three steps — its data to disk (fsync), the rename, its folder to disk
/// (fsync) — and what it makes redundant (a recovery sidecar) is removed only after that, with its removal
/// made durable the same way. Every call blocks on the disk: call it off any thread that must stay responsive.
enum DurableFile {
    /// Makes `temporary`'s data durable, renames it to `destination` (replacing what is there) and makes the
    /// rename durable. Returns nil, or why it failed (`temporary` is left for the caller to remove).
    static func publish(_ temporary: String, as destination: String) -> String? {
        if let failure = syncData(of: temporary) { return failure }
        guard Glibc.rename(temporary, destination) == 0 else { return String(cString: strerror(errno)) }
        return syncFolder(of: destination)
    }

    /// Makes a file written in place (a movie that stays as it was recorded) durable, with its name.
    static func sync(_ path: String) -> String? {
        syncData(of: path) ?? syncFolder(of: path)
    }

    /// Removes `path` and makes the removal durable; a file already gone is no failure.
    @discardableResult
    static func remove(_ path: String) -> String? {
        guard unlink(path) == 0 || errno == ENOENT else { return String(cString: strerror(errno)) }
        return syncFolder(of: path)
    }

    /// Renames within a folder (a failed sidecar set aside) and makes the rename durable.
    static func rename(_ path: String, to newPath: String) -> String? {
        guard Glibc.rename(path, newPath) == 0 else { return String(cString: strerror(errno)) }
        return syncFolder(of: newPath)
    }

    static func syncData(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        defer { close(descriptor) }
        return fsync(descriptor) == 0 ? nil : String(cString: strerror(errno))
    }

    /// fsync of the folder holding `path`: what makes a created, renamed or removed name durable.
    static func syncFolder(of path: String) -> String? {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        defer { close(descriptor) }
        // A file system whose folders cannot be synced (EINVAL: some FUSE and network ones) keeps names
        // durable its own way, or not at all: nothing more can be done from here.
        return fsync(descriptor) == 0 || errno == EINVAL ? nil : String(cString: strerror(errno))
    }
}
