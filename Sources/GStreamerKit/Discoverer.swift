import CGst
import Foundation

/// What a media file holds, as GStreamer's discoverer reads it.
public struct MediaInfo: Sendable {
    /// Nanoseconds; nil when the file does not say (a Matroska file cut short by a crash).
    public var duration: ClockTime?
    public var videoStreamCount: Int
    public var audioStreamCount: Int
    /// The first video stream's picture size, when it has one.
    public var videoSize: (width: Int, height: Int)?

    /// Reads a file's streams and duration. Blocks for up to `timeout`.
    public static func discover(_ url: URL, timeout: ClockTime = 10 * .second) throws -> MediaInfo {
        GStreamer.initialize()
        var error: UnsafeMutablePointer<GError>?
        guard let discoverer = gst_discoverer_new(timeout, &error) else {
            throw error.map { GStreamerError(consuming: $0) } ?? GStreamerError(kind: .missingElement, message: "no discoverer")
        }
        defer { g_object_unref(UnsafeMutableRawPointer(discoverer)) }
        let info = gst_discoverer_discover_uri(discoverer, url.absoluteString, &error)
        if let error {
            if let info { g_object_unref(UnsafeMutableRawPointer(info)) }
            throw GStreamerError(consuming: error, debug: url.path)
        }
        guard let info else { throw GStreamerError(kind: .parse, message: "cannot read \(url.path)") }
        defer { g_object_unref(UnsafeMutableRawPointer(info)) }
        func count(_ list: UnsafeMutablePointer<GList>?) -> Int {
            defer { gst_discoverer_stream_info_list_free(list) }
            return Int(g_list_length(list))
        }
        let duration = gst_discoverer_info_get_duration(info)
        let videoStreams = gst_discoverer_info_get_video_streams(info)
        defer { gst_discoverer_stream_info_list_free(videoStreams) }
        var videoSize: (width: Int, height: Int)?
        if let first = videoStreams?.pointee.data {
            let video = OpaquePointer(first)
            let width = Int(gst_discoverer_video_info_get_width(video)), height = Int(gst_discoverer_video_info_get_height(video))
            if width > 0, height > 0 { videoSize = (width, height) }
        }
        return MediaInfo(duration: duration == ClockTime.none || duration == 0 ? nil : duration,
                         videoStreamCount: Int(g_list_length(videoStreams)),
                         audioStreamCount: count(gst_discoverer_info_get_audio_streams(info)), videoSize: videoSize)
    }
}
