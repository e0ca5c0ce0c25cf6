import GStreamerKit
import Dispatch
import Foundation
@testable import GCapture
import Synchronization
import XCTest

/// The frame and recording delegates run on their queues, not on a streaming thread nor under an output's
/// lock: they may call back into their output. (The photo output's: PhotoConcurrencyTests.)
final class DelegateQueueTests: XCTestCase {
    func testFrameDelegateRunsOnItsQueueAndMayCallBackIntoTheOutput() async throws {
        final class Frames: CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
            let queue: DispatchQueue
            let count = Locked(0)
            init(queue: DispatchQueue) { self.queue = queue }
            func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
                dispatchPrecondition(condition: .onQueue(queue))
                guard let output = output as? CaptureVideoDataOutput else { return XCTFail("frames from \(output)") }
                _ = output.alwaysDiscardsLateVideoFrames
                XCTAssertTrue(output.sampleBufferDelegate === self)
                // The fifth frame is the last: the delegate removes itself from inside its callback.
                if count.withLock({ $0 += 1; return $0 }) == 5 { output.setSampleBufferDelegate(nil, queue: nil) }
            }
        }
        let output = CaptureVideoDataOutput()
        let frames = Frames(queue: DispatchQueue(label: "frames"))
        output.setSampleBufferDelegate(frames, queue: frames.queue)
        let session = try makeSession(outputs: [output])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let deadline = Date().addingTimeInterval(10)
        while frames.count.withLock({ $0 }) < 5, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(300))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        frames.queue.sync {}
        XCTAssertEqual(frames.count.withLock { $0 }, 5, "frames after the delegate removed itself, or too few in 10 s")
    }

    func testRecordingDelegateRunsOnItsQueueAndMayCallBackIntoTheOutput() async throws {
        final class Recorder: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
            let queue: DispatchQueue
            let finished = Locked<(url: URL, stillRecording: Bool)?>(nil)
            init(queue: DispatchQueue) { self.queue = queue }
            func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
                dispatchPrecondition(condition: .onQueue(queue))
                XCTAssertTrue(output.isRecording)
                _ = output.recordedDuration
                output.stopRecording()
            }
            func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                            error: Error?) {
                dispatchPrecondition(condition: .onQueue(queue))
                let recording = output.isRecording
                finished.withLock { $0 = (outputFileURL, recording) }
            }
        }
        let movie = CaptureMovieFileOutput()
        let recorder = Recorder(queue: movie.delegateQueue)
        let session = try makeSession(outputs: [movie])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = try temporaryFolder().appendingPathComponent("stopped-from-its-delegate.mp4")
        movie.startRecording(to: url, recordingDelegate: recorder)
        let deadline = Date().addingTimeInterval(15)
        while recorder.finished.withLock({ $0 }) == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let finished = try XCTUnwrap(recorder.finished.withLock { $0 }, "the recording stopped from its delegate never finished")
        XCTAssertEqual(finished.url, url)
        XCTAssertFalse(finished.stillRecording)
    }
}
