import CGst
import Foundation

/// What a media file holds, as GStreamer's discoverer reads it.
public struct MediaInfo: Sendable {
    /// Nanoseconds; nil when the file does not say (a Matroska file cut short by a crash).
    public var duration: ClockTime?
    public var videoStreamCount: Int
    public var audioStreamCount: Int

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
        return MediaInfo(duration: duration == ClockTime.none || duration == 0 ? nil : duration,
                         videoStreamCount: count(gst_discoverer_info_get_video_streams(info)),
                         audioStreamCount: count(gst_discoverer_info_get_audio_streams(info)))
    }
}
