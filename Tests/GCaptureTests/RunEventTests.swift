import Foundation
@testable import GCapture
import XCTest

/// Event recording through `gcapture run`: `trigger` on stdin and SIGUSR2 start and extend a clip that
/// begins with the pre-roll and ends a post-roll after the last trigger, told by eventStarted,
/// eventExtended and eventEnded, with the clip's record beside it.
final class RunEventTests: XCTestCase {
    /// `gcapture run` on the test camera at 640x480, movies into `folder`, once it has started.
    private func startRun(_ folder: URL, microphone: String = "test-microphone", _ options: [String]) throws -> LaunchedCommand {
        let run = try launch("gcapture", ["run", "--camera", "test", "--microphone", microphone, "--preset", "vga640x480",
                                          "--movie-folder", folder.path, "--json"] + options, writesStdin: true)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        return run
    }

    func testATriggerAndASignalMakeOneClipWithItsPreRollAndRecord() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder, ["--pre-roll", "2", "--post-roll", "1"])
        // The ring fills for longer than the pre-roll (the encoder starts with the session, later under load).
        Thread.sleep(forTimeInterval: 4)
        run.send(#"{"id": 1, "command": "trigger", "source": "doorbell"}"#)
        let reply = try XCTUnwrap(run.waitForReply(1), run.errorOutput)
        XCTAssertEqual(reply["ok"] as? Bool, true, "\(reply)")
        XCTAssertEqual(reply["event"] as? String, "began")
        let path = try XCTUnwrap(reply["path"] as? String)
        XCTAssertTrue(run.waitForEvent("eventStarted"), run.errorOutput)
        Thread.sleep(forTimeInterval: 0.5)
        run.signal(SIGUSR2)
        XCTAssertTrue(run.waitForEvent("eventExtended"), "SIGUSR2 did not extend the clip: \(run.output)")
        XCTAssertTrue(run.waitForEvent("eventEnded", timeout: 20), "the clip did not end: \(run.output) \(run.errorOutput)")
        run.send(#"{"id": 2, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)

        let started = try XCTUnwrap(run.events("eventStarted").first)
        XCTAssertEqual(started["path"] as? String, path)
        XCTAssertEqual(started["trigger"] as? String, "doorbell")
        XCTAssertEqual(run.events("eventExtended").first?["trigger"] as? String, "signal")
        let ended = try XCTUnwrap(run.events("eventEnded").first)
        XCTAssertEqual(ended["complete"] as? Bool, true, "\(ended)")
        XCTAssertEqual(ended["triggers"] as? [String], ["doorbell", "signal"])
        let preRoll = try XCTUnwrap(ended["preRoll"] as? Double)
        XCTAssertTrue((2.0...3.1).contains(preRoll), "pre-roll \(preRoll) s")

        let url = URL(fileURLWithPath: path)
        let probed = try probe(url)
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        // The pre-roll, the half second between the triggers, the post-roll.
        XCTAssertEqual(probed.duration, preRoll + 0.5 + 1, accuracy: 0.4)
        XCTAssertTrue(try ffmpegDecodes(url))
        let record = try EventClipRecord.read(forClip: url)
        XCTAssertEqual(record.triggers.map(\.source), ["doorbell", "signal"])
        XCTAssertEqual(ended["record"] as? String, EventClipRecord.url(forClip: url).path)
    }

    /// Killed (-9) in the middle of an event's clip: the clip so far, its pre-roll included, is recovered
    /// from its crash sidecar as any recording is, and its record, left open with the triggers so far, is
    /// closed by the recovery with the rebuilt file's end and duration.
    func testAnEventClipCutByAKillIsRecoveredWithItsPreRollAndRecord() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder, ["--pre-roll", "2", "--post-roll", "60"])
        Thread.sleep(forTimeInterval: 4)
        let firstTrigger = Date()
        run.send(#"{"id": 1, "command": "trigger", "source": "doorbell"}"#)
        let path = try XCTUnwrap(run.waitForReply(1)?["path"] as? String, run.output)
        XCTAssertTrue(run.waitForEvent("eventStarted"), run.errorOutput)
        Thread.sleep(forTimeInterval: 1.5)
        run.send(#"{"id": 2, "command": "trigger", "source": "porch"}"#)
        XCTAssertEqual(run.waitForReply(2)?["event"] as? String, "extended", run.output)
        Thread.sleep(forTimeInterval: 1.5)
        run.signal(SIGKILL)
        XCTAssertTrue(run.waitForExit(timeout: 10), "SIGKILL did not end it")
        let clip = URL(fileURLWithPath: path)
        XCTAssertTrue(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: clip).path), "no sidecar to recover")

        // What the crash left: the record as a reader of the JSON sees it, open, without an end.
        let recordURL = EventClipRecord.url(forClip: clip)
        let left = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: recordURL)) as? [String: Any], "the record is not a JSON object")
        XCTAssertEqual(left["open"] as? Bool, true, "\(left)")
        XCTAssertNil(left["end"], "an open record has no end: \(left)")
        XCTAssertEqual((left["triggers"] as? [[String: Any]])?.compactMap { $0["source"] as? String }, ["doorbell", "porch"], "\(left)")

        let results = CaptureMovieFileOutput.recoverInterruptedRecordings(in: folder)
        XCTAssertEqual(results.count, 1)
        XCTAssertEqual(try results.first?.get().path, clip.path)
        let probed = try probe(clip)
        print("event clip killed after 3 s with a 2 s pre-roll: \(probed.duration) s recovered")
        XCTAssertGreaterThan(probed.duration, 2 + 2.5, "the recovered clip lacks its pre-roll or its last seconds")
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertTrue(try ffmpegDecodes(clip))

        let record = try EventClipRecord.read(forClip: clip)
        XCTAssertTrue(record.recovered, "\(record)")
        XCTAssertFalse(record.open)
        XCTAssertFalse(record.complete)
        XCTAssertEqual(record.file, clip.lastPathComponent)
        XCTAssertEqual(record.triggers.map(\.source), ["doorbell", "porch"])
        XCTAssertTrue((2.0...3.1).contains(record.preRoll), "pre-roll \(record.preRoll) s")
        XCTAssertEqual(record.start.timeIntervalSince(firstTrigger), -record.preRoll, accuracy: 0.5)
        XCTAssertEqual(try XCTUnwrap(record.duration), probed.duration, accuracy: 0.2)
        XCTAssertEqual(try XCTUnwrap(record.end).timeIntervalSince(record.start), probed.duration, accuracy: 0.2)
    }

    /// A schedule: --trigger-every makes one clip per interval, each told with the source "schedule".
    func testAScheduleTriggersAClipEveryInterval() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder, microphone: "none", ["--trigger-every", "1.5", "--post-roll", "0.5"])
        XCTAssertTrue(run.waitForEvent("eventEnded", count: 2, timeout: 20), "no two scheduled clips: \(run.output) \(run.errorOutput)")
        run.send(#"{"id": 1, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)
        let ended = run.events("eventEnded")
        XCTAssertTrue(ended.allSatisfy { $0["triggers"] as? [String] == ["schedule"] && $0["complete"] as? Bool == true }, "\(ended)")
        let paths = Set(ended.compactMap { $0["path"] as? String })
        XCTAssertEqual(paths.count, ended.count, "two clips got one name")
        for path in paths { XCTAssertTrue(try ffmpegDecodes(URL(fileURLWithPath: path)), path) }
    }

    /// `record --pre-roll`: the recording waits for Enter, begins the pre-roll before it and lasts --duration after it.
    func testRecordWithAPreRollStartsAtEnterFromTheSecondsBefore() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("door.mp4")
        let record = try launch("gcapture", ["record", "--camera", "test", "--microphone", "test-microphone", "--preset", "vga640x480",
                                             "--output", movie.path, "--pre-roll", "2", "--duration", "1", "--json"], writesStdin: true)
        XCTAssertTrue(record.waitForEvent("waitingForTrigger"), "not waiting: \(record.errorOutput)")
        Thread.sleep(forTimeInterval: 4)
        XCTAssertFalse(FileManager.default.fileExists(atPath: movie.path), "recording before the trigger")
        record.send("")
        XCTAssertTrue(record.waitForExit(timeout: 30), "record did not end: \(record.output)")
        XCTAssertEqual(record.status, 0, record.errorOutput)
        XCTAssertEqual(record.events("triggered").first?["source"] as? String, "stdin")
        let finished = try XCTUnwrap(record.events("recordingFinished").first, record.output)
        let preRoll = try XCTUnwrap(finished["preRoll"] as? Double)
        XCTAssertTrue((2.0...3.1).contains(preRoll), "pre-roll \(preRoll) s")
        let probed = try probe(movie)
        XCTAssertEqual(probed.duration, preRoll + 1, accuracy: 0.3)
        XCTAssertTrue(try ffmpegDecodes(movie))
    }

    /// Stopped while waiting for its trigger, `record` makes no file and says so.
    func testRecordStoppedBeforeItsTriggerRecordsNothing() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("never.mp4")
        let record = try launch("gcapture", ["record", "--camera", "test", "--microphone", "none", "--output", movie.path,
                                             "--pre-roll", "1", "--json"], writesStdin: true)
        XCTAssertTrue(record.waitForEvent("waitingForTrigger"), "not waiting: \(record.errorOutput)")
        record.signal(SIGINT)
        XCTAssertTrue(record.waitForExit(timeout: 20))
        XCTAssertEqual(record.status, 0, record.errorOutput)
        XCTAssertEqual(record.events("stoppedBeforeTrigger").first?["signal"] as? String, "SIGINT")
        XCTAssertFalse(FileManager.default.fileExists(atPath: movie.path))
    }

    /// `run --motion`: the test camera's moving picture is motion from the start; it starts an event that it
    /// holds while it goes on, and the end of the run finishes the clip.
    func testMotionStartsAnEventThatQuitFinishes() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder, microphone: "none", ["--motion", "--post-roll", "1"])
        XCTAssertTrue(run.waitForEvent("motionBegan"), "no motion: \(run.output) \(run.errorOutput)")
        XCTAssertTrue(run.waitForEvent("eventStarted"), "motion started no event: \(run.output)")
        Thread.sleep(forTimeInterval: 2)
        XCTAssertTrue(run.events("eventEnded").isEmpty, "the clip ended while the motion went on")
        run.send(#"{"id": 1, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)
        let box = try XCTUnwrap(run.events("motionBegan").first?["box"] as? [Double])
        XCTAssertEqual(box.count, 4)
        XCTAssertEqual(run.events("eventStarted").first?["trigger"] as? String, "motion")
        let ended = try XCTUnwrap(run.events("eventEnded").first, "quit did not finish the clip: \(run.output)")
        XCTAssertEqual(ended["complete"] as? Bool, true, "\(ended)")
        let path = try XCTUnwrap(ended["path"] as? String)
        XCTAssertGreaterThan(try probe(URL(fileURLWithPath: path)).duration, 1.5)
        XCTAssertTrue(try ffmpegDecodes(URL(fileURLWithPath: path)))
        let record = try EventClipRecord.read(forClip: URL(fileURLWithPath: path))
        XCTAssertTrue(record.triggers.first?.detail?.hasPrefix("box ") ?? false, "\(record.triggers)")
    }

    /// A trigger needs the movie output to itself: a `record start` recording refuses it, in words.
    func testATriggerDuringAManualRecordingIsRefused() throws {
        let folder = try temporaryFolder()
        let run = try startRun(folder, microphone: "none", [])
        run.send(#"{"id": 1, "command": "record", "action": "start"}"#)
        XCTAssertEqual(run.waitForReply(1)?["ok"] as? Bool, true, run.output)
        run.send("trigger")
        XCTAssertTrue(run.waitForLine { $0.contains("`record stop` first, then trigger") }, run.output)
        run.send(#"{"id": 3, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20))
        XCTAssertEqual(run.status, 0, run.errorOutput)
        XCTAssertTrue(run.events("eventStarted").isEmpty)
    }
}
