import Foundation
import GStreamerKit

/// The movie's file on disk before and after a recording: the checks that turn what the system says into
/// the user's mistake, and the repairs that leave a playable file (or nothing) after a failure.
enum MovieFiles {
    /// Below this much free space a recording is not started: it could write its header and little more.
    static let minimumFreeSpace: Int64 = 256 * 1024

    static func cannotWrite(_ url: URL, _ code: Int32) -> CaptureError {
        .recordingFailed(reason: "\(url.path): cannot write there: \(String(cString: strerror(code)))", underlying: nil)
    }

    /// Opens (creating) the movie as the recording will, so that what would fail later — a directory in
    /// its place, a kernel file system (/proc, /sys), a read-only or full disk — fails now with the reason.
    /// A file created only for the check is removed again.
    static func checkCreatable(_ url: URL) throws(CaptureError) {
        var isDirectory: ObjCBool = false
        let existed = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
        if existed, isDirectory.boolValue {
            throw .recordingFailed(reason: "\(url.path) is a directory", underlying: nil)
        }
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw cannotWrite(url, errno) }
        close(descriptor)
        if !existed { unlink(url.path) }
        var info = statvfs()
        let folder = url.deletingLastPathComponent().path
        if statvfs(folder, &info) == 0 {
            let free = Int64(info.f_bavail) * Int64(info.f_frsize)
            if free < minimumFreeSpace {
                throw .recordingFailed(reason: "the disk of \(folder) is full (\(free / 1024) KB free)", underlying: nil)
            }
        }
    }

    static func removeIfEmpty(_ url: URL) {
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber
        if size?.int64Value == 0 { try? FileManager.default.removeItem(at: url) }
    }

    /// Whether a recording's sidecar holds a video stream worth recovering later.
    static func holdsFrames(_ sidecar: URL) -> Bool {
        ((try? MediaInfo.discover(sidecar))?.videoStreamCount ?? 0) > 0
    }

    /// Cuts a fragmented MP4 whose writing stopped midway (the disk filled) after its last complete
    /// fragment, so that every player reads it. Returns whether it then holds a header and at least one
    /// complete fragment of samples.
    static func trimToLastCompleteBox(_ url: URL) -> Bool {
        guard let handle = try? FileHandle(forUpdating: url) else { return false }
        defer { try? handle.close() }
        guard let length = try? handle.seekToEnd() else { return false }
        var offset: UInt64 = 0
        var hasHeader = false, pendingFragment = false, holdsSamples = false
        var keep: UInt64 = 0
        while offset + 8 <= length {
            guard (try? handle.seek(toOffset: offset)) != nil,
                  let header = try? handle.read(upToCount: 16), header.count >= 8 else { break }
            var size = header.prefix(4).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let type = String(decoding: header[4..<8], as: UTF8.self)
            if size == 1, header.count == 16 { size = header[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            guard size >= 8, offset + size <= length else { break }
            offset += size
            switch type {
            case "moov": hasHeader = true; keep = offset
            case "moof": pendingFragment = true
            case "mdat": pendingFragment = false; holdsSamples = true; keep = offset
            default: if !pendingFragment { keep = offset }
            }
        }
        guard hasHeader, holdsSamples else { return false }
        return keep == length || (try? handle.truncate(atOffset: keep)) != nil
    }
}
