import Foundation
import XCTest

/// The AAC track of a recording starts and ends with the video, to within one AAC frame (1024 samples at
/// 48 kHz, ~21 ms): it used to end ~0.05-0.1 s early in every recording, the audio that arrives after the
/// first frame (it lags the video) placed at the start and the drain not waiting for the last audio.
final class AudioTrackEndTests: XCTestCase {
    private static let aacFrame = 1024.0 / 48_000

    private func assertTracksEndTogether(_ movie: URL, file: StaticString = #filePath, line: UInt = #line) throws {
        let probed = try probe(movie, countFrames: false)
        func end(_ type: String) -> Double? {
            guard let stream = probed.stream(type), let duration = (stream["duration"] as? String).flatMap(Double.init) else { return nil }
            return (probed.startTime(type) ?? 0) + duration
        }
        let video = try XCTUnwrap(end("video"), file: file, line: line), audio = try XCTUnwrap(end("audio"), file: file, line: line)
        XCTAssertEqual(audio, video, accuracy: Self.aacFrame + 0.002, "audio ends at \(audio) s, video at \(video) s", file: file, line: line)
        XCTAssertEqual(probed.startTime("audio") ?? -1, probed.startTime("video") ?? -2, accuracy: 0.002, "the tracks start together",
                       file: file, line: line)
    }

    func testAudioEndsWithTheVideoAtADurationLimit() throws {
        let folder = try temporaryFolder()
        for take in 1...2 {
            let movie = folder.appendingPathComponent("take\(take).mp4")
            let result = try runGCapture(["record", "--camera", "test", "--microphone", "test-microphone", "--duration", "3",
                                          "--output", movie.path], timeout: 60)
            XCTAssertEqual(result.status, 0, result.stderr)
            try assertTracksEndTogether(movie)
        }
    }
}
