import GStreamerKit

/// A VP8 encode of the camera for the viewers whose browser takes no H.264 (Firefox without its OpenH264
/// plugin): a tap on the session's video tee, in the graph only while such a viewer watches.
///
///     video tee ─▶ queue ▶ videoconvert ▶ videoscale ▶ vp8enc (realtime) ▶ appsink
final class WebRTCVP8Encode: Sendable {
    let tap: TeeBranch
    private let keyFrameRequests: KeyFrameRequests

    /// Builds and attaches it; `deliver` gets each encoded frame on the tap's streaming thread. Session queue.
    init(for output: CaptureOutput, in graph: any OutputGraph, size: VideoEncode.Size, frameRate: Int, bitRate: Int, keyInterval: Int,
         deliver: @escaping @Sendable (Sample) -> Void) throws(CaptureError) {
        guard GStreamer.hasElement("vp8enc"), GStreamer.hasElement("rtpvp8pay") else {
            throw .missingPackage(element: "vp8enc", package: ElementPackages.package(providing: "vp8enc")!)
        }
        // deadline=1: libvpx's realtime mode; lag-in-frames=0: no frame waits for later ones.
        let bin = try graph.makeBin("queue leaky=downstream max-size-buffers=2 max-size-bytes=0 max-size-time=0 ! videoconvert "
                                    + "! videoscale add-borders=true ! video/x-raw,format=I420,width=\(size.width),height=\(size.height),pixel-aspect-ratio=1/1 "
                                    + "! vp8enc name=vp8 deadline=1 cpu-used=8 end-usage=cbr target-bitrate=\(bitRate) keyframe-max-dist=\(keyInterval) "
                                    + "lag-in-frames=0 threads=2 error-resilient=default "
                                    + "! appsink name=vp8_sink sync=false max-buffers=1 drop=false enable-last-sample=false",
                                    for: output, ghostUnlinkedPads: true)
        // Its queue and the encoder keep frames: the camera's are copied as they enter (DeviceFrameCopy).
        if let input = bin.staticPad("sink") { DeviceFrameCopy.copyLentFrames(enteringThrough: input) }
        bin.element(named: "vp8_sink").flatMap(AppSink.init)?.setSampleHandler(deliver)
        keyFrameRequests = KeyFrameRequests(to: bin.element(named: "vp8"))
        tap = try graph.attachTap(bin, to: .video)
    }

    /// A key frame now (a new viewer, a lost picture). Any thread.
    func requestKeyFrame() { keyFrameRequests.request() }
}
