import Foundation
import XCTest

/// What the CLI does with what a user types: numbers out of range, a device of the wrong kind, names of
/// values, and the built-in test devices standing in for missing ones.
final class CommandInputTests: XCTestCase {
    /// Every numeric option takes only finite numbers in its stated range, and says which option and
    /// which range. These used to crash (inf), be called negative (nan), record forever (inf, 1e30) or
    /// be accepted as limits that mean nothing (0, -1).
    func testEveryNumericOptionRejectsWhatIsOutOfRange() throws {
        let movie = try temporaryFolder().appendingPathComponent("never.mp4").path
        let cases: [(arguments: [String], option: String, range: String)] = [
            (["photo", "--interval", "inf"], "--interval", "from 0 to 3600 seconds"),
            (["photo", "--interval", "nan"], "--interval", "from 0 to 3600 seconds"),
            (["photo", "--interval", "-1"], "--interval", "from 0 to 3600 seconds"),
            (["photo", "--count", "0"], "--count", "from 1 to 100000"),
            (["photo", "--count", "1e30"], "--count", "from 1 to 100000"),
            (["photo", "--deferred-delay", "inf"], "--deferred-delay", "from 0 to 3600 seconds"),
            (["photo", "--noise", "-1"], "--noise", "from 0 to 127"),
            (["photo", "--rotation", "45"], "--rotation", "0, 90, 180 or 270 degrees"),
            (["frames", "--duration", "nan"], "--duration", "from 0.1 to 3600 seconds"),
            (["frames", "--noise", "1000"], "--noise", "from 0 to 127"),
            (["record", "--output", movie, "--duration", "inf"], "--duration", "from 0.1 to 86400 seconds"),
            (["record", "--output", movie, "--duration", "nan"], "--duration", "from 0.1 to 86400 seconds"),
            (["record", "--output", movie, "--duration", "1e30"], "--duration", "from 0.1 to 86400 seconds"),
            (["record", "--output", movie, "--max-size", "0"], "--max-size", "from 1 to 1000000000000 bytes"),
            (["record", "--output", movie, "--max-size", "-1"], "--max-size", "from 1 to 1000000000000 bytes"),
        ]
        for (arguments, option, range) in cases {
            let line = "gcapture " + arguments.joined(separator: " ")
            let result = try runGCapture(arguments, timeout: 15)
            XCTAssertNotEqual(result.status, 0, line)
            XCTAssertFalse(result.stderr.contains("crashed"), "\(line): \(result.stderr)")
            let error = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
            XCTAssertTrue(error.hasPrefix("Error: The value '\(arguments.last!)' is invalid for '\(option) "), "\(line): \(error)")
            XCTAssertTrue(error.hasSuffix(range), "\(line): \(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: movie), "a rejected recording left a file")
    }

    /// The value given is the value used: `frames --duration` is honoured to about a frame and reported as run.
    func testFramesRunsForItsDuration() throws {
        let result = try runGCapture(["frames", "--duration", "0.5", "--preset", "vga640x480", "--json"], timeout: 20)
        XCTAssertEqual(result.status, 0, result.stderr)
        let finished = try XCTUnwrap(jsonLines(result.stdout).last)
        // The run's wall time: never short, and late only by the scheduler (74 ms once on a loaded machine),
        // never by the 0.2 s steps durations used to be rounded up to.
        let seconds = finished["seconds"] as? Double ?? 0
        XCTAssertGreaterThanOrEqual(seconds, 0.5 - 1.0 / 30)
        XCTAssertLessThan(seconds, 0.6)
        // The first frame at the start and one per 1/30 s after it: the frames say the duration to a frame.
        XCTAssertEqual(Double(finished["frames"] as? Int ?? 0), 16, accuracy: 2)
    }

    /// A camera named as a microphone, or the reverse, is one sentence before anything starts; it used to
    /// capture nothing and exit 0 (frames), time out after 2 s (photo) or record without a word.
    func testADeviceOfTheWrongKindIsSaidAtOnce() throws {
        let movie = try temporaryFolder().appendingPathComponent("wrong.mp4").path
        let cases: [([String], String)] = [
            (["frames", "--camera", "test-microphone"], "Error: --camera test-microphone names a microphone, not a camera"),
            (["photo", "--camera", "test-microphone"], "Error: --camera test-microphone names a microphone, not a camera"),
            (["record", "--camera", "test-microphone", "--output", movie], "Error: --camera test-microphone names a microphone, not a camera"),
            (["record", "--microphone", "test", "--output", movie], "Error: --microphone test names a camera, not a microphone"),
        ]
        for (arguments, message) in cases {
            let started = Date()
            let result = try runGCapture(arguments, timeout: 15)
            XCTAssertNotEqual(result.status, 0, arguments.joined(separator: " "))
            XCTAssertLessThan(Date().timeIntervalSince(started), 1.5, "\(arguments): waited for a device that cannot deliver")
            let lines = result.stderr.split(separator: "\n").filter { !$0.hasPrefix("gcapture: no ") }
            XCTAssertEqual(lines.count, 1, result.stderr)
            XCTAssertTrue(lines.first?.hasPrefix(message) ?? false, result.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: movie))
    }

    /// `photo --quality` lists and takes the names; its help used to say "values: 1, 2, 3; default: 2",
    /// which it rejected.
    func testPhotoQualityIsNamedInHelpAndErrors() throws {
        let help = try runGCapture(["photo", "--help"], timeout: 15)
        XCTAssertEqual(help.status, 0)
        let flattened = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(flattened.contains("(values: speed, balanced, quality; default: balanced)"), help.stdout)
        let number = try runGCapture(["photo", "--quality", "2"], timeout: 15)
        XCTAssertNotEqual(number.status, 0)
        XCTAssertTrue(number.stderr.contains("Please provide one of 'speed', 'balanced' or 'quality'"), number.stderr)
        let folder = try temporaryFolder()
        let speed = try runGCapture(["photo", "--quality", "speed", "--preset", "vga640x480", "--json",
                                                "--output", folder.appendingPathComponent("fast.jpg").path], timeout: 20)
        XCTAssertEqual(speed.status, 0, speed.stderr)
        XCTAssertEqual(jsonLines(speed.stdout).first { $0["event"] as? String == "photo" }?["quality"] as? String, "speed")
    }

    /// Without a real camera (or microphone) the CLI uses the built-in test device, and says so on stderr
    /// and in its started events; a device the user named is used without a word.
    func testTheTestDevicesAreAnnouncedWhenTheyStandIn() throws {
        let devices = try runGCapture(["devices", "--json"], timeout: 15)
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(devices.stdout.utf8)) as? [[String: Any]])
        func hasReal(_ type: String) -> Bool {
            listed.contains { $0["mediaType"] as? String == type && !["testCamera", "testMicrophone"].contains($0["type"] as? String) }
        }
        let cameraNotice = "no camera found: using the built-in test camera `test`"
        let microphoneNotice = "no microphone found: using the built-in test microphone `test-microphone`"

        let frames = try runGCapture(["frames", "--duration", "0.3", "--preset", "vga640x480", "--json"], timeout: 20)
        XCTAssertEqual(frames.status, 0, frames.stderr)
        let started = try XCTUnwrap(jsonLines(frames.stdout).first)
        if hasReal("video") {
            XCTAssertFalse(frames.stderr.contains(cameraNotice), frames.stderr)
            XCTAssertEqual(started["testDevice"] as? Bool, false)
        } else {
            XCTAssertTrue(frames.stderr.contains("gcapture: " + cameraNotice), frames.stderr)
            XCTAssertEqual(started["testDevice"] as? Bool, true)
            XCTAssertEqual(started["notice"] as? String, cameraNotice)
        }

        let named = try runGCapture(["frames", "--camera", "test", "--duration", "0.3", "--preset", "vga640x480", "--json"], timeout: 20)
        XCTAssertEqual(named.status, 0, named.stderr)
        XCTAssertFalse(named.stderr.contains("no camera found"), named.stderr)
        XCTAssertEqual(jsonLines(named.stdout).first?["testDevice"] as? Bool, false)
        XCTAssertNil(jsonLines(named.stdout).first?["notice"])

        let movie = try temporaryFolder().appendingPathComponent("announced.mp4")
        let record = try runGCapture(["record", "--camera", "test", "--duration", "0.5", "--preset", "vga640x480",
                                                 "--output", movie.path, "--json"], timeout: 30)
        XCTAssertEqual(record.status, 0, record.stderr)
        let recordingStarted = try XCTUnwrap(jsonLines(record.stdout).first { $0["event"] as? String == "recordingStarted" })
        if hasReal("audio") {
            XCTAssertFalse(record.stderr.contains(microphoneNotice), record.stderr)
            XCTAssertEqual(recordingStarted["testDevice"] as? Bool, false)
        } else {
            XCTAssertTrue(record.stderr.contains("gcapture: " + microphoneNotice), record.stderr)
            XCTAssertEqual(recordingStarted["testDevice"] as? Bool, true)
            XCTAssertEqual(recordingStarted["notice"] as? String, microphoneNotice)
            XCTAssertEqual(recordingStarted["microphone"] as? String, "Test Microphone [test-microphone]")
        }
    }

    private func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
