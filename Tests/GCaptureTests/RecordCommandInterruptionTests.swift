import Foundation
import XCTest

/// `gcapture record --on-interruption`. A real interruption of the CLI's own session needs the session's
/// interruption machinery; here: the choice is taken, and a wrong one is refused in one sentence.
final class RecordCommandInterruptionTests: XCTestCase {
    func testSplitRecordsAndReportsItsFileAndAWrongChoiceIsRefused() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4")
        let result = try runProduct("gcapture", ["record", "--microphone", "test-microphone", "--duration", "1",
                                                 "--on-interruption", "split", "--output", movie.path, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let finished = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["event"] as? String == "recordingFinished" }
        XCTAssertEqual(finished.map { $0["path"] as? String }, [movie.path], result.stdout)
        XCTAssertEqual(try probe(movie).duration, 1, accuracy: 0.2)

        let wrong = try runProduct("gcapture", ["record", "--duration", "1", "--on-interruption", "pause",
                                                "--output", folder.appendingPathComponent("never.mp4").path])
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("'continue' and 'split'"), wrong.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent("never.mp4").path))
    }
}
