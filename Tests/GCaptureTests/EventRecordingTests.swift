import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// CaptureEventRecorder: clips that begin before their trigger (the movie output's pre-roll) and end a
/// post-roll after the last one, proven by the capture times the test camera stamps into the frames.
final class EventRecordingTests: XCTestCase {
    private let stampedCamera = CaptureDevice.makeTestCamera(uniqueID: "test-stamped-events",
                                                             options: .init(maxFrameRate: 30, stampsCaptureTime: true))

    /// The recorder's events, collected as they come.
    private final class EventLog: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [CaptureEventRecorder.Event] = []
        private var task: Task<Void, Never>?
        init(_ recorder: CaptureEventRecorder) {
            let stream = recorder.events()
            task = Task { [weak self] in for await event in stream { self?.lock.withLock { self?.events.append(event) } } }
        }
        var all: [CaptureEventRecorder.Event] { lock.withLock { events } }
        var ended: [(clip: CaptureEventRecorder.Clip, record: EventClipRecord, error: CaptureError?)] {
            all.compactMap { if case .ended(let clip, let record, let error) = $0 { (clip, record, error) } else { nil } }
        }
        func waitForEnded(_ count: Int, seconds: Double) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while ended.count < count {
                guard Date() < deadline else { throw DeadlineExceeded(description: "\(count) clips did not end within \(seconds) s: \(all)") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// A trigger, another a second later: one clip, from the pre-roll before the first to the post-roll after
    /// the second, with its record beside it.
    func testTwoTriggersMakeOneClipFromThePreRollToThePostRoll() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.preRollDuration = 2
        let session = try await startSession(camera: stampedCamera, microphone: .testMicrophone, outputs: [movie])
        let counter = Locked(0)
        let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: 1.5) {
            folder.appendingPathComponent("event-\(counter.withLock { $0 += 1; return $0 }).mp4")
        }
        let log = EventLog(recorder)
        try await Task.sleep(for: .seconds(3))
        let first = monotonicMilliseconds()
        guard case .began(let url) = try recorder.trigger(.init(source: "test")) else { return XCTFail("the first trigger began no clip") }
        try await Task.sleep(for: .seconds(1))
        let second = monotonicMilliseconds()
        XCTAssertEqual(try recorder.trigger(.init(source: "motion", detail: "box")), .extended(url))
        try await log.waitForEnded(1, seconds: engineDeadline)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let begins = millisecondsFrom(first, to: try captureTimeStamp(url, width: 640))
        let ends = millisecondsFrom(second, to: try captureTimeStamp(url, width: 640, lastFrame: true))
        let probed = try probe(url)
        let ended = try XCTUnwrap(log.ended.first)
        print("event clip: begins \(Int(begins)) ms from the first trigger, ends \(Int(ends)) ms after the second; \(probed.duration) s; "
              + "record: pre-roll \(ended.record.preRoll) s, duration \(ended.record.duration ?? 0) s")
        XCTAssertNil(ended.error)
        XCTAssertLessThanOrEqual(begins, -2000 + 1, "the clip does not hold its pre-roll")
        XCTAssertGreaterThan(begins, -3000 - 34)
        XCTAssertEqual(ends, 1500, accuracy: 300, "the clip does not end a post-roll after the last trigger")
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertTrue(try ffmpegDecodes(url))

        let record = try EventClipRecord.read(forClip: url)
        // As written, to the millisecond the file keeps.
        XCTAssertEqual(record.start.timeIntervalSince(ended.record.start), 0, accuracy: 0.001)
        XCTAssertEqual(try XCTUnwrap(record.end).timeIntervalSince(try XCTUnwrap(ended.record.end)), 0, accuracy: 0.001)
        XCTAssertEqual(record.file, url.lastPathComponent)
        XCTAssertEqual(record.triggers.map(\.source), ["test", "motion"])
        XCTAssertEqual(record.triggers.last?.detail, "box")
        XCTAssertTrue(record.complete)
        XCTAssertFalse(record.open || record.recovered)
        XCTAssertEqual(record.preRoll, -begins / 1000, accuracy: 0.05)
        XCTAssertEqual(try XCTUnwrap(record.duration), probed.duration, accuracy: 0.1)
        XCTAssertEqual(try XCTUnwrap(record.end).timeIntervalSince(record.start), probed.duration, accuracy: 0.3)
        XCTAssertEqual(log.all.count, 3, "began, extended, ended: \(log.all)")
    }

    /// No post-roll: the clip is stopped as soon as it has started (a timer that fires before the start
    /// looks again), and holds its pre-roll.
    func testAClipWithoutAPostRollEndsOnceStarted() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.preRollDuration = 1
        let session = try await startSession(camera: stampedCamera, outputs: [movie])
        let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: 0) { folder.appendingPathComponent("instant.mp4") }
        let log = EventLog(recorder)
        try await Task.sleep(for: .seconds(2))
        guard case .began(let url) = try recorder.trigger(.init(source: "test")) else { return XCTFail("no clip began") }
        try await log.waitForEnded(1, seconds: engineDeadline)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(log.ended.first?.error)
        XCTAssertEqual(try probe(url).duration, log.ended.first?.record.preRoll ?? 0, accuracy: 0.3)
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// A holding trigger (motion while it goes on) keeps the clip going past its post-roll until released;
    /// the post-roll counts from the release.
    func testAHoldingTriggerLastsUntilReleasedAndThePostRollCountsFromThere() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let session = try await startSession(camera: stampedCamera, outputs: [movie])
        let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: 0.5) { folder.appendingPathComponent("held.mp4") }
        let log = EventLog(recorder)
        guard case .began(let url) = try recorder.trigger(.init(source: "motion"), holding: true) else { return XCTFail("no clip began") }
        try await Task.sleep(for: .seconds(2))
        XCTAssertTrue(movie.isRecording && !movie.isRecordingPaused, "the held clip ended or paused within its post-roll")
        let released = monotonicMilliseconds()
        recorder.release(source: "motion")
        try await log.waitForEnded(1, seconds: engineDeadline)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let ends = millisecondsFrom(released, to: try captureTimeStamp(url, width: 640, lastFrame: true))
        XCTAssertEqual(ends, 500, accuracy: 250, "the post-roll does not count from the release")
        XCTAssertEqual(try probe(url).duration, 2.5, accuracy: 0.3)
        XCTAssertEqual(log.ended.first?.record.triggers.map(\.source), ["motion"])
    }

    /// Motion starts the event: the scripted object appears, the motion output sees it, and the clip (with its
    /// pre-roll) holds the frames before the object and the frame it first shows in.
    func testMotionStartsAClipThatHoldsTheObjectsFirstFrame() async throws {
        let folder = try temporaryFolder()
        let object = CGRect(x: 0.10, y: 0.15, width: 0.25, height: 0.30)
        let camera = CaptureDevice.makeTestCamera(uniqueID: "test-motion-event", options: .init(
            pattern: .smpte, motion: 0, noiseLevel: 4, maxFrameRate: 30,
            scene: .init(object: .init(rect: object, luma: 16, appearsAfter: 3.5))))
        let movie = CaptureMovieFileOutput(), motion = CaptureMotionOutput()
        movie.preRollDuration = 2
        let session = try await startSession(camera: camera, outputs: [movie, motion])
        let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: 0.5) { folder.appendingPathComponent("motion.mp4") }
        recorder.follow(motion)
        let log = EventLog(recorder)
        try await log.waitForEnded(1, seconds: engineDeadline)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let ended = try XCTUnwrap(log.ended.first)
        let url = ended.clip.url
        let duration = try probe(url).duration
        // The object's place: the bars' bright luma before it appeared, its black after.
        let before = try meanLuma(url, at: 0, in: object), after = try meanLuma(url, at: duration - 0.2, in: object)
        print("motion clip: \(duration) s, pre-roll \(ended.record.preRoll) s, the object's place \(before) then \(after); "
              + "triggers \(ended.record.triggers.map { "\($0.source) \($0.detail ?? "")" })")
        XCTAssertNil(ended.error)
        XCTAssertEqual(ended.record.triggers.first?.source, "motion")
        XCTAssertGreaterThanOrEqual(ended.record.preRoll, 2)
        XCTAssertGreaterThan(before, 120, "the clip's first frame already shows the object: it does not hold its appearance")
        XCTAssertLessThan(after, 60, "the clip's last frames do not show the object")
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// The mean luma of `rect` (normalized) in the frame at `seconds` of a movie, by ffmpeg.
    private func meanLuma(_ url: URL, at seconds: Double, in rect: CGRect) throws -> Double {
        let raw = FileManager.default.temporaryDirectory.appendingPathComponent("luma-\(UUID().uuidString).gray")
        defer { try? FileManager.default.removeItem(at: raw) }
        // The middle half of the rectangle, away from its edges.
        let crop = String(format: "crop=iw*%.4f:ih*%.4f:iw*%.4f:ih*%.4f", rect.width / 2, rect.height / 2,
                          rect.minX + rect.width / 4, rect.minY + rect.height / 4)
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-ss", String(seconds), "-i", url.path,
                                                      "-frames:v", "1", "-vf", crop + ",format=gray", "-f", "rawvideo", raw.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let pixels = [UInt8](try Data(contentsOf: raw))
        return pixels.isEmpty ? -1 : Double(pixels.reduce(0) { $0 + Int($1) }) / Double(pixels.count)
    }

    /// With a gap longer than the post-roll, the quiet part of an event is paused, not recorded, and a
    /// trigger within the gap goes on in the same file; the gap's end stops it.
    func testATriggerWithinTheGapResumesTheSameClip() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let session = try await startSession(camera: stampedCamera, microphone: .testMicrophone, outputs: [movie])
        let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: 0.5, eventGap: 2) { folder.appendingPathComponent("gap.mp4") }
        let log = EventLog(recorder)
        let started = Date()
        guard case .began(let url) = try recorder.trigger(.init(source: "test")) else { return XCTFail("no clip began") }
        try await Task.sleep(for: .milliseconds(1500))
        XCTAssertTrue(movie.isRecordingPaused, "the post-roll is over: the clip waits in its gap")
        XCTAssertEqual(try recorder.trigger(.init(source: "test")), .extended(url))
        try await log.waitForEnded(1, seconds: engineDeadline)
        let took = Date().timeIntervalSince(started)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let probed = try probe(url)
        print("gap clip: \(probed.duration) s of movie over \(took) s")
        XCTAssertEqual(probed.duration, 1.0, accuracy: 0.3, "two post-rolls of 0.5 s, the pause left out")
        XCTAssertEqual(took, 1.5 + 2, accuracy: 0.5, "the clip stops when the gap after the last trigger is over")
        XCTAssertTrue(try ffmpegDecodes(url))
        XCTAssertEqual(log.ended.count, 1)
    }
}
