import Foundation
import GCapture
import GCapturePhotos
import GCaptureSupport

/// The photos and movies the gallery shows, and the only files the server hands out. A file is named in a
/// URL by its folder's index and its own name: one path component, percent-decoded once, never "..", never
/// hidden, and it must be a regular file whose real path (symbolic links resolved) lies in that folder.
struct MediaFolders: Sendable {
    enum Kind: String, Sendable { case photo, movie }

    struct Item: Sendable {
        var folder: Int
        var name: String
        var kind: Kind
        var bytes: Int
        var modified: Date
        /// A movie being recorded, or one whose recording was cut short (a crash, a power cut): its recovery
        /// sidecar is beside it. It plays up to its last fragment.
        var unfinished: Bool
        /// A movie an event recorded (CaptureEventRecorder): its record is beside it.
        var isEventClip = false
        /// A movie a description's timelapse recorded (WebServerConfiguration.isTimelapse).
        var isTimelapse = false
    }

    enum Refusal: Error, Equatable {
        /// The name is not a plain file name (traversal, a hidden file, bad encoding): 400.
        case badName
        /// No such file in the folder, or one the server does not hand out (a link out, a folder): 404.
        case notFound
    }

    let folders: [URL]
    /// Each folder's real path, resolved once: what a served file's real path must begin with.
    private let realFolders: [String]
    private let isTimelapse: @Sendable (_ name: String, _ folder: URL) -> Bool

    init(_ folders: [URL], isTimelapse: @escaping @Sendable (_ name: String, _ folder: URL) -> Bool = { _, _ in false }) {
        self.isTimelapse = isTimelapse
        var seen = Set<String>()
        var kept: [URL] = [], real: [String] = []
        for folder in folders {
            let resolved = Self.realPath(folder.path) ?? folder.standardizedFileURL.path
            if seen.insert(resolved).inserted { kept.append(folder); real.append(resolved) }
        }
        self.folders = kept
        realFolders = real
    }

    /// A photo or a movie, as the photo library tells them (AssetMediaType(fileName:)); nil for other files.
    static func kind(of name: String) -> Kind? {
        switch AssetMediaType(fileName: name) {
        case .image?: .photo
        case .video?: .movie
        default: nil
        }
    }

    /// Every photo and movie, newest first.
    func items() -> [Item] {
        var items: [Item] = []
        let manager = FileManager.default
        for (index, folder) in folders.enumerated() {
            guard let names = try? manager.contentsOfDirectory(atPath: folder.path) else { continue }
            let present = Set(names)
            for name in names where !name.hasPrefix(".") {
                guard let kind = Self.kind(of: name), let (_, info) = try? file(folder: index, name: name) else { continue }
                let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
                let marks = marks(of: name, kind: kind, folder: index) { present.contains($0) }
                items.append(Item(folder: index, name: name, kind: kind, bytes: Int(info.st_size), modified: modified,
                                  unfinished: marks.unfinished, isEventClip: marks.isEventClip, isTimelapse: marks.isTimelapse))
            }
        }
        return items.sorted { $0.modified != $1.modified ? $0.modified > $1.modified : $0.name > $1.name }
    }

    /// What the files beside a movie say of it: a recovery sidecar (unfinished), an event clip's record, a
    /// timelapse. `exists` answers for a file's name in folder `folder`.
    func marks(of name: String, kind: Kind, folder: Int,
               exists: (String) -> Bool) -> (unfinished: Bool, isEventClip: Bool, isTimelapse: Bool) {
        guard kind == .movie, folders.indices.contains(folder) else { return (false, false, false) }
        let record = EventClipRecord.url(forClip: URL(fileURLWithPath: name)).lastPathComponent
        return (exists(".\(name).gcapture-recovery.mkv"), exists(record), isTimelapse(name, folders[folder]))
    }

    /// The real path of the file `name` in folder `folder`, as the URL gave them (still percent-encoded).
    func resolve(folder folderText: Substring, name encoded: Substring) throws(Refusal) -> String {
        guard let folder = Int(folderText), String(folder) == folderText else { throw .badName }
        guard let name = String(encoded).removingPercentEncoding else { throw .badName }
        return try resolve(folder: folder, name: name)
    }

    func resolve(folder: Int, name: String) throws(Refusal) -> String {
        try file(folder: folder, name: name).path
    }

    /// The real path of a served file and what stat says of it.
    private func file(folder: Int, name: String) throws(Refusal) -> (path: String, info: stat) {
        guard folders.indices.contains(folder) else { throw .notFound }
        guard Self.isPlainName(name) else { throw .badName }
        guard let real = Self.realPath(folders[folder].appendingPathComponent(name).path) else { throw .notFound }
        // A link that leads out of the folder (or into a subfolder) is not served.
        guard (real as NSString).deletingLastPathComponent == realFolders[folder] else { throw .notFound }
        var info = stat()
        guard stat(real, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw .notFound }
        return (real, info)
    }

    /// One path component that names a visible file: no separators, no "..", no NUL or control characters.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && !name.hasPrefix(".")
            && !name.contains("/") && !name.contains("\\")
            && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// Thumbnails made, each kept while its file is unchanged (the same path, modification time and size), at
/// most `kept` of them: the photos' and the movies' alike.
final class ThumbnailCache: Sendable {
    struct FileVersion: Hashable, Sendable {
        var path: String
        var modified: Int
        var bytes: Int

        /// The file as it is now; nil when it cannot be read.
        init?(_ path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            self.path = path
            modified = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
            bytes = Int(info.st_size)
        }
    }

    private static let kept = 512
    private let entries = Locked<[FileVersion: Data]>([:])

    func cached(_ version: FileVersion) -> Data? { entries.withLock { $0[version] } }

    func keep(_ thumbnail: Data, for version: FileVersion) {
        entries.withLock { entries in
            if entries.count >= Self.kept { entries.removeAll() }
            entries[version] = thumbnail
        }
    }
}

/// Small JPEGs of the gallery's photos, made with libjpeg's scaled decoding (a 12-megapixel photo is decoded
/// at an eighth of its size, never whole).
final class Thumbnails: Sendable {
    static let size = 240
    private let cache = ThumbnailCache()
    private let decoding = BlockingQueue(label: "gcapture.web.photo-thumbnails")

    /// The photo's thumbnail, or nil when it cannot be read as a JPEG.
    func thumbnail(ofPhotoAt path: String) async -> Data? {
        guard let version = ThumbnailCache.FileVersion(path) else { return nil }
        if let cached = cache.cached(version) { return cached }
        let made = await decoding.run { FileManager.default.contents(atPath: path).flatMap { Self.make(from: $0) } }
        if let made { cache.keep(made, for: version) }
        return made
    }

    /// Upright: a photo taken with its orientation in EXIF (`--exif-orientation`) is turned as a viewer turns it,
    /// since the small JPEG carries no EXIF of its own.
    static func make(from jpeg: Data, size: Int = Thumbnails.size) -> Data? {
        let orientation = (try? JPEGHeader.read(data: jpeg))?.orientation ?? 1
        return try? JPEGEncoder.thumbnail(ofJPEG: jpeg, maximumDimension: size, quality: 75, orientation: orientation)
    }
}

/// A movie's thumbnail: its first frame, scaled to the thumbnail's width (MovieThumbnailGenerator). One movie
/// at a time (a gallery of a hundred movies must not start a hundred decoders), each given a few seconds.
final class MovieThumbnails: Sendable {
    private let decoding = BlockingQueue(label: "gcapture.web.movie-thumbnails")
    private let cache = ThumbnailCache()

    func thumbnail(ofMovieAt path: String) async -> Data? {
        guard let version = ThumbnailCache.FileVersion(path) else { return nil }
        if let cached = cache.cached(version) { return cached }
        let made = await decoding.run { Self.firstFrame(of: path) }
        if let made { cache.keep(made, for: version) }
        return made
    }

    static func firstFrame(of path: String, width: Int = Thumbnails.size) -> Data? {
        var generator = MovieThumbnailGenerator(url: URL(fileURLWithPath: path))
        generator.width = width
        generator.quality = 75
        generator.timeout = 5
        return try? generator.firstFrameJPEG()
    }
}
