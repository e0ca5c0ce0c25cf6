import Foundation
import GStreamerKit

/// Turns a frame into a JPEG with EXIF: a small pipeline of its own (videoflip → jpegenc → jifmux →
/// appsink) that stays up between photos, apart from the session's graph so that an encoding failure can
/// never stop the camera. The frame is pushed through it on the caller's thread (a SourcePad: no streaming
/// thread to hand it to and wait for). One photo at a time: properties are set per photo, when they change.
final class PhotoEncoder: @unchecked Sendable {
    private let pipeline: Pipeline
    private let source: SourcePad
    private let flip: Element
    private let encoder: Element
    private let muxer: Element
    private let sink: AppSink
    private let lock = NSLock()
    private var direction = ""
    private var quality = -1

    init() throws(CaptureError) {
        do {
            // async=false: the sink never waits for a preroll, which would block the pushing thread.
            pipeline = try Pipeline.launch("videoflip name=flip ! jpegenc name=enc ! jifmux name=mux "
                                           + "! appsink name=sink sync=false async=false enable-last-sample=false")
            guard let flip = pipeline.element(named: "flip"), let encoder = pipeline.element(named: "enc"),
                  let muxer = pipeline.element(named: "mux"),
                  let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
                throw GStreamerError(kind: .parse, message: "the photo encoder lacks an element")
            }
            self.flip = flip
            self.encoder = encoder
            self.muxer = muxer
            self.sink = sink
            // GStreamer 1.22's videoflip, made with the identity direction, still copies every frame; once
            // its direction has changed and come back it passes frames through untouched.
            try flip.set("video-direction", "90r")
            try flip.set("video-direction", "identity")
            direction = "identity"
            try pipeline.setState(.playing)
            source = try SourcePad(feeding: flip)
        } catch let error as GStreamerError {
            throw error.kind == .parse ? .missingPlugin("jpegenc/jifmux/videoflip") : .configurationFailed(reason: "the photo encoder failed", underlying: error)
        } catch {
            throw .configurationFailed(reason: "the photo encoder failed: \(error)", underlying: nil)
        }
    }

    deinit { pipeline.shutDown() }

    /// Encodes one frame, on this thread (milliseconds): call off the caller's thread.
    func encode(_ frame: CapturedFrame, quality: Int, transform: FrameTransform, rotatePixels: Bool,
                tags: TagList) throws(CaptureError) -> Data {
        lock.lock()
        defer { lock.unlock() }
        var tags = tags
        tags.set("image-orientation", rotatePixels ? "rotate-0" : transform.imageOrientation)
        let direction = rotatePixels ? transform.rawValue : "identity"
        do {
            if direction != self.direction {
                try flip.set("video-direction", direction)
                self.direction = direction
            }
            if quality != self.quality {
                try encoder.set("quality", quality)
                self.quality = quality
            }
            muxer.setTags(tags)
        } catch {
            throw .configurationFailed(reason: "the photo encoder refused its settings", underlying: error as? GStreamerError)
        }
        // The frame's own buffer goes in (a reference, no copy); when the push returns the JPEG waits in
        // the sink, and comes out as Data over the muxer's buffer (no copy either).
        guard source.push(frame.sample), let sample = sink.pullSample(timeout: 0) else {
            throw .configurationFailed(reason: "the photo encoder returned no JPEG for a \(frame.info.width)x\(frame.info.height) \(frame.info.format) frame", underlying: nil)
        }
        return sample.mappedData() ?? Data()
    }
}
