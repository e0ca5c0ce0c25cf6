import Foundation
import GStreamerKit
import XCTest

/// Mistakes on the command line (issue 24's rough edges): each is refused before anything starts, in words
/// that name the user's mistake rather than GStreamer's internals, with exit status 64 where the mistake
/// is the command line's.
final class CommandMistakeTests: XCTestCase {
    /// The usage error's sentence alone: not the top-level usage of `gcapture`, which says nothing about it.
    private func assertUsageError(_ result: (status: Int32, stdout: String, stderr: String), says words: [String],
                                  file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 64, result.stderr, file: file, line: line)
        for word in words { XCTAssertTrue(result.stderr.contains(word), "'\(word)' missing from: \(result.stderr)", file: file, line: line) }
        XCTAssertFalse(result.stderr.contains("<subcommand>"), "the top-level usage instead of the command's: \(result.stderr)",
                       file: file, line: line)
    }

    func testAMovieNamedNeitherMP4NorMKVIsAUsageErrorInOneSentence() throws {
        let folder = try temporaryFolder()
        let result = try runGCapture(["record", "--output", folder.appendingPathComponent("x.avi").path, "--duration", "1"], timeout: 20)
        assertUsageError(result, says: ["x.avi", "a movie's name ends in .mp4"])
    }

    func testNumbersInOptionsAreDecimalOnly() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4").path
        for text in ["0x10", "0x1p3", "inf", "nan", "0o7"] {
            let result = try runGCapture(["record", "--output", movie, "--microphone", "none", "--duration", text], timeout: 20)
            XCTAssertEqual(result.status, 64, "--duration \(text): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("'\(text)'") && result.stderr.contains("from 0.1 to 86400 seconds"),
                          "--duration \(text): \(result.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: movie), "--duration \(text) was taken as a number")
        }
    }

    func testDeferredPhotosAtAQualityOtherThanQualityAreAUsageError() throws {
        let photo = try temporaryFolder().appendingPathComponent("shot.jpg")
        for quality in ["balanced", "speed"] {
            let result = try runGCapture(["photo", "--deferred", "--quality", quality, "--output", photo.path], timeout: 30)
            assertUsageError(result, says: ["--deferred", "--quality quality"])
            XCTAssertFalse(FileManager.default.fileExists(atPath: photo.path), "a photo was taken with --deferred ignored")
        }
    }

    func testAPortOutsideTheRangeInAStreamURLIsAUsageError() throws {
        for url in ["srt://127.0.0.1:99999", "rtmp://127.0.0.1:70000/live/key", "rtsp://127.0.0.1:0/cam"] {
            let result = try runGCapture(["stream", url, "--camera", "test", "--microphone", "none", "--duration", "1"], timeout: 30)
            assertUsageError(result, says: ["port", "1 to 65535"])
        }
    }

    func testAnHLSPlaylistsFolderThatIsMissingOrAFileOrReadOnlyIsNamed() throws {
        let folder = try temporaryFolder()
        let missing = try runGCapture(["stream", folder.appendingPathComponent("nofolder/live.m3u8").path, "--microphone", "none"],
                                      timeout: 30)
        assertUsageError(missing, says: ["nofolder", "does not exist"])

        let file = folder.appendingPathComponent("afile")
        try Data("x".utf8).write(to: file)
        let inFile = try runGCapture(["stream", file.appendingPathComponent("live.m3u8").path, "--microphone", "none"], timeout: 30)
        assertUsageError(inFile, says: [file.path + " is a file, not a folder"])

        let proc = try runGCapture(["stream", "/proc/live.m3u8", "--microphone", "none", "--duration", "2"], timeout: 30)
        assertUsageError(proc, says: ["cannot write in /proc"])
        XCTAssertFalse(proc.stderr.contains("CRITICAL"), proc.stderr)
    }

    func testInspectNamesWhatIsWrongWithTheFileOrTheDotPath() throws {
        let device = try runGCapture(["inspect", "/dev/zero"], timeout: 20)
        XCTAssertEqual(device.status, 1)
        XCTAssertTrue(device.stderr.contains("/dev/zero is not a regular file"), device.stderr)

        let folder = try temporaryFolder()
        let directory = try runGCapture(["inspect", folder.path], timeout: 20)
        XCTAssertEqual(directory.status, 1)
        XCTAssertTrue(directory.stderr.contains("\(folder.path) is a folder"), directory.stderr)
        XCTAssertFalse(directory.stderr.contains("NSCocoaErrorDomain"), directory.stderr)

        let recorder = DescriptionFileTests.pipelines.appendingPathComponent("recorder.yaml").path
        let dot = try runGCapture(["inspect", recorder, "--dot", folder.path], timeout: 30)
        XCTAssertEqual(dot.status, 1)
        XCTAssertTrue(dot.stderr.contains("cannot write the graph into \(folder.path): it is a folder"), dot.stderr)
        XCTAssertFalse(dot.stderr.contains("NSCocoaErrorDomain"), dot.stderr)
    }

    func testServeNamesItsOwnOptionWhenTheFolderCannotBeMade() throws {
        let result = try runGCapture(["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                      "--output", "/proc/x"], timeout: 30)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("--output /proc/x"), result.stderr)
        XCTAssertFalse(result.stderr.contains("--photo-folder"), result.stderr)
    }

    func testPhotoNamingOnTheCommandLineNamesTheOption() throws {
        let result = try runGCapture(["run", "--camera", "test", "--microphone", "none", "--photo-naming", "../{counter}.jpg"], timeout: 20)
        assertUsageError(result, says: ["--photo-naming ../{counter}.jpg"])
        for yaml in ["outputs.photo", "`folder:`", "YAML"] { XCTAssertFalse(result.stderr.contains(yaml), "a YAML word on the CLI: \(result.stderr)") }
    }

    func testPreviewRefusesAnElementThatIsNotAVideoSinkAndNamesAMissingOne() throws {
        let converter = try runGCapture(["preview", "--camera", "test", "--sink", "videoconvert", "--duration", "1"], timeout: 30)
        assertUsageError(converter, says: ["videoconvert is not a video sink"])

        let missing = try runGCapture(["preview", "--camera", "test", "--sink", "nosuchsink", "--duration", "1"], timeout: 30)
        assertUsageError(missing, says: ["there is no GStreamer element called nosuchsink"])
        XCTAssertFalse(missing.stderr.contains("apt install"), "blames missing plugins: \(missing.stderr)")
        let displaySinks = ["waylandsink", "xvimagesink", "ximagesink", "glimagesink", "kmssink"].filter(GStreamer.hasElement)
        for sink in displaySinks { XCTAssertTrue(missing.stderr.contains(sink), "\(sink) not suggested: \(missing.stderr)") }
    }
}
