import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

final class MovieMemoryTests: XCTestCase {
    /// An encoder that falls behind the camera makes the recording's input queue fill with raw frames: it
    /// must hold no more than its byte budget (then drop the oldest), not a whole second of 1080p frames
    /// (93 MB). A source that is not live delivers frames far faster than x264enc encodes them, so the queue
    /// fills at once, the way it does when the encoder is starved of CPU.
    func testAnEncoderFallingBehindHoldsABoundedAmountOfRawFrames() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let encoding = MovieEncoding(container: .mp4, videoBitRate: 8_000_000, frameRate: 30, fragmentInterval: 1,
                                     withAudio: false, videoEncoder: H264Encoder(factory: "x264enc"),
                                     cameraPixelFormat: "NV12")
        let pipeline = try Pipeline.launch(
            "videotestsrc num-buffers=150 pattern=smpte ! video/x-raw,format=NV12,width=1920,height=1080,framerate=30/1 ! "
                + encoding.description())
        defer { pipeline.shutDown() }
        try pipeline.element(named: "file")?.set("location", folder.appendingPathComponent("movie.mp4").path)
        try pipeline.element(named: "sidecar_file")?.set("location", folder.appendingPathComponent("movie.mkv").path)
        let queue = try XCTUnwrap(pipeline.element(named: "video_in"))
        let frameBytes = 1920 * 1080 * 3 / 2

        _ = try pipeline.setState(.playing)
        var fullest = 0
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline {
            fullest = max(fullest, queue.intProperty("current-level-bytes") ?? 0)
            usleep(1000)
        }
        // It filled up to its budget (the encoder was behind)...
        XCTAssertGreaterThanOrEqual(fullest, VideoEncode.inputQueueBytes - frameBytes,
                                    "the encoder kept up: the queue never filled, so its bound was not exercised")
        // ...and no further: the queue takes a frame while under its budget, so one frame may pass it.
        XCTAssertLessThanOrEqual(fullest, VideoEncode.inputQueueBytes + frameBytes,
                                 "the recording held \(fullest / frameBytes) raw 1080p frames (\(fullest >> 20) MiB)")
    }
}
