import Foundation
@testable import GCapture
import GCaptureDescription
import XCTest

/// What a running command says and leaves (issue 24's rough edges): progress in a log, the run's started
/// line, signals a command gives no meaning to, the control protocol's odd lines, libjpeg's chatter, and
/// what a reload reports.
final class CommandRoughEdgeTests: XCTestCase {
    /// Into a pipe or a log, progress is whole lines: a `\r` rewrite is for a terminal's eyes only.
    func testProgressIntoAPipeIsWholeLines() throws {
        let folder = try temporaryFolder()
        let record = try runGCapture(["record", "--output", folder.appendingPathComponent("clip.mp4").path, "--duration", "2.5",
                                      "--microphone", "none", "--preset", "vga640x480"], timeout: 40)
        XCTAssertEqual(record.status, 0, record.stderr)
        XCTAssertFalse(record.stdout.contains("\r"), "a terminal's rewrites in a pipe: \(record.stdout.debugDescription)")
        XCTAssertTrue(record.stdout.split(separator: "\n").contains { $0.contains(" fps ") }, record.stdout)
        XCTAssertFalse(record.stdout.contains("\n\n"), "blank lines: \(record.stdout.debugDescription)")

        let stream = try runGCapture(["stream", folder.appendingPathComponent("live.m3u8").path, "--duration", "2.5",
                                      "--microphone", "none", "--preset", "vga640x480"], timeout: 40)
        XCTAssertEqual(stream.status, 0, stream.stderr)
        XCTAssertFalse(stream.stdout.contains("\r"), "a terminal's rewrites in a pipe: \(stream.stdout.debugDescription)")
        XCTAssertTrue(stream.stdout.split(separator: "\n").contains { $0.contains("kbit/s") }, stream.stdout)
        XCTAssertFalse(stream.stdout.contains("\n\n"), "blank lines: \(stream.stdout.debugDescription)")
    }

    /// SIGUSR1 and SIGUSR2 mean nothing to `record`: they neither kill it (leaving a sidecar) nor end it.
    func testRecordIgnoresTheUserSignalsAndFinishesItsMovie() throws {
        let movie = try temporaryFolder().appendingPathComponent("clip.mp4")
        let record = try launch("gcapture", ["record", "--output", movie.path, "--duration", "3", "--microphone", "none",
                                             "--preset", "vga640x480", "--json"])
        XCTAssertTrue(record.waitForEvent("recordingStarted"), record.errorOutput)
        Thread.sleep(forTimeInterval: 0.5)
        record.signal(SIGUSR1)
        record.signal(SIGUSR2)
        XCTAssertTrue(record.waitForExit(timeout: 30))
        XCTAssertEqual(record.status, 0, record.errorOutput)
        let finished = try XCTUnwrap(record.events("recordingFinished").first, record.output)
        XCTAssertNil(finished["stoppedBy"], "a user signal stopped the recording")
        XCTAssertEqual(try probe(movie).duration, 3, accuracy: 0.3, "the whole duration was recorded")
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path), "a recovery sidecar was left")
    }

    /// A set-up without a photo output does not say where photos go.
    func testRunSaysOnlyWhereItsOutputsWrite() throws {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("recorder.yaml")
        try FileManager.default.copyItem(at: DescriptionFileTests.pipelines.appendingPathComponent("recorder.yaml"), to: file)
        for json in [true, false] {
            let run = try launch("gcapture", ["run", file.path] + (json ? ["--json"] : []),
                                 environment: ["GCAPTURE_TEST_DEVICES": "1"])
            if json {
                XCTAssertTrue(run.waitForEvent("started", timeout: 30), run.errorOutput)
                let started = try XCTUnwrap(run.events("started").first)
                XCTAssertNil(started["photoFolder"], "\(started)")
                XCTAssertEqual(started["movieFolder"] as? String, folder.appendingPathComponent("recordings").path)
            } else {
                XCTAssertTrue(run.waitForLine(timeout: 30) { $0.hasPrefix("running with") }, run.errorOutput)
                XCTAssertFalse(run.output.contains("photos go"), run.output)
                XCTAssertTrue(run.output.contains("movies go to \(folder.appendingPathComponent("recordings").path)"), run.output)
            }
            run.signal(SIGTERM)
            XCTAssertTrue(run.waitForExit(timeout: 20))
        }
    }

    /// A CRLF script's blank line is blank; an id no number type holds is named as such.
    func testTheControlProtocolTakesACRLFBlankLineAndNamesAnUnusableId() throws {
        let run = try launch("gcapture", ["run", "--camera", "test", "--microphone", "none", "--json",
                                          "--photo-folder", try temporaryFolder().path], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started", timeout: 30), run.errorOutput)
        run.send("\r")
        run.send(#"{"id":1e999,"command":"help"}"#)
        run.send(#"{"id":2,"command":"help"}"#)
        XCTAssertNotNil(run.waitForReply(2), run.output)
        let failures = run.events.filter { $0["ok"] as? Bool == false }
        XCTAssertEqual(failures.count, 1, "the blank line was answered: \(run.output)")
        let message = failures.first?["error"] as? String ?? ""
        XCTAssertTrue(message.contains("\"id\"") && message.contains("not a usable number"), message)
        run.send("quit")
        XCTAssertTrue(run.waitForExit(timeout: 20))
    }

    /// A truncated photo in the gallery: its thumbnail fails or succeeds, and libjpeg says nothing on stderr.
    func testATruncatedPhotosThumbnailLeavesNoLibjpegTextOnStderr() throws {
        let folder = try temporaryFolder()
        let photo = try runGCapture(["photo", "--camera", "test", "--output", folder.appendingPathComponent("whole.jpg").path], timeout: 30)
        XCTAssertEqual(photo.status, 0, photo.stderr)
        let whole = try Data(contentsOf: folder.appendingPathComponent("whole.jpg"))
        try whole.prefix(whole.count / 2).write(to: folder.appendingPathComponent("truncated.jpg"))
        try FileManager.default.removeItem(at: folder.appendingPathComponent("whole.jpg"))

        let serve = try launch("gcapture", ["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none",
                                            "--output", folder.path, "--json", "--live-size", "640x360"])
        XCTAssertTrue(serve.waitForEvent("listening", timeout: 30), serve.errorOutput)
        let port = try XCTUnwrap(serve.events("listening").first?["port"] as? Int)
        let gallery = try http(port, "GET", "/api/gallery")
        let items = try XCTUnwrap(gallery.json?["items"] as? [[String: Any]], gallery.text)
        let thumbnail = try XCTUnwrap(items.first { $0["name"] as? String == "truncated.jpg" }?["thumbnail"] as? String, gallery.text)
        let answer = try http(port, "GET", thumbnail)
        XCTAssertTrue([200, 404, 415, 422, 500].contains(answer.status), "\(answer.status)")
        serve.signal(SIGTERM)
        XCTAssertTrue(serve.waitForExit(timeout: 20))
        XCTAssertFalse(serve.errorOutput.contains("JPEG"), serve.errorOutput)
    }

    /// A reload that adds a movie output reports the movie output, not a microphone that did not change.
    func testAReloadThatAddsAMovieOutputNamesIt() throws {
        let root = try temporaryFolder()
        let file = root.appendingPathComponent("booth.yaml")
        let photoOnly = "version: 1\ncamera: test\nmicrophone: test-microphone\noutputs:\n  photo:\n    quality: balanced\n"
        try photoOnly.write(to: file, atomically: true, encoding: .utf8)
        let options = DescriptionOptions(root: root, usesTestDevices: true)
        let booth = try DescribedSession(CaptureDescription.load(contentsOf: file, options: options))
        try (photoOnly + "  movie:\n    audio: true\n").write(to: file, atomically: true, encoding: .utf8)
        let report = try booth.reload(CaptureDescription.load(contentsOf: file, options: options))
        XCTAssertEqual(report.needsRestart, ["outputs.movie"])
        XCTAssertEqual(report.applied, [])
    }

    /// `gcapture run FILE`'s SIGHUP: the reloaded event names the change left for a new run, and nothing
    /// blames the microphone.
    func testRunsReloadEventNamesTheOutputAddedAndNotTheMicrophone() throws {
        let root = try temporaryFolder()
        let file = root.appendingPathComponent("booth.yaml")
        let photoOnly = "version: 1\ncamera: test\nmicrophone: test-microphone\noutputs:\n  photo:\n    quality: balanced\n"
        try photoOnly.write(to: file, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", file.path, "--json"])
        XCTAssertTrue(run.waitForEvent("started", timeout: 30), run.errorOutput)
        try (photoOnly + "  movie:\n    audio: true\n").write(to: file, atomically: true, encoding: .utf8)
        run.signal(SIGHUP)
        XCTAssertTrue(run.waitForEvent("reloaded"), run.output + run.errorOutput)
        let reloaded = try XCTUnwrap(run.events("reloaded").first)
        XCTAssertEqual(reloaded["needsNewRun"] as? [String], ["outputs.movie"], "\(reloaded)")
        XCTAssertFalse(run.output.contains("microphone\"]") || run.errorOutput.contains("microphone changed"),
                       run.output + run.errorOutput)
        run.signal(SIGTERM)
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)
    }
}
