import Foundation
import GCapture

/// What the index records of a media file, read from the file itself: a photo's header, a movie's streams.
struct MediaFileMetadata: Equatable, Sendable {
    var mediaType: AssetMediaType
    /// As displayed (a photo's EXIF orientation applied).
    var pixelWidth = 0
    var pixelHeight = 0
    var orientation = 1
    /// When the photo was taken, if its EXIF says.
    var dateTaken: Date?
    var dateTakenHasSubseconds = false
    var duration: TimeInterval = 0

    /// When the asset was made: the EXIF moment, else when the file was written. EXIF keeps whole seconds;
    /// a file written within the two seconds after its EXIF moment was written when the photo was taken, so its
    /// time is the finer one (a burst's photos then keep their order).
    func creationDate(fileDate: Date) -> Date {
        guard let dateTaken else { return fileDate }
        let after = fileDate.timeIntervalSince(dateTaken)
        return !dateTakenHasSubseconds && after >= 0 && after < 2 ? fileDate : dateTaken
    }

    /// Reads `path`. A photo that is not a JPEG, or a movie GStreamer cannot read, throws: the caller decides
    /// whether that refuses a request (adding a file) or only leaves the size unknown (indexing a folder).
    static func read(path: String, mediaType: AssetMediaType, movieTimeout: Double = 10) throws -> MediaFileMetadata {
        switch mediaType {
        case .image:
            let header = try JPEGHeader.read(path: path)
            let size = header.displayedSize
            return MediaFileMetadata(mediaType: .image, pixelWidth: size.width, pixelHeight: size.height,
                                     orientation: header.orientation, dateTaken: header.dateTaken,
                                     dateTakenHasSubseconds: header.dateTakenHasSubseconds)
        case .video:
            let info = try MovieFileInfo.read(URL(fileURLWithPath: path), timeout: movieTimeout)
            guard info.videoTrackCount > 0 else { throw PhotoLibraryError.unsupportedResource(URL(fileURLWithPath: path), reason: "it has no video") }
            return MediaFileMetadata(mediaType: .video, pixelWidth: info.pixelWidth, pixelHeight: info.pixelHeight,
                                     duration: info.duration ?? 0)
        case .unknown, .audio:
            return MediaFileMetadata(mediaType: mediaType)
        }
    }
}
