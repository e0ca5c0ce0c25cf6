import Foundation
import XCTest

/// `gcapture photo` as a user, or a program driving it, runs it.
final class PhotoCommandTests: XCTestCase {
    private func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func testABurstWritesEveryPhotoAndReportsEachOne() throws {
        let folder = try temporaryFolder()
        let result = try runProduct("gcapture", ["photo", "--count", "4", "--interval", "0.1", "--preset", "vga640x480",
                                                 "--output", folder.appendingPathComponent("shot-%d.jpg").path, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let events = jsonLines(result.stdout)
        let photos = events.filter { $0["event"] as? String == "photo" }
        XCTAssertEqual(photos.count, 4)
        for photo in photos {
            let path = try XCTUnwrap(photo["path"] as? String)
            XCTAssertEqual(try exif(URL(fileURLWithPath: path))["ImageWidth"] as? Int, 640)
            XCTAssertLessThanOrEqual(photo["shutterLagMs"] as? Double ?? 99, 1000.0 / 30)
            XCTAssertNotNil(photo["latencyMs"] as? Double)
            XCTAssertEqual(photo["quality"] as? String, "balanced")
        }
        XCTAssertTrue(events.contains { $0["event"] as? String == "readiness" && $0["state"] as? String == "ready" })
    }

    /// A burst as fast as the output takes it: each photo is its own frame (it used to save one frame
    /// several times, byte for byte).
    func testEachPhotoOfAFastBurstIsItsOwnFrame() throws {
        let folder = try temporaryFolder()
        let result = try runProduct("gcapture", ["photo", "--count", "5", "--preset", "vga640x480",
                                                 "--output", folder.appendingPathComponent("shot-%d.jpg").path, "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let photos = jsonLines(result.stdout).filter { $0["event"] as? String == "photo" }
        XCTAssertEqual(photos.count, 5)
        let timestamps = photos.compactMap { $0["frameTimestamp"] as? Double }
        XCTAssertEqual(Set(timestamps).count, 5, "frames \(timestamps)")
        let files = try (1...5).map { try Data(contentsOf: folder.appendingPathComponent("shot-\($0).jpg")) }
        XCTAssertEqual(Set(files).count, 5, "identical photos in the burst")
    }

    func testBadInputIsOneSentenceAndLeavesNothing() throws {
        // Run in an empty folder of its own: the default output (photo.jpg) and every file named below go
        // there, so whatever a failed run leaves behind is seen. The camera is named: without a real one the
        // default would add its notice on stderr.
        let folder = try temporaryFolder()
        let missing = try runProduct("gcapture", ["photo", "--camera", "test", "--output", "/nonexistent-gcapture/x.jpg"],
                                     currentDirectory: folder)
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.stderr.hasPrefix("Error: cannot write /nonexistent-gcapture/x.jpg"), missing.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/nonexistent-gcapture"), "the missing folder was made")
        let camera = try runProduct("gcapture", ["photo", "--camera", "nope"], currentDirectory: folder)
        XCTAssertNotEqual(camera.status, 0)
        XCTAssertTrue(camera.stderr.contains("no device with id 'nope'"), camera.stderr)
        let burst = try runProduct("gcapture", ["photo", "--camera", "nope", "--count", "3", "--output", "shot-%d.jpg"],
                                   currentDirectory: folder)
        XCTAssertNotEqual(burst.status, 0)
        // The photo is a JPEG, and its name must say so; a folder is not a photo's name.
        for name in ["shot.png", "shot", "."] {
            let misnamed = try runProduct("gcapture", ["photo", "--camera", "test", "--output", name], currentDirectory: folder)
            XCTAssertEqual(misnamed.status, 64, "\(name): \(misnamed.stderr)")
            XCTAssertTrue(misnamed.stderr.contains(name == "." ? "is a directory" : ".jpg or .jpeg"), misnamed.stderr)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), [], "a failed run left files")
    }

    /// A photo never replaces a file unless --overwrite says so (issue 24), as `record` does: the existing
    /// file's bytes are left alone and the command stops before opening the camera, exit status 64.
    func testAnExistingFileIsKeptUnlessOverwriteIsGiven() throws {
        let folder = try temporaryFolder()
        let keep = folder.appendingPathComponent("keep.jpg")
        let old = Data("the user's own picture".utf8)
        try old.write(to: keep)
        let refused = try runProduct("gcapture", ["photo", "--camera", "test", "--output", "keep.jpg"], currentDirectory: folder)
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("\(keep.path) already exists") && refused.stderr.contains("--overwrite"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: keep), old, "the existing photo was replaced")
        // A burst stops before its first photo when a later one's name is taken.
        try old.write(to: folder.appendingPathComponent("shot-2.jpg"))
        let burst = try runProduct("gcapture", ["photo", "--camera", "test", "--count", "2", "--output", "shot-%d.jpg"],
                                   currentDirectory: folder)
        XCTAssertEqual(burst.status, 64, burst.stderr)
        XCTAssertTrue(burst.stderr.contains("shot-2.jpg already exists"), burst.stderr)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: folder.path)), ["keep.jpg", "shot-2.jpg"])

        let replaced = try runProduct("gcapture", ["photo", "--camera", "test", "--preset", "vga640x480", "--overwrite",
                                                   "--output", "keep.jpg"], currentDirectory: folder)
        XCTAssertEqual(replaced.status, 0, replaced.stderr)
        XCTAssertEqual(try exif(keep)["ImageWidth"] as? Int, 640, "--overwrite did not replace it with the photo")
    }

    /// Deferred work survives a crash: the proxy is on disk at once, the process is killed before the
    /// final is made, and the next run in the same folder finishes it.
    func testDeferredWorkLeftByAKilledProcessIsFinishedByTheNextRun() throws {
        let folder = try temporaryFolder()
        let photo = folder.appendingPathComponent("deferred.jpg")
        let program = try launch("gcapture", ["photo", "--quality", "quality", "--deferred", "--deferred-delay", "60",
                                               "--noise", "10", "--preset", "vga640x480", "--output", photo.path, "--json"])
        // Wait for the proxy event, then kill -9 while the final is still deferred (60 s away).
        XCTAssertTrue(program.waitForEvent("proxy"), "no proxy event before the kill: \(program.errorOutput)")
        program.signal(SIGKILL)
        XCTAssertTrue(program.waitForExit(timeout: 10), "SIGKILL did not end it")
        XCTAssertEqual(program.process.terminationReason, .uncaughtSignal)
        XCTAssertEqual(try exif(photo)["ImageDescription"] as? String, "gcapture deferred proxy")
        let pending = try runProduct("gcapture", ["photo", "--preset", "vga640x480", "--deferred-delay", "0",
                                                  "--output", folder.appendingPathComponent("next.jpg").path, "--json"])
        XCTAssertEqual(pending.status, 0, pending.stderr)
        let finals = jsonLines(pending.stdout).filter { $0["event"] as? String == "final" }
        XCTAssertEqual(finals.first?["path"] as? String, photo.path)
        XCTAssertEqual(finals.first?["frames"] as? Int, 4)
        XCTAssertNil(try exif(photo)["ImageDescription"], "the proxy is still there")
        XCTAssertEqual(try exif(photo)["ImageWidth"] as? Int, 640)
    }

    /// Every photo's EXIF is valid as exiftool checks it: the tags a JPEG's EXIF requires (resolution,
    /// colour space, pixel dimensions, components), values at even offsets; and it still says what it said.
    func testEveryPhotoValidatesCleanWithExiftool() throws {
        let folder = try temporaryFolder()
        let kinds: [(name: String, arguments: [String])] = [
            ("plain.jpg", []), ("turned.jpg", ["--rotation", "90"]), ("tagged.jpg", ["--rotation", "90", "--exif-orientation"]),
            ("deferred.jpg", ["--quality", "quality", "--deferred"]),
        ]
        for (name, arguments) in kinds {
            let photo = folder.appendingPathComponent(name)
            let result = try runProduct("gcapture", ["photo", "--camera", "test", "--preset", "vga640x480", "--output", photo.path] + arguments)
            XCTAssertEqual(result.status, 0, result.stderr)
            let validation = try runTool("/usr/bin/exiftool", ["-validate", "-warning", "-a", photo.path])
            XCTAssertEqual(validation.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "Validate                        : OK",
                           "\(name): \(validation.stdout)")
            let tags = try exif(photo)
            XCTAssertEqual(tags["Make"] as? String, "gcapture", name)
            XCTAssertEqual(tags["Model"] as? String, "Test Camera", name)
            XCTAssertNotNil(tags["DateTimeOriginal"], name)
            let turned = arguments.contains("90") && !arguments.contains("--exif-orientation")
            XCTAssertEqual(tags["ExifImageWidth"] as? Int, turned ? 480 : 640, name)
            XCTAssertEqual(tags["ExifImageHeight"] as? Int, turned ? 640 : 480, name)
            XCTAssertEqual(tags["Orientation"] as? Int, arguments.contains("--exif-orientation") ? 6 : 1, name)
        }
    }
}
