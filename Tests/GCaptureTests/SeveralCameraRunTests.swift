import Foundation
import XCTest

/// `gcapture run FILE --http` with a description of two cameras (a black test camera recording the room, a white
/// one photographing the door): each camera's live view, the commands going to the picked camera, each camera's
/// files by its own rule, a reload per camera, and the page in a real browser.
final class SeveralCameraRunTests: XCTestCase {
    static let description = """
        version: 1
        microphone: none
        cameras:
          - name: room
            camera: {id: test, pattern: black}
            outputs:
              movie: {audio: false, folder: media, name: "room-{counter}.mp4"}
          - name: door
            camera: {id: test, pattern: white}
            outputs:
              photo: {folder: media, name: "door-{counter}.jpg"}

        """

    /// The description in a folder of its own, and `gcapture run` serving its page on a free port.
    private func startRun() throws -> (run: LaunchedCommand, port: Int, file: URL, folder: URL) {
        let folder = try temporaryFolder()
        let file = folder.appendingPathComponent("cameras.yaml")
        try Self.description.write(to: file, atomically: true, encoding: .utf8)
        let run = try launch("gcapture", ["run", file.path, "--http", "127.0.0.1:0", "--json", "--live-size", "320x240"])
        guard run.waitForEvent("listening", timeout: 60), let port = run.events("listening").first?["port"] as? Int else {
            throw CheckFailed(description: "gcapture run did not start listening: \(run.errorOutput)")
        }
        return (run, port, file, folder.appendingPathComponent("media"))
    }

    func testEachCommandGoesToThePickedCameraAndEachCameraKeepsItsOwnFiles() throws {
        let (run, port, file, media) = try startRun()
        XCTAssertEqual(run.events("started").compactMap { $0["cameraName"] as? String }.sorted(), ["door", "room"], run.output)
        let status = try http(port, "GET", "/api/status")
        XCTAssertEqual((status.json?["cameraSet"] as? [[String: Any]])?.map { $0["name"] as? String }, ["room", "door"], status.text)
        XCTAssertEqual((status.json?["liveViews"] as? [[String: Any]])?.count, 2, status.text)
        for (camera, white) in [("room", false), ("door", true)] {
            let luma = try XCTUnwrap(try liveFrameLuma(port: port, camera: camera), "no live frame of \(camera)")
            XCTAssertTrue(white ? luma > 200 : luma < 40, "the live view of \(camera) is not its camera: luma \(luma)")
        }

        // The room has no photo output: the refusal says which camera does.
        let refused = try command(port, #"{"command": "photo"}"#)
        XCTAssertEqual(refused.status, 422)
        XCTAssertEqual(refused.json?["error"] as? String,
                       "the picked camera, room, takes no photos (it has no such output): `switch door` picks one that does")
        let recording = try command(port, #"{"command": "record", "action": "start"}"#)
        XCTAssertEqual(recording.status, 200, recording.text)
        XCTAssertEqual(try command(port, #"{"command": "switch", "camera": "door"}"#).status, 200)
        let photo = try command(port, #"{"command": "photo"}"#)
        XCTAssertEqual(photo.json?["path"] as? String, media.appendingPathComponent("door-0001.jpg").path, photo.text)
        Thread.sleep(forTimeInterval: 1.5)
        // The door is picked and records nothing: the stop goes to the room, which does.
        let stop = try command(port, #"{"command": "record", "action": "stop"}"#)
        XCTAssertEqual(stop.json?["path"] as? String, media.appendingPathComponent("room-0001.mp4").path, stop.text)

        // A reload applies each camera's own part: the door turned, the room unchanged.
        let turned = Self.description.replacingOccurrences(of: "    camera: {id: test, pattern: white}\n",
                                                           with: "    camera: {id: test, pattern: white}\n    rotation: 180\n")
        try turned.write(to: file, atomically: true, encoding: .utf8)
        run.signal(SIGHUP)
        XCTAssertTrue(run.waitForEvent("reloaded", count: 2, timeout: 30), run.output + run.errorOutput)
        let reloads = Dictionary(uniqueKeysWithValues: run.events("reloaded").compactMap { event in
            (event["cameraName"] as? String).map { ($0, event["changed"] as? [String] ?? []) }
        })
        XCTAssertEqual(reloads, ["door": ["rotation"], "room": []], run.output)

        run.signal(SIGINT)
        XCTAssertTrue(run.waitForExit(timeout: 60))
        XCTAssertEqual(run.status, 0, run.errorOutput)
        XCTAssertGreaterThan(try XCTUnwrap(try frameLumas(media.appendingPathComponent("door-0001.jpg")).first), 200, "the door's photo is white")
        let roomLumas = try frameLumas(media.appendingPathComponent("room-0001.mp4"))
        XCTAssertGreaterThan(roomLumas.count, 30, "about 1.5 s at 30 fps")
        XCTAssertEqual(roomLumas.filter { $0 > 40 }, [], "the room's movie holds the room's (black) camera only")
    }

    /// The page in headless Chromium: a small live view per camera, each its camera's picture; a press on the
    /// door's picks it, the big view then shows the door, and the shutter takes the door's photo.
    func testThePageShowsEveryCameraAndAPressPicksTheOneTheShutterUses() throws {
        try requireBrowser()
        let (run, _, _, media) = try startRun()
        let url = try XCTUnwrap(run.events("listening").first?["url"] as? String)
        let script = ServeBrowserTests.script.deletingLastPathComponent().appendingPathComponent("cameras_page.py")
        let browser = try runTool("/usr/bin/python3", [script.path, url, "room", "door"], timeout: 150)
        XCTAssertEqual(browser.status, 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr.suffix(2000))")
        let findings = browser.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(findings.compactMap { $0["check"] as? String },
                       ["each small view shows its camera", "big view shows the picked camera", "a press picks the door",
                        "big view follows the pick", "the shutter takes the door's photo"], browser.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: media.appendingPathComponent("door-0001.jpg").path), browser.stdout)
    }
}
