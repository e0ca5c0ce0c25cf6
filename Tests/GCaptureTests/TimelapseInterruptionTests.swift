import Foundation
@testable import GCapture
import XCTest

/// A timelapse across an interruption of the camera (InterruptionDriver does what the session does): on one
/// timeline with the session's black frames at the interval, or finalized at the interruption and resumed
/// in the next file without them.
final class TimelapseInterruptionTests: XCTestCase {
    private let camera = CaptureDevice.makeTestCamera(uniqueID: "test-timelapse-gap", options: .init(maxFrameRate: 30))

    private func pause(_ seconds: Double) async throws { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }

    func testTheGapIsBlackFramesAtTheIntervalOnOneTimeline() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        movie.timelapseInterval = 0.25
        let session = try await startSession(camera: camera, outputs: [movie, driver])
        let url = folder.appendingPathComponent("gap.mp4")
        let log = RecordingLog()
        movie.startRecording(to: url, recordingDelegate: log)
        try await log.wait(for: 1, "the timelapse's start")
        try await pause(1.5)
        try await driver.interrupt(.videoDeviceUnplugged)
        try await pause(1.5)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await pause(1.5)
        movie.stopRecording()
        try await log.wait(for: 2, "the timelapse's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        XCTAssertEqual(log.events, [.started(url), .finished(url, nil)])
        let lumas = try frameLumas(url)
        let black = lumas.filter { $0 < 24 }.count
        print("timelapse through a 1.5 s gap at 0.25 s: \(lumas.count) frames, \(black) black: \(lumas)")
        XCTAssertEqual(lumas.count, 18, accuracy: 3, "4.5 s at 0.25 s")
        XCTAssertEqual(black, 6, accuracy: 2, "the gap's 1.5 s at 0.25 s")
        XCTAssertGreaterThan(lumas.first ?? 0, 40)
        XCTAssertGreaterThan(lumas.last ?? 0, 40, "the camera's frames after recovery are in the file")
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    func testFinalizeAndResumeSplitsTheTimelapseWithoutFillerFrames() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput(), driver = InterruptionDriver()
        movie.timelapseInterval = 0.25
        movie.interruptionBehavior = .finalizeAndResume
        let session = try await startSession(camera: camera, outputs: [movie, driver])
        let first = folder.appendingPathComponent("split.mp4"), second = folder.appendingPathComponent("split-2.mp4")
        let log = RecordingLog()
        movie.startRecording(to: first, recordingDelegate: log)
        try await log.wait(for: 1, "the timelapse's start")
        try await pause(1.5)
        try await driver.interrupt(.videoDeviceUnplugged)
        try await log.wait(for: 2, "the first file's end")
        try await pause(1)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await log.wait(for: 3, "the next file's start")
        try await pause(1.5)
        movie.stopRecording()
        try await log.wait(for: 4, "the next file's end")
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        XCTAssertEqual(log.events, [.started(first), .finished(first, .sessionWasInterrupted(.videoDeviceUnplugged)),
                                    .started(second), .finished(second, nil)])
        for url in [first, second] {
            let lumas = try frameLumas(url)
            XCTAssertEqual(lumas.count, 6, accuracy: 2, "\(url.lastPathComponent): 1.5 s at 0.25 s")
            XCTAssertEqual(lumas.filter { $0 < 24 }.count, 0, "\(url.lastPathComponent) holds filler frames: \(lumas)")
            XCTAssertEqual(try probe(url).codecs, ["h264"])
            XCTAssertTrue(try ffmpegDecodes(url), url.lastPathComponent)
        }
    }
}
