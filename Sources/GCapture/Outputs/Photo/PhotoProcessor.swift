import CImaging
import Foundation
import GStreamerKit
import Synchronization

/// Everything a photo needs besides its frames: fixed at the request.
struct PhotoJob: Sendable, Codable {
    var id: Int64
    var prioritization: CapturePhotoOutput.QualityPrioritization
    var rotation: Int
    var mirrored: Bool
    var rotatePixels: Bool
    var zeroShutterLag: Bool
    var fileURL: URL?
    var requestTime: UInt64
    var requestDate: Date
    var make: String
    var model: String
}

/// Frames → JPEG file: noise reduction, encoding, EXIF, an atomic write.
enum PhotoProcessor {
    static let software = "gcapture \(CaptureRuntime.version)"

    /// Averages frames of one format into one new frame (the first frame's timestamp and format), reducing
    /// noise by √n. Frames of another format (a preset change mid-burst) are left out.
    static func merge(_ frames: [CapturedFrame]) -> CapturedFrame {
        guard let first = frames.first else { preconditionFailure("merge needs a frame") }
        let usable = frames.filter { $0.caps == first.caps && $0.byteCount == first.byteCount }
        guard usable.count > 1 else { return first }
        var averaged = false
        let merged = Sample(caps: first.caps, presentationTime: ClockTime(first.presentationTime), byteCount: first.byteCount) { destination in
            withMappedFrames(usable) { sources in
                CImaging_average(destination.baseAddress?.assumingMemoryBound(to: UInt8.self), sources, sources.count, destination.count)
                averaged = true
            }
        }
        guard let merged, averaged else { return first }
        return CapturedFrame(sample: merged, presentationTime: first.presentationTime, caps: first.caps, info: first.info)
    }

    /// Calls `body` with every frame's bytes mapped, or not at all when one cannot be mapped.
    private static func withMappedFrames(_ frames: [CapturedFrame], _ body: ([UnsafePointer<UInt8>?]) -> Void) {
        func nest(_ index: Int, _ collected: [UnsafePointer<UInt8>?]) {
            guard index < frames.count else { return body(collected) }
            _ = frames[index].sample.withBytes { nest(index + 1, collected + [$0.baseAddress?.assumingMemoryBound(to: UInt8.self)]) }
        }
        nest(0, [])
    }

    static func metadata(for job: PhotoJob, transform: FrameTransform) -> (TagList, [String: String]) {
        var tags = TagList()
        tags.set("device-manufacturer", job.make)
        tags.set("device-model", job.model)
        tags.set("application-name", software)
        tags.set("datetime", date: job.requestDate)
        let orientation = job.rotatePixels ? "rotate-0" : transform.imageOrientation
        return (tags, ["Make": job.make, "Model": job.model, "Software": software,
                       "DateTimeOriginal": TagList.exifDate(job.requestDate), "SubSecTimeOriginal": TagList.exifSubseconds(job.requestDate),
                       "Orientation": orientation])
    }

    /// Encodes and, when the job names a file (`file`, its path), writes it atomically: never over a file
    /// already there, except a deferred photo's final over its own proxy (`replacingProxy`). `description`
    /// marks proxies.
    static func makePhoto(_ job: PhotoJob, file: FilePath?, frames: [CapturedFrame], encoder: PhotoEncoder, quality: Int,
                          requestStart: ContinuousClock.Instant, isProxy: Bool, replacingProxy: Bool = false) throws(CaptureError) -> CapturePhoto {
        let frame = merge(frames)
        let transform = FrameTransform(rotation: job.rotation, mirrored: job.mirrored)
        var (tags, metadata) = Self.metadata(for: job, transform: transform)
        if isProxy { tags.set("description", "gcapture deferred proxy") }
        let data = try encoder.encode(frame, quality: quality, transform: transform, rotatePixels: job.rotatePixels, tags: tags)
        if let file { try writeAtomically(data, to: file, replacing: replacingProxy) }
        let turned = job.rotatePixels && (job.rotation == 90 || job.rotation == 270)
        let resolved = CaptureResolvedPhotoSettings(
            uniqueID: job.id, photoQualityPrioritization: job.prioritization,
            photoDimensions: turned ? (frame.info.height, frame.info.width) : (frame.info.width, frame.info.height),
            jpegQuality: quality, isZeroShutterLag: job.zeroShutterLag, isDeferred: isProxy,
            rotationAngle: job.rotation, isMirrored: job.mirrored, frameCount: frames.count)
        let elapsed = ContinuousClock.now - requestStart
        return CapturePhoto(resolvedSettings: resolved, timestamp: Double(frame.presentationTime) / 1e9,
                            requestTimestamp: Double(job.requestTime) / 1e9,
                            latencyMilliseconds: elapsed.inMilliseconds,
                            metadata: metadata, fileURL: job.fileURL, isProxy: isProxy, data: data)
    }


    /// A photo file's path, its folder and its name, taken from the URL once (URL operations cost tens of
    /// microseconds each on Linux).
    struct FilePath: Sendable {
        let path: String
        let folder: String
        let name: String

        init(_ url: URL) {
            path = url.path
            guard let slash = path.lastIndex(of: "/") else {
                folder = "."
                name = path
                return
            }
            folder = slash == path.startIndex ? "/" : String(path[..<slash])
            name = String(path[path.index(after: slash)...])
        }
    }

    /// Writes next to the target and puts it in place at once: readers see no file (or the proxy it
    /// replaces) or the whole photo, never half. Without `replacing`, a file already there (even a dangling
    /// symbolic link) is kept and the photo fails with `fileAlreadyExists`, decided by link(2) in one step:
    /// a check before the write would leave a moment for another file to appear. Published durably (see
    /// DurableFile): the data reaches the disk before the photo has its name, and the name before this
    /// returns, so a photo the app was told is saved survives a power cut just after. The fsyncs cost
    /// milliseconds on the photo's processing thread, never on the caller's.
    static func writeAtomically(_ data: Data, to file: FilePath, replacing: Bool = false) throws(CaptureError) {
        let temporary = "\(file.folder)/.\(file.name).\(getpid())-\(counter.add(1, ordering: .relaxed).newValue).tmp"
        var temporaryExists = true
        defer { if temporaryExists { unlink(temporary) } }
        if let failure = data.withUnsafeBytes({ writeFile($0, to: temporary) }) ?? DurableFile.syncData(of: temporary) {
            throw .fileAccessFailed("cannot write \(file.path): \(failure)")
        }
        /// The name made durable, the temporary one gone first (or it would come back after a power cut).
        func published() throws(CaptureError) {
            if temporaryExists { unlink(temporary); temporaryExists = false }
            if let failure = DurableFile.syncFolder(of: file.path) { throw .fileAccessFailed("cannot write \(file.path): \(failure)") }
        }
        var reason: Int32 = 0
        if replacing {
            if rename(temporary, file.path) == 0 { temporaryExists = false; return try published() }
            reason = errno
        } else {
            if link(temporary, file.path) == 0 { return try published() }
            reason = errno
            if reason == EPERM || reason == EOPNOTSUPP {
                // A file system without hard links (FAT on a USB stick): created exclusively, written in place.
                guard let failure = data.withUnsafeBytes({ writeFile($0, to: file.path, exclusive: true) }) ?? DurableFile.syncData(of: file.path)
                else { return try published() }
                reason = errno
                if reason != EEXIST {
                    unlink(file.path) // not half a photo
                    throw .fileAccessFailed("cannot write \(file.path): \(failure)")
                }
            }
        }
        if reason == EEXIST, !replacing { throw .fileAlreadyExists(path: file.path) }
        throw .fileAccessFailed("cannot write \(file.path): \(String(cString: strerror(reason)))")
    }

    /// Creates (or truncates; with `exclusive`, only creates) the file at `path` and writes `bytes` to it:
    /// nil, or why it failed.
    static func writeFile(_ bytes: UnsafeRawBufferPointer, to path: String, exclusive: Bool = false) -> String? {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), 0o644)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        var offset = 0
        while offset < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0, errno == EINTR { continue }
            if count <= 0 {
                let reason = count < 0 ? String(cString: strerror(errno)) : "nothing written"
                close(descriptor)
                return reason
            }
            offset += count
        }
        return close(descriptor) == 0 ? nil : String(cString: strerror(errno))
    }

    private static let counter = Atomic<Int>(0)

    /// A clear error now, before any capture, when the photo could not be written.
    static func checkWritable(_ url: URL) throws(CaptureError) { try checkWritable(FilePath(url)) }

    /// A photo's file must be writable and new: a file already there is said at the request rather than
    /// after the encoding (the write refuses it anyway, in one step, should one appear meanwhile).
    static func checkNewFile(_ file: FilePath) throws(CaptureError) {
        try checkWritable(file)
        var info = stat()
        if lstat(file.path, &info) == 0 { throw .fileAlreadyExists(path: file.path) }
    }

    static func checkWritable(_ file: FilePath) throws(CaptureError) {
        // One system call when all is well: "folder/." resolves only when the folder is a folder.
        if access(file.folder + "/.", W_OK) == 0 { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file.folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .fileAccessFailed("cannot write \(file.path): folder \(file.folder) does not exist")
        }
        throw .fileAccessFailed("cannot write \(file.path): folder \(file.folder) is not writable")
    }
}
