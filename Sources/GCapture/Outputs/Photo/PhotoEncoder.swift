import Foundation
import GStreamerKit

/// Turns a frame into a JPEG with EXIF: a small pipeline of its own (appsrc → videoflip → jpegenc →
/// jifmux → appsink) that stays up between photos, apart from the session's graph so that an encoding
/// failure can never stop the camera. One photo at a time: properties are set per photo.
final class PhotoEncoder: @unchecked Sendable {
    private let pipeline: Pipeline
    private let source: AppSource
    private let flip: Element
    private let encoder: Element
    private let muxer: Element
    private let sink: AppSink
    private let lock = NSLock()

    init() throws(CaptureError) {
        do {
            pipeline = try Pipeline.launch("appsrc name=src format=time ! videoflip name=flip ! jpegenc name=enc "
                                           + "! jifmux name=mux ! appsink name=sink sync=false enable-last-sample=false")
            guard let src = pipeline.element(named: "src").flatMap(AppSource.init),
                  let flip = pipeline.element(named: "flip"), let encoder = pipeline.element(named: "enc"),
                  let muxer = pipeline.element(named: "mux"),
                  let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
                throw GStreamerError(kind: .parse, message: "the photo encoder lacks an element")
            }
            source = src
            self.flip = flip
            self.encoder = encoder
            self.muxer = muxer
            self.sink = sink
            // GStreamer 1.22's videoflip, made with the identity direction, still copies every frame; once
            // its direction has changed and come back it passes frames through untouched.
            try flip.set("video-direction", "90r")
            try flip.set("video-direction", "identity")
            try pipeline.setState(.playing)
        } catch let error as GStreamerError {
            throw error.kind == .parse ? .missingPlugin("jpegenc/jifmux/videoflip") : .configurationFailed(reason: "the photo encoder failed", underlying: error)
        } catch {
            throw .configurationFailed(reason: "the photo encoder failed: \(error)", underlying: nil)
        }
    }

    deinit { pipeline.shutDown() }

    /// Encodes one frame. Blocks for the encode (milliseconds); call off the caller's thread.
    func encode(_ frame: CapturedFrame, quality: Int, transform: FrameTransform, rotatePixels: Bool,
                tags: TagList, timeout: TimeInterval = 5) throws(CaptureError) -> Data {
        lock.lock()
        defer { lock.unlock() }
        var tags = tags
        tags.set("image-orientation", rotatePixels ? "rotate-0" : transform.imageOrientation)
        do {
            try flip.set("video-direction", rotatePixels ? transform.rawValue : "identity")
            try encoder.set("quality", quality)
            muxer.setTags(tags)
        } catch {
            throw .configurationFailed(reason: "the photo encoder refused its settings", underlying: error as? GStreamerError)
        }
        // The frame's own buffer goes in (a reference, no copy); the JPEG comes out as Data over the
        // muxer's buffer (no copy either).
        guard source.push(frame.sample), let sample = sink.pullSample(timeout: ClockTime(timeout * 1e9)) else {
            throw .timedOut("encoding the photo")
        }
        return sample.mappedData() ?? Data()
    }
}
