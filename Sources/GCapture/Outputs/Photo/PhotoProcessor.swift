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
                       "DateTimeOriginal": exifDate(job.requestDate), "Orientation": orientation])
    }

    /// Encodes and, when the job names a file (`file`, its path), writes it atomically. `description`
    /// marks proxies.
    static func makePhoto(_ job: PhotoJob, file: FilePath?, frames: [CapturedFrame], encoder: PhotoEncoder, quality: Int,
                          requestStart: ContinuousClock.Instant, isProxy: Bool) throws(CaptureError) -> CapturePhoto {
        let frame = merge(frames)
        let transform = FrameTransform(rotation: job.rotation, mirrored: job.mirrored)
        var (tags, metadata) = Self.metadata(for: job, transform: transform)
        if isProxy { tags.set("description", "gcapture deferred proxy") }
        let data = try encoder.encode(frame, quality: quality, transform: transform, rotatePixels: job.rotatePixels, tags: tags)
        if let file { try writeAtomically(data, to: file) }
        let turned = job.rotatePixels && (job.rotation == 90 || job.rotation == 270)
        let resolved = CaptureResolvedPhotoSettings(
            uniqueID: job.id, photoQualityPrioritization: job.prioritization,
            photoDimensions: turned ? (frame.info.height, frame.info.width) : (frame.info.width, frame.info.height),
            jpegQuality: quality, isZeroShutterLag: job.zeroShutterLag, isDeferred: isProxy,
            rotationAngle: job.rotation, isMirrored: job.mirrored, frameCount: frames.count)
        let elapsed = ContinuousClock.now - requestStart
        return CapturePhoto(resolvedSettings: resolved, timestamp: Double(frame.presentationTime) / 1e9,
                            requestTimestamp: Double(job.requestTime) / 1e9,
                            latencyMilliseconds: Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15,
                            metadata: metadata, fileURL: job.fileURL, isProxy: isProxy, data: data)
    }

    /// EXIF's local date format, "2026:11:22 03:55:37", whole seconds in the local time zone (as jifmux
    /// writes it). strftime: a DateFormatter costs ~0.1 ms a call.
    static func exifDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var local = tm()
        localtime_r(&seconds, &local)
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { text in
            let length = strftime(text.baseAddress!, text.count, "%Y:%m:%d %H:%M:%S", &local)
            return String(decoding: UnsafeRawBufferPointer(start: text.baseAddress, count: length), as: UTF8.self)
        }
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

    /// Writes next to the target and renames over it: readers see the old file or the new one, never half.
    /// Published durably (see DurableFile): a photo the app was told is saved survives a power cut just
    /// after. The fsyncs cost milliseconds on the photo's processing thread, never on the caller's.
    static func writeAtomically(_ data: Data, to file: FilePath) throws(CaptureError) {
        let temporary = "\(file.folder)/.\(file.name).\(getpid())-\(counter.add(1, ordering: .relaxed).newValue).tmp"
        var failure = data.withUnsafeBytes { writeFile($0, to: temporary) }
        if failure == nil { failure = DurableFile.publish(temporary, as: file.path) }
        if let failure {
            unlink(temporary)
            throw .invalidSettings("cannot write \(file.path): \(failure)")
        }
    }

    /// Creates (or truncates) the file at `path` and writes `bytes` to it: nil, or why it failed.
    static func writeFile(_ bytes: UnsafeRawBufferPointer, to path: String) -> String? {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
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

    static func checkWritable(_ file: FilePath) throws(CaptureError) {
        // One system call when all is well: "folder/." resolves only when the folder is a folder.
        if access(file.folder + "/.", W_OK) == 0 { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file.folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .invalidSettings("cannot write \(file.path): folder \(file.folder) does not exist")
        }
        throw .invalidSettings("cannot write \(file.path): folder \(file.folder) is not writable")
    }
}
