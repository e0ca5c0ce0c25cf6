import Foundation
@testable import GCapture
@testable import GCaptureDescription
import XCTest

/// A description's `outputs.timelapse`: read with its positions, and recorded for the whole run beside the
/// description's own movie output.
final class TimelapseDescriptionTests: XCTestCase {
    func testTheKeysAreReadWithTheirDefaults() throws {
        let full = DescriptionReader.read("""
            version: 1
            outputs:
              timelapse:
                interval: 2.5
                frame-rate: 24
                max-duration: 3600
                folder: sky
                name: "sky-{counter}.mp4"
            """, file: "sky.yaml")
        XCTAssertEqual(full.errors.map(\.description), [])
        let timelapse = try XCTUnwrap(full.description?.outputs.timelapse)
        XCTAssertEqual(timelapse.interval, 2.5)
        XCTAssertEqual(timelapse.frameRate, 24)
        XCTAssertEqual(timelapse.maxDuration, 3600)
        XCTAssertEqual(timelapse.folder, "sky")
        XCTAssertEqual(timelapse.name.render(counter: 3, date: Date()), "sky-0003.mp4")

        let defaults = DescriptionReader.read("version: 1\noutputs:\n  timelapse: true\n", file: "plain.yaml")
        XCTAssertEqual(defaults.errors.map(\.description), [])
        XCTAssertEqual(defaults.description?.outputs.timelapse, CaptureDescription.Timelapse())
        XCTAssertEqual(CaptureDescription.Timelapse().interval, 1)
        XCTAssertEqual(CaptureDescription.Timelapse().frameRate, 30)
        XCTAssertEqual(CaptureDescription.Timelapse().name.render(counter: 1, date: Date()), "timelapse-0001.mp4")
        XCTAssertNil(defaults.description?.outputs.timelapse?.maxSize)

        // Under --safe a timelapse stops at a movie's default size, and runs an hour at most.
        let safe = DescriptionReader.read("version: 1\noutputs:\n  timelapse: true\n", file: "safe.yaml", safe: true)
        XCTAssertEqual(safe.description?.outputs.timelapse?.maxSize, SafeLimits.defaultMaxSize)
        let long = DescriptionReader.read("version: 1\noutputs:\n  timelapse:\n    max-duration: 7200\n", file: "long.yaml", safe: true)
        XCTAssertEqual(long.errors.map(\.description), ["long.yaml:4:19: error: outputs.timelapse.max-duration must be from 0.1 to 3600 seconds; 7200 is not"])
    }

    /// Each bad value is an error at its own line and column; every one is reported at once.
    func testBadValuesAreReportedAtTheirPositions() {
        let result = DescriptionReader.read("""
            version: 1
            outputs:
              timelapse:
                interval: 0
                frame-rate: fast
                name: "sky-{counter}.mkv"
                speed: 2
            """, file: "bad.yaml")
        let reported = result.errors.map(\.description)
        for expected in [
            "bad.yaml:4:15: error: outputs.timelapse.interval must be from 0.02 to 86400 seconds; 0 is not",
            "bad.yaml:5:17: error: outputs.timelapse.frame-rate needs a whole number of frames a second, not 'fast'",
            "bad.yaml:6:11: error: outputs.timelapse.name must end in .mp4 or .m4v or .mov (a timelapse is MP4); 'sky-{counter}.mkv' does not",
        ] {
            XCTAssertTrue(reported.contains(expected), "missing \(expected) in \(reported)")
        }
        XCTAssertEqual(reported.count, 4, "the unknown key `speed` is an error too: \(reported)")
        XCTAssertTrue(reported.contains { $0.hasPrefix("bad.yaml:7:5: error: ") && $0.contains("speed") }, "\(reported)")
    }

    /// The session takes two movie outputs: the timelapse records from the start to the stop on its own,
    /// while the description's movie records a clip of its own through `startRecording`.
    func testATimelapseRecordsTheWholeRunBesideTheMovie() async throws {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("both.yaml")
        try """
            version: 1
            camera: test
            microphone: none
            outputs:
              movie:
                audio: false
                folder: clips
              timelapse:
                interval: 0.5
                folder: lapses
            """.write(to: file, atomically: true, encoding: .utf8)
        let described = try DescribedSession(CaptureDescription.load(contentsOf: file))
        let timelapse = try XCTUnwrap(described.timelapse)
        XCTAssertEqual(timelapse.output.timelapseInterval, 0.5)
        XCTAssertNil(described.movieOutput?.timelapseInterval)
        try await within(engineDeadline, "described.start()") { try await described.start() }
        let deadline = Date().addingTimeInterval(10)
        while timelapse.currentFile == nil || timelapse.output.outputFileURL == nil, Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let lapse = try XCTUnwrap(timelapse.currentFile, "the timelapse did not start with the session: \(timelapse.outcomes)")

        let waiter = RecordingWaiter()
        let clip = try described.startRecording(delegate: waiter)
        let started = await waiter.waitForStart()
        XCTAssertTrue(started)
        try await Task.sleep(for: .seconds(3))
        described.movieOutput?.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "described.stop()") { await described.stop() }

        XCTAssertEqual(lapse.path, folder.appendingPathComponent("lapses/timelapse-0001.mp4").path)
        XCTAssertEqual(timelapse.outcomes.map(\.url), [lapse])
        XCTAssertNil(timelapse.outcomes.first?.error)
        let lapsed = try probe(lapse)
        // Three seconds and the clip's start and stop: 6 frames at least, at 30 fps.
        XCTAssertGreaterThanOrEqual(lapsed.videoFrames ?? 0, 6)
        XCTAssertLessThan(lapsed.duration, 1, "a few seconds at 0.5 s make well under a second of movie")
        XCTAssertEqual(lapsed.codecs, ["h264"])
        XCTAssertTrue(try ffmpegDecodes(lapse))
        let clipped = try probe(clip)
        XCTAssertEqual(clipped.duration, 3, accuracy: 0.5)
        XCTAssertGreaterThanOrEqual(clipped.videoFrames ?? 0, 80, "the clip keeps every frame")
        XCTAssertTrue(try ffmpegDecodes(clip))
    }

    /// `gcapture run FILE`: the timelapse starts with the run and, at `quit`, is finished before the process
    /// ends: a plain MP4, no sidecar or temporary file left beside it.
    func testRunRecordsTheTimelapseUntilItQuits() throws {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("lapse.yaml")
        try """
            version: 1
            camera: test
            microphone: none
            outputs:
              timelapse:
                interval: 0.5
                folder: lapses
            """.write(to: file, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", file.path, "--json"], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "the run did not start: \(run.errorOutput)")
        let lapse = folder.appendingPathComponent("lapses/timelapse-0001.mp4")
        // A few frames written (the sidecar grows with each), then quit.
        let sidecar = MovieRecovery.sidecarURL(for: lapse)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, ((try? FileManager.default.attributesOfItem(atPath: sidecar.path)[.size] as? Int) ?? 0) < 100_000 {
            Thread.sleep(forTimeInterval: 0.05)
        }
        Thread.sleep(forTimeInterval: 2)
        run.send("quit")
        XCTAssertTrue(run.waitForExit(timeout: 30), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)

        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: lapse.deletingLastPathComponent().path), [lapse.lastPathComponent],
                       "the finished timelapse is alone in its folder (no sidecar, no temporary file)")
        let probed = try probe(lapse)
        XCTAssertGreaterThanOrEqual(probed.videoFrames ?? 0, 4)
        XCTAssertEqual(probed.codecs, ["h264"])
        XCTAssertFalse(try topLevelBoxes(lapse).contains("moof"), "rewritten as a plain MP4 before the run ended")
        XCTAssertTrue(try ffmpegDecodes(lapse))
    }
}
