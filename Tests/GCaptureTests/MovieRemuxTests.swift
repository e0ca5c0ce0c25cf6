import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

final class MovieRemuxTests: XCTestCase {
    /// A fragmented MP4 shaped like a recording's (H.264 and AAC in fragments of a second), written by
    /// GStreamer faster than real time; with `jitter`, its frames are up to 6 ms early, as a real camera's
    /// timestamps are.
    private func makeRecordingLikeMovie(at url: URL, seconds: Int, jitter: Bool = false) throws {
        guard let aac = MovieEncoding.aacEncoder else { throw TestEnvironment.missing("voaacenc or avenc_aac") }
        let pipeline = try Pipeline.launch(
            "videotestsrc num-buffers=\(seconds * 30) pattern=snow ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 "
                + "! x264enc name=enc speed-preset=ultrafast key-int-max=30 bitrate=1000 ! h264parse ! video/x-h264,stream-format=avc,alignment=au "
                + "! queue ! mp4mux name=mux fragment-duration=1000 ! filesink name=out  "
                + "audiotestsrc num-buffers=\(seconds * 47) ! audio/x-raw,rate=48000,channels=2 ! \(aac) bitrate=128000 ! aacparse ! queue ! mux.audio_0")
        defer { pipeline.shutDown() }
        try pipeline.element(named: "out")?.set("location", url.path)
        if jitter {
            let frames = Locked(0)
            pipeline.element(named: "enc")?.staticPad("sink")?.addProbe(.buffer) { info in
                let frame = frames.withLock { count in
                    defer { count += 1 }
                    return count
                }
                info.shiftBufferTimestamps(earlierBy: ClockTime(frame * 7 % 4) * 2 * .millisecond)
                return .ok
            }
        }
        try pipeline.setState(.playing)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            guard let message = pipeline.bus.pop(timeout: 100 * .millisecond) else { continue }
            switch message.kind {
            case .endOfStream: return
            case .error(let error): throw error
            default: continue
            }
        }
        XCTFail("writing the test movie took over 60 s")
    }

    /// Every clean stop copies the recording into a plain MP4. The demuxer reads much faster than the muxer
    /// writes; behind unbounded queues it read the whole movie into memory before the muxer caught up (a
    /// minute-long recording: 1,800 buffers, and the soak's memory grew by megabytes per recording). What is
    /// read from the file but not yet muxed must stay a second or two of the movie, not all of it.
    func testDefragmentingReadsOnlyAFewSecondsAheadOfTheMuxer() throws {
        let folder = try temporaryFolder()
        let source = folder.appendingPathComponent("fragmented.mp4"), plain = folder.appendingPathComponent("plain.mp4")
        let seconds = 20
        try makeRecordingLikeMovie(at: source, seconds: seconds)
        let size = try fileSize(source)

        // Bytes pulled from the file less bytes that reached the muxer: the movie held in between.
        let bytes = Locked((read: 0, muxed: 0, mostAhead: 0))
        try MovieRemux.remux(source, as: .mp4, tracks: .init(video: true, audio: true), replacing: plain, rotation: nil) { pipeline in
            pipeline.element(named: "in")?.staticPad("src")?.addProbe(.buffer) { info in
                bytes.withLock { $0.read += info.bufferSize ?? 0; $0.mostAhead = max($0.mostAhead, $0.read - $0.muxed) }
                return .ok
            }
            for name in ["video_0", "audio_0"] {
                pipeline.element(named: "mux")?.staticPad(name)?.addProbe(.buffer) { info in
                    bytes.withLock { $0.muxed += info.bufferSize ?? 0 }
                    return .ok
                }
            }
        }

        let measured = bytes.withLock { $0 }
        XCTAssertGreaterThan(measured.muxed, size * 9 / 10, "the probes did not see the movie pass (read \(measured.read) bytes of \(size))")
        let movie = try probe(plain)
        XCTAssertEqual(movie.videoFrames, seconds * 30, "the copy lost video frames")
        XCTAssertNotNil(movie.stream("audio"), "the copy lost its audio")
        let secondsAhead = Double(measured.mostAhead) / Double(size) * Double(seconds)
        XCTAssertLessThan(secondsAhead, 4, String(format: "the remux held %.1f s of the %d s movie (%d of %d bytes) read ahead of the muxer",
                                                  secondsAhead, seconds, measured.mostAhead, size))
    }

    /// qtdemux gives each fragment of a movie with jittery frame durations its own frame rate; the copy must
    /// still describe its video once (mp4mux wrote a sample description per fragment, all alike), and play.
    func testAMovieWithJitteryFrameDurationsIsCopiedWithOneSampleDescriptionPerTrack() throws {
        let folder = try temporaryFolder()
        let source = folder.appendingPathComponent("jittery.mp4"), plain = folder.appendingPathComponent("plain.mp4")
        try makeRecordingLikeMovie(at: source, seconds: 5, jitter: true)
        try MovieRemux.remux(source, as: .mp4, tracks: .init(video: true, audio: true), replacing: plain, rotation: nil)
        XCTAssertEqual(try sampleDescriptionCounts(plain), [1, 1])
        let movie = try probe(plain)
        XCTAssertEqual(movie.videoFrames, 5 * 30)
        XCTAssertEqual(movie.duration, 5, accuracy: 0.1)
        XCTAssertTrue(try ffmpegDecodes(plain))
    }
}
