import Foundation
import XCTest

/// The paths `gcapture run`'s commands name (issue 24): under --safe they stay inside --root, and a photo
/// never replaces a file nor lies about its type.
final class SafeRunCommandTests: XCTestCase {
    /// Under --safe, `photo PATH` and `record start PATH` outside the root are refused with a reply that
    /// says so, and nothing is written there: not an absolute path elsewhere, not '..', not a symbolic link
    /// that leads out. A path inside the root still works.
    func testUnderSafeCommandPathsStayInsideTheRoot() throws {
        let folder = try temporaryFolder()
        let root = folder.appendingPathComponent("root")
        let outside = folder.appendingPathComponent("outside")
        for made in [root, outside] { try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true) }
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("escape"), withDestinationURL: outside)
        // A link to a file not there yet: a movie written through it would land outside.
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("dangling.mp4"),
                                                   withDestinationURL: outside.appendingPathComponent("dangling.mp4"))
        let file = folder.appendingPathComponent("kiosk.yaml")
        try """
            version: 1
            camera:
              id: test
              preset: vga640x480
            outputs:
              photo:
                folder: photos
              movie:
                audio: false
                folder: movies
            """.write(to: file, atomically: true, encoding: .utf8)
        // Run from inside the root: '..' then leaves it whichever folder a relative path is taken from.
        let run = try launch("gcapture", ["run", file.path, "--safe", "--root", root.path, "--json"], writesStdin: true,
                             currentDirectory: root)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")

        let refused: [(id: Int, request: String)] = [
            (1, #"{"id": 1, "command": "photo", "path": "\#(outside.appendingPathComponent("elsewhere.jpg").path)"}"#),
            (2, #"{"id": 2, "command": "record", "action": "start", "path": "../x.mp4"}"#),
            (3, #"{"id": 3, "command": "photo", "path": "photos/../../x.jpg"}"#),
            (4, #"{"id": 4, "command": "photo", "path": "escape/linked.jpg"}"#),
            (5, #"{"id": 5, "command": "record", "action": "start", "path": "escape/linked.mp4"}"#),
            (6, #"{"id": 6, "command": "record", "action": "start", "path": "dangling.mp4"}"#),
        ]
        for (id, request) in refused {
            run.send(request)
            let reply = run.waitForReply(id)
            XCTAssertEqual(reply?["ok"] as? Bool, false, "\(request): \(reply ?? [:]) \(run.errorOutput)")
            let error = reply?["error"] as? String ?? ""
            XCTAssertTrue(error.contains("outside the root") && error.contains("--safe"), "\(request): \(error)")
        }
        run.send(#"{"id": 7, "command": "photo", "path": "inside.jpg"}"#)
        XCTAssertEqual(run.waitForReply(7)?["path"] as? String, root.appendingPathComponent("inside.jpg").path, run.output)
        run.send(#"{"id": 8, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20), "quit did not end the run")
        XCTAssertEqual(run.status, 0, run.errorOutput)

        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "written outside the root")
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: folder.path)), ["root", "outside", "kiosk.yaml"],
                       "written outside the root")
        XCTAssertFalse(run.events.contains { $0["event"] as? String == "recordingStarted" }, run.output)
    }

    /// `photo PATH` never replaces a file (the reply says it exists; the bytes are kept) and its name says
    /// it is a JPEG: shot.png is refused, not written as a JPEG under a PNG's name.
    func testAPhotoNeverReplacesAFileNorTakesAnotherTypesName() throws {
        let folder = try temporaryFolder()
        let existing = folder.appendingPathComponent("existing.jpg")
        let old = Data("the user's own picture".utf8)
        try old.write(to: existing)
        let run = try launch("gcapture", ["run", "--camera", "test", "--microphone", "none", "--preset", "vga640x480",
                                          "--photo-folder", folder.path, "--movie-folder", folder.path, "--json"],
                             writesStdin: true, currentDirectory: folder)
        XCTAssertTrue(run.waitForEvent("started"), "not started: \(run.errorOutput)")
        run.send(#"{"id": 1, "command": "photo", "path": "existing.jpg"}"#)
        let taken = run.waitForReply(1)
        XCTAssertEqual(taken?["ok"] as? Bool, false, "\(taken ?? [:])")
        XCTAssertTrue((taken?["error"] as? String ?? "").contains("\(existing.path) already exists"), "\(taken ?? [:])")
        run.send("photo shot.png")
        XCTAssertTrue(run.waitForLine { $0.contains(#""ok":false"#) && $0.contains(".jpg or .jpeg") }, run.output)
        run.send(#"{"id": 3, "command": "photo", "path": "shot.jpg"}"#)
        XCTAssertEqual(run.waitForReply(3)?["ok"] as? Bool, true, run.output)
        run.send(#"{"id": 4, "command": "quit"}"#)
        XCTAssertTrue(run.waitForExit(timeout: 20), "quit did not end the run")
        XCTAssertEqual(try Data(contentsOf: existing), old, "the existing file was replaced")
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: folder.path)), ["existing.jpg", "shot.jpg"])
    }
}
