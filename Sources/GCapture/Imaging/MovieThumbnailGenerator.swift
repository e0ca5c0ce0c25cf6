import Foundation
import GStreamerKit

/// A still picture of a recorded movie, in AVAssetImageGenerator's shape: made for a file, configured, then
/// asked for an image. The first frame, decoded by GStreamer (any container and codec a plugin decodes),
/// scaled to `width` with square pixels and encoded by jpegenc. Each call builds and tears down its own
/// decoder and blocks the calling thread until the frame comes or `timeout` passes: callers that serve many
/// files should make them one at a time, off Swift's cooperative pool (a BlockingQueue).
public struct MovieThumbnailGenerator: Sendable {
    public let url: URL
    /// The picture's width in pixels; its height follows the movie's shape.
    public var width = 240
    /// JPEG quality, 1-100.
    public var quality = 75
    /// How long to wait for the first frame, in seconds.
    public var timeout = 5.0

    public init(url: URL) { self.url = url }

    /// The movie's first frame as a JPEG.
    public func firstFrameJPEG() throws(CaptureError) -> Data {
        GStreamer.initialize()
        let description = "filesrc name=file ! decodebin name=decoder decoder. ! queue ! videoconvert ! videoscale "
            + "! video/x-raw,width=\(width),pixel-aspect-ratio=1/1 ! jpegenc quality=\(quality) ! appsink name=sink sync=false max-buffers=1"
        let pipeline: Pipeline
        do {
            pipeline = try Pipeline.launch(description)
        } catch {
            throw .configurationFailed(reason: "the movie decoder could not be built", underlying: error as? GStreamerError)
        }
        defer { pipeline.shutDown() }
        guard let file = pipeline.element(named: "file"), let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
            throw .configurationFailed(reason: "the movie decoder could not be built", underlying: nil)
        }
        do {
            try file.set("location", url.path)
            _ = try pipeline.setState(.playing)
        } catch {
            throw .configurationFailed(reason: "\(url.path) could not be opened as a movie", underlying: error as? GStreamerError)
        }
        guard let frame = sink.pullSample(timeout: ClockTime(max(0, timeout) * 1_000_000_000))?.withBytes({ Data($0) }) else {
            throw .configurationFailed(reason: "no frame decoded from \(url.path) within \(timeout) s", underlying: nil)
        }
        return frame
    }
}
