import Foundation
import GStreamerKit
import Synchronization

/// Turns a frame into a JPEG with EXIF. libjpeg encodes the frame's YUV planes where they lie
/// (YUVJPEGEncoder), with the EXIF segment built from the photo's tags. GStreamer is needed only to turn
/// pixels (videoflip) or to convert a format libjpeg cannot read raw (videoconvert): a small pipeline of
/// its own, apart from the session's graph so that a failure there can never stop the camera, which frames
/// skip when they need neither.
final class PhotoEncoder: Sendable {
    // Past init, the pipeline and its elements are used only inside `pushing` and deinit.
    private let pipeline: Pipeline
    private let source: SourcePad
    private let flip: Element
    private let sink: AppSink
    /// One JPEG block per photo being processed or just delivered; more are allocated when callers keep theirs.
    private let jpegBlocks = MemoryBlockPool(keeping: CapturePhotoOutput.maxInFlightCaptures)
    /// The pipeline takes one frame at a time, so its flip's direction is one value behind one lock, held
    /// for the whole push; encoding itself runs in parallel. Identity is what init leaves it turned to.
    private let pushing = Locked(FrameTransform.identity.rawValue)
    /// What the pipeline's bus reported since the last frame went in: the reason a frame did not come out.
    private let reported = BusReport()

    init() throws(CaptureError) {
        do {
            // async=false: the sink never waits for a preroll, which would block the pushing thread.
            pipeline = try Pipeline.launch("videoflip name=flip ! videoconvert "
                                           + "! video/x-raw,format={\(YUVJPEGEncoder.formats.joined(separator: ","))} "
                                           + "! appsink name=sink sync=false async=false enable-last-sample=false")
            guard let flip = pipeline.element(named: "flip"),
                  let sink = pipeline.element(named: "sink").flatMap(AppSink.init) else {
                throw GStreamerError(kind: .parse, message: "the photo encoder lacks an element")
            }
            self.flip = flip
            self.sink = sink
            try flip.letVideoFlipPassFramesThrough()
            // Read on the pushing thread: pushes run the elements synchronously, so whatever they post about
            // a frame is here before the push returns.
            pipeline.bus.setHandler(for: [.error, .warning]) { [reported] message in
                switch message.kind {
                case .error(let error):
                    // The capture fails with it: the log line is the detail.
                    Log.photo.notice("photo encoder: \(error.reason)", metadata: error.logMetadata)
                    reported.first.withLock { if $0 == nil { $0 = error } }
                case .warning(let warning):
                    Log.photo.warning("photo encoder: \(warning.reason)", metadata: warning.logMetadata)
                    reported.first.withLock { if $0 == nil { $0 = warning } }
                default: break
                }
            }
            try pipeline.setState(.playing)
            source = try SourcePad(feeding: flip)
        } catch let error as GStreamerError {
            throw error.kind == .parse ? .missingPlugin("videoflip/videoconvert") : .encodingFailed(reason: "the photo encoder failed", underlying: error)
        } catch {
            throw .encodingFailed(reason: "the photo encoder failed: \(error)", underlying: nil)
        }
    }

    deinit { pipeline.shutDown() }

    /// An element that posted an error has stopped: back to NULL and PLAYING, so the next photo is not
    /// refused for this frame's fault.
    private func restart() {
        do {
            try pipeline.setState(.null)
            try pipeline.setState(.playing)
        } catch {
            Log.photo.error("photo encoder could not restart: \(error)")
        }
    }

    /// Encodes one frame, on this thread (milliseconds): call off the caller's thread.
    func encode(_ frame: CapturedFrame, quality: Int, transform: FrameTransform, rotatePixels: Bool,
                tags: TagList) throws(CaptureError) -> Data {
        var tags = tags
        tags.set("image-orientation", rotatePixels ? "rotate-0" : transform.imageOrientation)
        let direction = rotatePixels ? transform : .identity
        var sample = frame.sample, info = frame.info
        if direction != .identity || YUVJPEGEncoder.layout(of: info.format) == nil {
            (sample, info) = try prepare(frame, direction: direction)
        }
        return try YUVJPEGEncoder.encode(sample, info: info, quality: quality, app1: tags.exifSegment(pixelWidth: info.width, pixelHeight: info.height),
                                         blocks: jpegBlocks)
    }

    /// The frame turned and in a format libjpeg reads: the frame's own buffer goes in (a reference, no
    /// copy) and, when the push returns, the result waits in the sink.
    private func prepare(_ frame: CapturedFrame, direction: FrameTransform) throws(CaptureError) -> (Sample, VideoInfo) {
        try pushing.withLock { (current: inout String) throws(CaptureError) -> (Sample, VideoInfo) in
            if direction.rawValue != current {
                do {
                    try flip.set("video-direction", direction.rawValue)
                } catch {
                    throw .encodingFailed(reason: "the photo encoder refused to turn the frame", underlying: error as? GStreamerError)
                }
                current = direction.rawValue
            }
            reported.first.withLock { $0 = nil }
            let pushed = source.push(frame.sample)
            let sample = sink.pullSample(timeout: 0)
            // A warning counts too: videoconvert warns about a buffer it cannot map, then passes on an unwritten one.
            let cause = reported.first.withLock { $0 }
            guard pushed, cause == nil, let sample, let info = sample.videoInfo else {
                if !pushed { restart() }
                throw .encodingFailed(reason: "the photo encoder could not turn or convert a \(frame.info.width)x\(frame.info.height) "
                                           + "\(frame.info.format) frame" + (cause.map { ": \($0.reason)" } ?? ""), underlying: cause)
            }
            return (sample, info)
        }
    }
}

private extension GStreamerError {
    /// The element's own words: the debug text's last line ("invalid video buffer received") says more than
    /// a core error's generic message ("Internal GStreamer error: code not implemented").
    var reason: String {
        debug?.split(separator: "\n").last.map(String.init) ?? message
    }
}

/// The first error or warning a small pipeline's bus reported, shared with its handler.
private final class BusReport: Sendable {
    let first = Locked<GStreamerError?>(nil)
}

extension Locked where Value == PhotoEncoder? {
    /// The encoder, made on first use: its pipeline is built only once a photo needs it.
    func madeOnFirstUse() throws(CaptureError) -> PhotoEncoder {
        try withLock { (encoder: inout PhotoEncoder?) throws(CaptureError) -> PhotoEncoder in
            if let encoder { return encoder }
            let made = try PhotoEncoder()
            encoder = made
            return made
        }
    }
}
