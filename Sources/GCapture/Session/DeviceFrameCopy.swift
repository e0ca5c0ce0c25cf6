import GStreamerKit
import Synchronization

/// Where a V4L2 camera's frames stop being the driver's. v4l2src lends frames in the driver's own memory, from
/// a bounded pool, and once stopped keeps the camera open until the last of them comes back (v4l2_drain.c):
/// a frame kept by an output after its camera went (unplugged, switched away from) keeps that camera busy, so
/// an unplugged camera could not come back, nor a camera switched away from be switched back to.
///
/// So the frames are copied (one memcpy a frame: 4 MB at 1080p YUY2) only where they are kept: as they enter
/// a branch whose output says it keeps frames (`CaptureOutput.keepsFrames`: a recording's encoder queue and
/// x264's lookahead, a stream's, a shared encoder's, frames for code kept as a backlog). The outputs that let
/// a frame go when the next one comes (a preview, frames for code that discard late ones, the photo ring,
/// which copies by itself what the pool cannot spare: FrameRing) take the driver's buffers as they are; what
/// they hold when the camera goes (a guard queue's one or two frames, an appsink's one, a sink's last frame)
/// is pushed out within a few frames by the next ones, the session's filler's or the new camera's.
enum DeviceFrameCopy {
    /// Frames copied so far in this process, by every session (tests and the bench read it).
    static let copiedFrames = Atomic<Int>(0)

    /// Makes every frame entering through `pad` the branch's own when a device's pool lent it; frames of
    /// unbounded pools (the test camera's, a decoder's) pass as they are.
    static func copyLentFrames(enteringThrough pad: Pad) {
        pad.addProbe(.buffer) { info in
            if info.replaceBufferWithCopyIfLentByBoundedPool() { copiedFrames.add(1, ordering: .relaxed) }
            return .ok
        }
    }
}
