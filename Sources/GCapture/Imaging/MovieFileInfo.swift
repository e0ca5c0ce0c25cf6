import Foundation
import GStreamerKit

/// What a movie file holds, read by GStreamer's discoverer (any container and codec a plugin reads): for the
/// layers above the engine, which do not reach GStreamer themselves (the photo library's index). Blocks the
/// calling thread for up to `timeout`.
public struct MovieFileInfo: Sendable, Equatable {
    /// Seconds; nil when the file does not say (a Matroska file cut short by a crash).
    public var duration: Double?
    /// The first video stream's picture size; 0 without video.
    public var pixelWidth: Int
    public var pixelHeight: Int
    public var videoTrackCount: Int
    public var audioTrackCount: Int

    public static func read(_ url: URL, timeout: Double = 10) throws(CaptureError) -> MovieFileInfo {
        do {
            let info = try MediaInfo.discover(url, timeout: ClockTime(max(0.1, timeout) * 1e9))
            return MovieFileInfo(duration: info.duration.map { Double($0) / 1e9 }, pixelWidth: info.videoSize?.width ?? 0,
                                 pixelHeight: info.videoSize?.height ?? 0, videoTrackCount: info.videoStreamCount,
                                 audioTrackCount: info.audioStreamCount)
        } catch {
            throw .configurationFailed(reason: "\(url.path) cannot be read as a movie", underlying: error as? GStreamerError)
        }
    }
}
