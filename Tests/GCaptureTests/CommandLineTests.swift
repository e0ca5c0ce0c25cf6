import Foundation
import XCTest

/// The gcapture program as a user runs it.
final class CommandLineTests: XCTestCase {
    func testVersionNamesGStreamer() throws {
        let result = try runProduct("gcapture", ["--version"])
        XCTAssertEqual(result.status, 0)
        XCTAssertTrue(result.stdout.hasPrefix("gcapture "), result.stdout)
        XCTAssertTrue(result.stdout.contains("GStreamer 1."), result.stdout)
    }

    func testDevicesAsJSONIncludeTheTestCameraWithFormats() throws {
        let result = try runProduct("gcapture", ["devices", "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let devices = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        let test = try XCTUnwrap(devices.first { $0["id"] as? String == "test" })
        XCTAssertEqual(test["mediaType"] as? String, "video")
        XCTAssertEqual(test["authorization"] as? String, "authorized")
        let formats = try XCTUnwrap(test["formats"] as? [[String: Any]])
        XCTAssertTrue(formats.contains { $0["width"] as? Int == 1920 && $0["pixelFormat"] as? String == "NV12" })
        XCTAssertTrue(devices.contains { $0["id"] as? String == "test-microphone" })
    }

    func testDevicesSaysWhenNoRealDeviceCanBeListed() throws {
        // No plugin at all, so no device provider: GStreamer's device monitor cannot start.
        let empty = try temporaryFolder()
        let result = try runProduct("gcapture", ["devices"], environment: [
            "GST_PLUGIN_SYSTEM_PATH_1_0": empty.path, "GST_PLUGIN_PATH_1_0": empty.path,
            "GST_REGISTRY_1_0": empty.appendingPathComponent("registry.bin").path,
        ])
        XCTAssertEqual(result.status, 1, "a list without the real devices must not look like a machine without cameras")
        XCTAssertTrue(result.stderr.contains("Error: no Video/Source or Audio/Source device can be listed"), result.stderr)
        XCTAssertTrue(result.stdout.contains("[test]"), "the built-in devices are still listed: \(result.stdout)")
    }

    func testFramesReportsWhatArrived() throws {
        let result = try runProduct("gcapture", ["frames", "--duration", "1", "--preset", "vga640x480", "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        XCTAssertEqual(lines.first?["event"] as? String, "started")
        let finished = try XCTUnwrap(lines.last)
        XCTAssertEqual(finished["event"] as? String, "finished")
        XCTAssertGreaterThanOrEqual(finished["frames"] as? Int ?? 0, 25)
        XCTAssertEqual(finished["width"] as? Int, 640)
        XCTAssertEqual(finished["fps"] as? Double ?? 0, 30, accuracy: 1)
    }

    /// A camera that cannot keep its rate (the 4K test pattern with the most sensor noise, more than two
    /// cores make 30 times a second) stamps its frames at the nominal rate all the same: the report gives
    /// the rate at which frames arrived.
    func testFramesReportsTheRateMeasuredNotTheRateAskedFor() throws {
        let result = try runProduct("gcapture", ["frames", "--duration", "4", "--preset", "hd4K3840x2160", "--noise", "127", "--json"],
                                    timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr)
        let finished = try XCTUnwrap(result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.last)
        let frames = Double(try XCTUnwrap(finished["frames"] as? Int)), seconds = try XCTUnwrap(finished["seconds"] as? Double)
        let fps = try XCTUnwrap(finished["fps"] as? Double)
        let arrived = frames / seconds
        XCTAssertGreaterThan(frames, 5)
        XCTAssertEqual(fps, arrived, accuracy: max(1.5, arrived * 0.2),
                       "\(Int(frames)) frames in \(seconds) s reported as \(fps) fps")
    }

    func testErrorsAreOneSentenceAndFail() throws {
        let unknown = try runProduct("gcapture", ["frames", "--camera", "/dev/video42"])
        XCTAssertNotEqual(unknown.status, 0)
        XCTAssertTrue(unknown.stderr.hasPrefix("Error: no device with id '/dev/video42'"), unknown.stderr)
        XCTAssertEqual(unknown.stderr.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").count, 1)

        let preset = try runProduct("gcapture", ["frames", "--preset", "huge"])
        XCTAssertNotEqual(preset.status, 0)
        XCTAssertTrue(preset.stderr.contains("huge"), preset.stderr)
    }

    func testLogLevelDebugLogsTheEngineAndGStreamerAndTheDefaultLogsNothingOnACleanRun() throws {
        let arguments = ["frames", "--camera", "test", "--duration", "0.5", "--preset", "vga640x480"]
        let quiet = try runProduct("gcapture", arguments)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(quiet.stderr, "", "the default level (warning) logs nothing on a clean run")
        let verbose = try runProduct("gcapture", arguments + ["--log-level", "debug"])
        XCTAssertEqual(verbose.status, 0, verbose.stderr)
        let lines = verbose.stderr.split(separator: "\n")
        XCTAssertTrue(lines.contains { $0.contains(" debug gcapture.session:") && $0.contains("first buffer from Test Camera") },
                      "no engine line: \(verbose.stderr.prefix(2000))")
        XCTAssertTrue(lines.contains { $0.contains(" debug gstreamer:") && $0.contains("category=GST_") },
                      "no GStreamer line: \(verbose.stderr.prefix(2000))")
        XCTAssertFalse(lines.contains { $0.contains(" trace ") }, "trace lines at level debug")
        let rejected = try runProduct("gcapture", arguments + ["--log-level", "loud"])
        XCTAssertNotEqual(rejected.status, 0)
        XCTAssertTrue(rejected.stderr.contains("loud"), rejected.stderr)
    }

    /// GStreamer's leak tracer lists every GstObject still alive at gst_deinit: after a real capture and a
    /// device listing there must be none.
    func testLeakTracerFindsNothingAlive() throws {
        let environment = ["GST_TRACERS": "leaks", "GST_DEBUG": "GST_TRACER:7", "GST_DEBUG_NO_COLOR": "1"]
        for arguments in [["frames", "--duration", "0.5"], ["devices"]] {
            let result = try runProduct("gcapture", arguments, environment: environment)
            XCTAssertEqual(result.status, 0, result.stderr)
            // The tracer announces its record format when it is active; without that this test proves nothing.
            XCTAssertTrue(result.stderr.contains("object-alive.class"), "the leaks tracer did not run")
            let leaks = result.stderr.split(separator: "\n").filter { $0.contains("object-alive, type-name=(string)") && !$0.contains("%s") }
            XCTAssertEqual(leaks, [], "gcapture \(arguments.joined(separator: " ")) leaked GStreamer objects")
        }
    }
}
