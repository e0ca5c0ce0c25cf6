import Foundation
@testable import GCapture
import XCTest

/// `gcapture run` driven as another program drives it: requests on stdin, replies and events on stdout,
/// signals; the files it makes checked by exiftool and ffprobe.
final class RunCommandTests: XCTestCase {
    private func startRun(_ folder: URL, json: Bool = true, extra: [String] = []) throws -> LaunchedCommand {
        let run = try launch("gcapture", ["run", "--camera", "test", "--microphone", "test-microphone", "--preset", "vga640x480",
                                          "--photo-folder", folder.appendingPathComponent("photos").path,
                                          "--movie-folder", folder.appendingPathComponent("movies").path]
                                          + (json ? ["--json"] : []) + extra, writesStdin: true)
        if json {
            XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        } else {
            XCTAssertTrue(run.waitForLine { $0.hasPrefix("running with") }, "not started: \(run.output) \(run.errorOutput)")
        }
        return run
    }

    /// Every line of stdout is a JSON object, either a reply ("ok") or an event ("event"); the first says
    /// the protocol's version.
    private func checkLines(_ run: LaunchedCommand, file: StaticString = #filePath, line: UInt = #line) {
        let lines = run.output.split(separator: "\n")
        XCTAssertFalse(lines.isEmpty, file: file, line: line)
        for text in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            XCTAssertNotNil(object, "not a JSON object: \(text)", file: file, line: line)
            XCTAssertTrue((object?["ok"] is Bool) != (object?["event"] is String), "neither a reply nor an event: \(text)", file: file, line: line)
        }
        let hello = run.events.first
        XCTAssertEqual(hello?["event"] as? String, "hello", file: file, line: line)
        XCTAssertEqual(hello?["protocol"] as? String, "gcapture-control", file: file, line: line)
        XCTAssertEqual(hello?["version"] as? Int, 1, file: file, line: line)
    }

    private func quit(_ run: LaunchedCommand, id: Int = 999) {
        run.send(#"{"id": \#(id), "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)
        XCTAssertEqual(run.reply(id)?["ok"] as? Bool, true)
        XCTAssertEqual(run.events("stopped").last?["reason"] as? String, "quit")
    }

    private func imageSize(_ url: URL) throws -> (Int, Int) {
        let facts = try exif(url)
        XCTAssertEqual(facts["FileType"] as? String, "JPEG", url.path)
        return (facts["ImageWidth"] as? Int ?? 0, facts["ImageHeight"] as? Int ?? 0)
    }

    /// The issue's case: `gcapture run pipelines/photobooth.yaml --json` over stdin makes photos and a
    /// recording where the file says; SIGUSR1 takes a photo; an edited rotation is applied by SIGHUP
    /// without stopping the session.
    func testADescriptionFileRunsAndSIGHUPAppliesItsEditedRotationLive() throws {
        let folder = try temporaryFolder()
        let booth = folder.appendingPathComponent("booth.yaml")
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var text = try String(contentsOf: packageRoot.appendingPathComponent("pipelines/photobooth.yaml"), encoding: .utf8)
        // The test camera at 1280x720, whatever this machine has (`auto` without a camera waits for one, issue
        // 24): the photos' shape says the turn.
        text = text.replacingOccurrences(of: "  position: front\n", with: "").replacingOccurrences(of: "id: auto ", with: "id: test ")
        try text.write(to: booth, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", booth.path, "--json"], environment: ["GCAPTURE_TEST_DEVICES": "1"], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")

        run.send(#"{"id": 1, "command": "photo"}"#)
        let first = try XCTUnwrap(run.waitForReply(1)?["path"] as? String, run.errorOutput)
        XCTAssertTrue(first.hasPrefix(folder.appendingPathComponent("photobooth/booth-").path), "not where the file says: \(first)")
        let (width, height) = try imageSize(URL(fileURLWithPath: first))
        XCTAssertGreaterThan(width, height, "a landscape camera unturned")

        try (text + "rotation: 90\n").write(to: booth, atomically: true, encoding: .utf8)
        run.signal(SIGHUP)
        XCTAssertTrue(run.waitForEvent("reloaded"), "SIGHUP did not reload: \(run.output) \(run.errorOutput)")
        XCTAssertEqual(run.events("reloaded").last?["changed"] as? [String], ["rotation"], run.output)
        run.send(#"{"id": 2, "command": "photo"}"#)
        let turned = try XCTUnwrap(run.waitForReply(2)?["path"] as? String, run.errorOutput)
        let (turnedWidth, turnedHeight) = try imageSize(URL(fileURLWithPath: turned))
        XCTAssertEqual([turnedWidth, turnedHeight], [height, width], "the edited rotation was not applied")

        run.signal(SIGUSR1)
        XCTAssertTrue(run.waitForEvent("photo", count: 3), "SIGUSR1 took no photo: \(run.errorOutput)")
        run.send(#"{"id": 3, "command": "record", "action": "start"}"#)
        XCTAssertEqual(run.waitForReply(3)?["ok"] as? Bool, true, run.output)
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: 2), run.errorOutput)
        run.send(#"{"id": 4, "command": "record", "action": "stop"}"#)
        let movie = try XCTUnwrap(run.waitForReply(4)?["path"] as? String, run.output)
        XCTAssertTrue(movie.hasPrefix(folder.appendingPathComponent("photobooth/clip-").path), movie)
        quit(run)
        checkLines(run)
        XCTAssertEqual(run.events("started").count, 1, "the session was started again: \(run.output)")
        XCTAssertGreaterThan(try probe(URL(fileURLWithPath: movie)).duration, 0.5)
    }

    /// A description's `outputs.stream` publishes for the whole run (issue 14): HLS beside the file, its
    /// states as streamState events, the playlist closed at quit and played by ffprobe, video and audio.
    func testADescriptionsStreamPublishesForTheWholeRun() throws {
        let folder = try temporaryFolder()
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("hls"), withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("stream.yaml")
        try """
            version: 1
            camera:
              id: test
              preset: low
            microphone: test-microphone
            outputs:
              stream:
                url: hls/live.m3u8
                key-interval: 1
                profile: constrained-baseline
            """.write(to: file, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", file.path, "--json"], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        let deadline = Date().addingTimeInterval(20)
        while !run.events("streamState").contains(where: { $0["state"] as? String == "live" }), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertTrue(run.events("streamState").contains { $0["state"] as? String == "live" }, "never live: \(run.output) \(run.errorOutput)")
        Thread.sleep(forTimeInterval: 4)
        quit(run)
        checkLines(run)
        let playlist = folder.appendingPathComponent("hls/live.m3u8")
        let text = try String(contentsOf: playlist, encoding: .utf8)
        XCTAssertTrue(text.contains("#EXT-X-ENDLIST"), "the playlist was not closed at quit: \(text)")
        let probed = try probe(playlist, countFrames: false)
        XCTAssertEqual(Set(probed.codecs), ["h264", "aac"], "\(probed.streams)")
        XCTAssertGreaterThan(probed.duration, 2.5)
    }

    func testADescribedRunsPhotosGoIntoItsLibraryAlbum() throws {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("booth.yaml")
        try """
            version: 1
            camera:
              id: test
              preset: low
            outputs:
              photo:
                folder: shots
                album: Wedding
            """.write(to: file, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", file.path, "--json"], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        XCTAssertEqual(run.events("started").first?["photoAlbum"] as? String, "Wedding")
        run.send(#"{"id": 1, "command": "photo"}"#)
        run.send(#"{"id": 2, "command": "photo"}"#)
        let first = try XCTUnwrap(run.waitForReply(1)?["path"] as? String, run.errorOutput)
        let second = try XCTUnwrap(run.waitForReply(2)?["path"] as? String, run.errorOutput)
        quit(run)
        checkLines(run)
        XCTAssertEqual(run.events("photoAlbumFailed").count, 0, run.output)

        // The library as `gcapture library` reads it from the photo folder: both photos, in the album.
        let shots = folder.appendingPathComponent("shots").path
        let listed = try runGCapture(["library", "list", "--album", "Wedding", "--library", shots, "--json"], timeout: 60)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let assets = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]], listed.stdout)
        XCTAssertEqual(Set(assets.compactMap { $0["path"] as? String }), [first, second])
        XCTAssertTrue(assets.allSatisfy { $0["pixelWidth"] as? Int == 320 }, "\(assets)")
    }

    func testJSONRequestsMakePhotosAndARecordingAnsweredByTheirIds() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        let named = folder.appendingPathComponent("named.jpg")
        run.send(#"{"id": 1, "command": "photo"}"#)
        run.send(#"{"id": "two", "command": "photo", "path": "\#(named.path)"}"#)
        run.send(#"{"id": 3, "command": "record", "action": "start"}"#)
        run.send(#"{"command": ["photo"]}"#)
        XCTAssertNotNil(run.waitForReply(3), run.errorOutput)
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: 2), run.errorOutput)
        run.send(#"{"id": 4, "command": "record", "action": "stop"}"#)
        XCTAssertNotNil(run.waitForReply(4), run.errorOutput)
        quit(run, id: 5)
        checkLines(run)

        // Each request answered once, by its own id, and every one worked.
        let replies = run.events.filter { $0["ok"] != nil }
        let ids = replies.map { $0["id"].map { "\($0)" } ?? "none" }
        XCTAssertEqual(ids.sorted(), ["1", "3", "4", "5", "none", "two"], "\(replies)")
        XCTAssertTrue(replies.allSatisfy { $0["ok"] as? Bool == true }, "\(replies)")

        // Photos named by the rule in the photo folder, or where asked; each file is a photo of the camera.
        let first = try XCTUnwrap(run.reply(1)?["path"] as? String)
        XCTAssertTrue(first.hasPrefix(folder.appendingPathComponent("photos").path + "/photo-"), first)
        XCTAssertTrue(first.hasSuffix("-0001.jpg"), first)
        XCTAssertEqual(run.reply("two")?["path"] as? String, named.path)
        let photoEvents = run.events("photo")
        XCTAssertEqual(photoEvents.count, 3)
        for event in photoEvents {
            let path = try XCTUnwrap(event["path"] as? String)
            let size = try imageSize(URL(fileURLWithPath: path))
            XCTAssertEqual(size.0, 640, path)
            XCTAssertEqual(size.1, 480, path)
        }

        // The recording: where the reply said, as long as the reply said, with sound and picture.
        let stop = try XCTUnwrap(run.reply(4))
        let moviePath = try XCTUnwrap(stop["path"] as? String)
        XCTAssertEqual(run.reply(3)?["path"] as? String, moviePath)
        XCTAssertTrue(moviePath.hasPrefix(folder.appendingPathComponent("movies").path + "/movie-"), moviePath)
        let finished = try XCTUnwrap(run.events("recordingFinished").first)
        XCTAssertEqual(finished["path"] as? String, moviePath)
        XCTAssertEqual(finished["complete"] as? Bool, true)
        let probed = try probe(URL(fileURLWithPath: moviePath))
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.duration, try XCTUnwrap(stop["duration"] as? Double), accuracy: 0.1)
        XCTAssertGreaterThan(probed.duration, 1.5)
        XCTAssertTrue(try ffmpegDecodes(URL(fileURLWithPath: moviePath)))
    }

    /// SIGUSR1 is the shutter; SIGHUP reloads (without a file: the settings in force again) and the same
    /// session runs on.
    func testShutterSignalTakesAPhotoAndReloadKeepsTheSessionRunning() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        run.signal(SIGUSR1)
        XCTAssertTrue(run.waitForEvent("photo"), "SIGUSR1 took no photo: \(run.errorOutput)")
        let shot = try XCTUnwrap(run.events("photo").first)
        XCTAssertEqual(shot["trigger"] as? String, "SIGUSR1")
        let path = try XCTUnwrap(shot["path"] as? String)
        XCTAssertEqual(try imageSize(URL(fileURLWithPath: path)).0, 640)

        run.signal(SIGHUP)
        XCTAssertTrue(run.waitForEvent("reloaded"), "SIGHUP reloaded nothing: \(run.output) \(run.errorOutput)")
        XCTAssertEqual(run.events("reloaded").first?["changed"] as? [String], [])
        run.signal(SIGUSR1)
        XCTAssertTrue(run.waitForEvent("photo", count: 2), "no photo after the reload: \(run.errorOutput)")
        run.send(#"{"id": 1, "command": "photo"}"#)
        XCTAssertEqual(run.waitForReply(1)?["ok"] as? Bool, true, "not running after SIGHUP: \(run.output)")
        XCTAssertTrue(run.process.isRunning)
        XCTAssertEqual(run.events("started").count, 1, "the session started again")
        let paths = Set(run.events("photo").compactMap { $0["path"] as? String })
        XCTAssertEqual(paths.count, 3, "two photos got one name: \(paths)")
        quit(run)
        checkLines(run)
    }

    /// `rotate` turns the next photo on the live session: a recording running across it goes on without a gap.
    func testRotateTurnsTheNextPhotoWithoutStoppingTheSession() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        XCTAssertNotNil(run.waitForReply(1))
        run.send(#"{"id": 2, "command": "photo"}"#)
        run.send(#"{"id": 3, "command": "rotate", "degrees": 90}"#)
        run.send(#"{"id": 4, "command": "photo"}"#)
        let before = Date()
        XCTAssertNotNil(run.waitForReply(4), run.errorOutput)
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: 2))
        run.send(#"{"id": 5, "command": "record", "action": "stop"}"#)
        let stopped = try XCTUnwrap(run.waitForReply(5))
        let recorded = Date().timeIntervalSince(before)
        quit(run)
        checkLines(run)

        XCTAssertEqual(run.reply(3)?["rotation"] as? Int, 90)
        let upright = URL(fileURLWithPath: try XCTUnwrap(run.reply(2)?["path"] as? String))
        let turned = URL(fileURLWithPath: try XCTUnwrap(run.reply(4)?["path"] as? String))
        XCTAssertEqual(try imageSize(upright).0, 640)
        let size = try imageSize(turned)
        XCTAssertEqual(size.0, 480, "the photo after `rotate 90` is not portrait")
        XCTAssertEqual(size.1, 640)
        XCTAssertEqual(try clockwiseTurn(of: turned, from: upright), 90)
        XCTAssertEqual(run.events("started").count, 1)
        // The session was not stopped: the recording made across the rotate has every frame.
        let movie = URL(fileURLWithPath: try XCTUnwrap(stopped["path"] as? String))
        let probed = try probe(movie)
        XCTAssertGreaterThan(probed.duration, recorded - 0.2, "the recording lost time across the rotate")
        let frames = try XCTUnwrap(probed.videoFrames)
        XCTAssertEqual(Double(frames), probed.duration * 30, accuracy: probed.duration * 3, "frames missing across the rotate")
    }

    /// A bad line is answered with an error that names the mistake, and the run goes on.
    func testBadLinesGetErrorRepliesAndTheRunGoesOn() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        let bad: [(Int, String, String)] = [
            (1, #"{"id": 1, "command": "phto"}"#, #"unknown command "phto"; did you mean "photo"?"#),
            (2, #"{"id": 2, "command": "photo", "pth": "x.jpg"}"#, #"unknown key "pth": photo takes "path"; did you mean "path"?"#),
            (3, #"{"id": 3, "command": "rotate", "degrees": 45}"#, "rotate: the angle 45 is not one of 0, 90, 180 or 270 degrees"),
            (4, #"{"id": 4, "command": "record", "action": "stop"}"#, "not recording"),
            (5, #"{"id": 5, "command": "switch", "camera": "no-such-camera"}"#, "no device with id 'no-such-camera'"),
            (6, #"{"id": 6, "command": "switch", "camera": "test-microphone"}"#, "test-microphone names a microphone, not a camera"),
            (7, #"{"id": 7, "command": "record", "action": "strat"}"#, #""action" of record must be "start" or "stop", not "strat"; did you mean "start"?"#),
            (8, #"{"id": 8, "command": "rotate", "degrees": "90"}"#, #""degrees" must be a whole number"#),
            (9, #"{"id": 9}"#, #"the request has no "command""#),
            (10, #"{"id": 10, "command": "pause"}"#, "not recording: nothing to pause"),
        ]
        for (_, line, _) in bad { run.send(line) }
        run.send(#"{"id": 11, "command": "photo""#)
        run.send(#"{"id": [1], "command": "photo"}"#)
        run.send("recrd start")
        run.send(String(repeating: "x", count: 70_000))
        run.send(#"{"id": 12, "command": "photo"}"#)
        XCTAssertEqual(run.waitForReply(12)?["ok"] as? Bool, true, "no photo after the bad lines: \(run.output)")
        quit(run)
        checkLines(run)

        for (id, _, message) in bad {
            let reply = try XCTUnwrap(run.reply(id), "no reply to \(id)")
            XCTAssertEqual(reply["ok"] as? Bool, false, "\(id)")
            let error = reply["error"] as? String ?? ""
            XCTAssertTrue(error.contains(message), "\(id): \(error)")
        }
        let anonymous = run.events.filter { $0["ok"] as? Bool == false && $0["id"] == nil }.compactMap { $0["error"] as? String }
        XCTAssertEqual(anonymous.count, 4, "\(anonymous)")
        XCTAssertTrue(anonymous.contains { $0.contains("not a JSON object") }, "\(anonymous)")
        XCTAssertTrue(anonymous.contains { $0.contains("\"id\" must be an integer or a string") }, "\(anonymous)")
        XCTAssertTrue(anonymous.contains { $0.contains(#"unknown command "recrd"; did you mean "record"?"#) }, "\(anonymous)")
        XCTAssertTrue(anonymous.contains { $0.contains("longer than 65536 bytes") }, "\(anonymous)")
        XCTAssertFalse(run.errorOutput.contains("Fatal error"), run.errorOutput)
    }

    /// SIGINT in the middle of a recording: finalized (it plays, nothing left for crash recovery), exit 0.
    func testSIGINTFinalizesARecordingInProgress() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        let movie = URL(fileURLWithPath: try XCTUnwrap(run.waitForReply(1)?["path"] as? String, run.errorOutput))
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: 2))
        run.signal(SIGINT)
        XCTAssertTrue(run.waitForExit(timeout: 20), "SIGINT did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)
        checkLines(run)
        let finished = try XCTUnwrap(run.events("recordingFinished").first, run.output)
        XCTAssertEqual(finished["path"] as? String, movie.path)
        let stopped = try XCTUnwrap(run.events("stopped").first)
        XCTAssertEqual(stopped["signal"] as? String, "SIGINT")
        let probed = try probe(movie)
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.duration, try XCTUnwrap(finished["duration"] as? Double), accuracy: 0.1)
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path), "not finalized")
    }

    /// pause/resume: the paused time is not in the movie, and the movie is one file with one timeline.
    func testPauseLeavesThePausedTimeOut() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        XCTAssertNotNil(run.waitForReply(1))
        Thread.sleep(forTimeInterval: 1)
        run.send(#"{"id": 2, "command": "pause"}"#)
        XCTAssertEqual(run.waitForReply(2)?["ok"] as? Bool, true, run.output)
        Thread.sleep(forTimeInterval: 2)
        run.send(#"{"id": 3, "command": "resume"}"#)
        XCTAssertEqual(run.waitForReply(3)?["ok"] as? Bool, true, run.output)
        Thread.sleep(forTimeInterval: 1)
        run.send(#"{"id": 4, "command": "record", "action": "stop"}"#)
        let stopped = try XCTUnwrap(run.waitForReply(4))
        quit(run)
        let probed = try probe(URL(fileURLWithPath: try XCTUnwrap(stopped["path"] as? String)))
        // About 2 s recorded of about 4 s running; the load of the machine may stretch the waits.
        XCTAssertGreaterThan(probed.duration, 1.5)
        XCTAssertLessThan(probed.duration, 3.2, "the pause was recorded")
        XCTAssertEqual(probed.duration, try XCTUnwrap(stopped["duration"] as? Double), accuracy: 0.1)
        XCTAssertTrue(try ffmpegDecodes(URL(fileURLWithPath: try XCTUnwrap(stopped["path"] as? String))))
        XCTAssertEqual(run.events("recordingPaused").count, 1)
        XCTAssertEqual(run.events("recordingResumed").count, 1)
    }

    /// `quit` right after requests: the photos requested are written and the recording finalized before
    /// the quit is answered and the run exits.
    func testQuitFinishesWhatWasRequested() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        let movie = URL(fileURLWithPath: try XCTUnwrap(run.waitForReply(1)?["path"] as? String, run.errorOutput))
        XCTAssertTrue(run.waitForEvent("recordingProgress"))
        for id in 2...4 { run.send(#"{"id": \#(id), "command": "photo"}"#) }
        quit(run, id: 5)
        checkLines(run)
        let lines = run.events
        let quitIndex = try XCTUnwrap(lines.firstIndex { $0["ok"] != nil && $0["id"] as? Int == 5 })
        for id in 2...4 {
            let index = try XCTUnwrap(lines.firstIndex { $0["ok"] != nil && $0["id"] as? Int == id }, "photo \(id) not answered")
            XCTAssertLessThan(index, quitIndex, "quit answered before photo \(id)")
            XCTAssertEqual(lines[index]["ok"] as? Bool, true, "\(lines[index])")
            XCTAssertEqual(try imageSize(URL(fileURLWithPath: try XCTUnwrap(lines[index]["path"] as? String))).0, 640)
        }
        let finished = try XCTUnwrap(lines.firstIndex { $0["event"] as? String == "recordingFinished" }, "the recording was not finished")
        XCTAssertLessThan(finished, quitIndex)
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: movie).path), "not finalized")
    }

    /// The end of stdin ends the requests, not the run (a kiosk started with stdin on /dev/null is driven by
    /// signals); a camera switch and mirroring apply on the running session.
    func testSwitchMirrorAndTheEndOfStdin() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        run.send(#"{"id": 1, "command": "switch", "camera": "test"}"#)
        XCTAssertEqual(run.waitForReply(1)?["camera"] as? String, "Test Camera [test]", run.output)
        XCTAssertEqual(run.events("cameraSwitched").count, 1)
        run.send(#"{"id": 2, "command": "mirror", "enabled": true}"#)
        run.send(#"{"id": 3, "command": "photo"}"#)
        XCTAssertEqual(run.waitForReply(3)?["ok"] as? Bool, true, run.output)
        XCTAssertEqual(run.events("photo").first?["mirrored"] as? Bool, true)
        try run.stdin.fileHandleForWriting.close()
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(run.process.isRunning, "the end of stdin ended the run")
        run.signal(SIGUSR1)
        XCTAssertTrue(run.waitForEvent("photo", count: 2), "no photo after stdin closed: \(run.errorOutput)")
        run.signal(SIGTERM)
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)
        XCTAssertEqual(run.events("stopped").first?["signal"] as? String, "SIGTERM")
        checkLines(run)
    }

    /// Shutter signals and photo requests at once: every photo gets its own file, every request its reply.
    /// Each signal waits for the photo of the one before: Unix merges a signal sent while the same one is
    /// still pending (docs/control-protocol.md says so); the requests do not wait.
    func testShutterAndRequestsAtOnceGetAFileEach() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder)
        for id in 1...6 {
            run.send(#"{"id": \#(id), "command": "photo"}"#)
            run.signal(SIGUSR1)
            XCTAssertTrue(run.waitForEvent("photo", count: id, trigger: "SIGUSR1"), "SIGUSR1 \(id) took no photo")
        }
        for id in 1...6 { XCTAssertEqual(run.waitForReply(id)?["ok"] as? Bool, true, "\(id): \(run.output)") }
        XCTAssertTrue(run.waitForEvent("photo", count: 12), "\(run.events("photo").count) photos: \(run.output)")
        quit(run)
        checkLines(run)
        let paths = run.events("photo").compactMap { $0["path"] as? String }
        XCTAssertEqual(Set(paths).count, 12, "photos shared a name: \(paths)")
        XCTAssertEqual(run.events("photo").filter { $0["trigger"] as? String == "SIGUSR1" }.count, 6)
        for path in paths { XCTAssertTrue(FileManager.default.fileExists(atPath: path), path) }
    }

    /// The audio server dies mid-recording: the session's runtime error and the recording's end are events,
    /// the movie plays up to then, and the run goes on taking photos.
    func testALostMicrophoneIsAnInterruptionAndTheRecordingGoesOn() throws {
        let server = try PulseAudioServer()
        defer { server.stop() }
        let folder = try temporaryFolder()
        let run = try launch("gcapture", ["run", "--camera", "test", "--microphone", PulseAudioServer.microphoneID, "--preset", "vga640x480",
                                          "--movie-folder", folder.path, "--photo-folder", folder.path, "--json"], writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        let movie = URL(fileURLWithPath: try XCTUnwrap(run.waitForReply(1)?["path"] as? String, run.output))
        XCTAssertTrue(run.waitForEvent("recordingProgress"))
        server.kill()
        XCTAssertTrue(run.waitForEvent("interrupted"), "no interrupted event: \(run.output)")
        XCTAssertEqual(run.events("interrupted").first?["code"] as? Int, CaptureSession.InterruptionReason.audioServerUnavailable.rawValue)
        let progressAtLoss = run.events("recordingProgress").count
        XCTAssertTrue(run.waitForEvent("recordingProgress", count: progressAtLoss + 2), "the recording stopped with the microphone: \(run.output)")
        XCTAssertTrue(run.events("recordingFinished").isEmpty, "the recording ended with the microphone: \(run.output)")
        run.send(#"{"id": 2, "command": "photo"}"#)
        XCTAssertEqual(run.waitForReply(2)?["ok"] as? Bool, true, "no photo after the microphone went: \(run.output)")
        run.send(#"{"id": 3, "command": "record", "action": "stop"}"#)
        XCTAssertEqual(run.waitForReply(3)?["ok"] as? Bool, true, run.output)
        quit(run)
        checkLines(run)
        XCTAssertTrue(try ffmpegDecodes(movie))
        XCTAssertEqual(try probe(movie).codecs.sorted(), ["aac", "h264"], "the audio track (silence after the loss) is kept")
    }

    /// A set-up that cannot start: one sentence on stderr, a non-zero exit, and the reason as the last
    /// protocol line for a program reading stdout.
    func testASetUpThatCannotStartSaysWhy() throws {
        let result = try runGCapture(["run", "--camera", "no-such-camera", "--json"], timeout: 20)
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("Error: no device with id 'no-such-camera'"), result.stderr)
        let lines = result.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(lines.first?["event"] as? String, "hello")
        XCTAssertEqual(lines.last?["event"] as? String, "stopped")
        XCTAssertTrue((lines.last?["error"] as? String)?.contains("no-such-camera") ?? false, result.stdout)

        let naming = try runGCapture(["run", "--photo-naming", "shots/photo.jpg"], timeout: 20)
        XCTAssertEqual(naming.status, 64, naming.stderr)
        XCTAssertTrue(naming.stderr.contains("--photo-naming shots/photo.jpg: a name cannot contain '/'"), naming.stderr)
        // A name says the file's type: movies are .mp4 or .mkv, photos JPEG.
        for (option, pattern, expected) in [("--movie-naming", "clip-{counter}.avi", ".mp4 or .mkv"),
                                            ("--photo-naming", "shot-{counter}.png", ".jpg or .jpeg")] {
            let misnamed = try runGCapture(["run", option, pattern], timeout: 20)
            XCTAssertEqual(misnamed.status, 64, misnamed.stderr)
            XCTAssertTrue(misnamed.stderr.contains("\(option) \(pattern): the names must end in \(expected)"), misnamed.stderr)
        }
    }

    /// The plain-words form, for a person at a terminal: the same commands, answered in words.
    func testPlainWordsAreAnsweredInWords() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder, json: false)
        let clip = folder.appendingPathComponent("my clip.mp4")
        run.send("photo")
        XCTAssertTrue(run.waitForLine { $0.hasPrefix("ok: photo ") }, run.output)
        run.send("rotate 270")
        XCTAssertTrue(run.waitForLine { $0 == "ok: rotation 270°" }, run.output)
        run.send("photo")
        XCTAssertTrue(run.waitForLine { $0.hasPrefix("ok: photo ") && $0.hasSuffix("(480x640)") }, run.output)
        run.send("record start \"\(clip.path)\"")
        XCTAssertTrue(run.waitForLine { $0 == "ok: recording \(clip.path)" }, run.output)
        Thread.sleep(forTimeInterval: 1)
        run.send("record stop")
        XCTAssertTrue(run.waitForLine { $0.hasPrefix("ok: recorded \(clip.path): ") }, run.output)
        run.send("phto")
        XCTAssertTrue(run.waitForLine { $0 == #"error: unknown command "phto"; did you mean "photo"?"# }, run.output)
        run.send("rotate 45")
        XCTAssertTrue(run.waitForLine { $0.hasPrefix("error: rotate: the angle 45") }, run.output)
        run.send("quit")
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)
        XCTAssertTrue(run.output.hasPrefix("gcapture run: control protocol 1"), run.output)
        XCTAssertFalse(run.output.contains("{"), "JSON in the plain form: \(run.output)")
        let photos = try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("photos").path)
        XCTAssertEqual(photos.count, 2, "\(photos)")
        XCTAssertEqual(try probe(clip).codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(try probe(clip).clockwiseRotation, 270, "the movie does not carry the rotation")
    }
}

extension LaunchedCommand {
    /// The reply to the request with this id, once it came (nil when the deadline passed first).
    func waitForReply(_ id: Int, timeout: TimeInterval = 20) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let reply = reply(id) { return reply }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return nil
    }

    /// Waits until stdout has `count` events `name` with this trigger; false when the deadline passed first.
    func waitForEvent(_ name: String, count: Int, trigger: String, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if events(name).filter({ $0["trigger"] as? String == trigger }).count >= count { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }

    func reply(_ id: Int) -> [String: Any]? { events.first { $0["ok"] != nil && $0["id"] as? Int == id } }
    func reply(_ id: String) -> [String: Any]? { events.first { $0["ok"] != nil && $0["id"] as? String == id } }

    /// Waits until a line of stdout satisfies `condition`; false when the deadline passed first.
    func waitForLine(timeout: TimeInterval = 20, _ condition: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if output.split(separator: "\n").contains(where: { condition(String($0)) }) { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }
}
