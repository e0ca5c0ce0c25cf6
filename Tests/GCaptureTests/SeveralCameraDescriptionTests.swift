import Foundation
import GCapture
@testable import GCaptureDescription
import XCTest

/// Description files listing several cameras (`cameras:`): each entry becomes a whole one-camera
/// description, whose mistakes are reported where they are written and named by the entry
/// (`cameras[1].outputs.photo.folder`); the cameras may not clash with each other.
final class SeveralCameraDescriptionTests: XCTestCase {
    static let pipelines = DescriptionFileTests.pipelines

    static let twoCameras = """
        version: 1
        microphone: default
        cameras:
          - name: room
            camera: {id: test, pattern: black}
            mirror: true
            outputs:
              movie: {folder: clips, name: "room-{counter}.mp4"}
          - name: door
            camera: {id: test, pattern: white}
            rotation: 90
            outputs:
              photo: {folder: shots, name: "door-{counter}.jpg"}

        """

    /// Where `needle` first starts in `yaml` (its `occurrence`th time), as the reader numbers lines and
    /// columns.
    private func position(of needle: String, in yaml: String, occurrence: Int = 1) -> SourcePosition {
        var found = 0
        for (index, line) in yaml.components(separatedBy: "\n").enumerated() {
            var rest = Substring(line)
            while let range = rest.range(of: needle) {
                found += 1
                if found == occurrence { return SourcePosition(line: index + 1, column: line.distance(from: line.startIndex, to: range.lowerBound) + 1) }
                rest = rest[range.upperBound...]
            }
        }
        XCTFail("'\(needle)' is not in the test's YAML \(occurrence) times")
        return .start
    }

    private func write(_ yaml: String, named name: String = "cameras.yaml") throws -> URL {
        let url = try temporaryFolder().appendingPathComponent(name)
        try yaml.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    private func readErrors(_ yaml: String, safe: Bool = false) -> [DescriptionDiagnostic] {
        DescriptionReader.readCameras(Data(yaml.utf8), file: "cameras.yaml", safe: safe).errors
    }

    /// The one error at `position` says `message` (the whole message when `exactly`).
    private func assertError(_ errors: [DescriptionDiagnostic], at position: SourcePosition, says message: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        let here = errors.filter { $0.position == position }
        XCTAssertTrue(here.contains { $0.message.contains(message) },
                      "no error at \(position) saying \"\(message)\"; found:\n" + errors.map(\.description).joined(separator: "\n"),
                      file: file, line: line)
    }

    // MARK: Reading

    func testTwoCamerasBecomeTwoCheckedDescriptionsWithTheirOwnCamerasOutputsAndPositions() throws {
        let url = try write(Self.twoCameras)
        let root = url.deletingLastPathComponent()
        let cameras = try CaptureDescription.loadCameras(contentsOf: url, file: "cameras.yaml", options: .init(fallsBackToTestDevices: true))
        XCTAssertEqual(cameras.map(\.description.cameraName), ["room", "door"])
        let (room, door) = (cameras[0], cameras[1])

        XCTAssertEqual(room.description.camera.choice, .test)
        XCTAssertEqual(room.description.camera.pattern, "black")
        XCTAssertEqual(door.description.camera.pattern, "white")
        XCTAssertEqual(room.camera.deviceType, .testCamera)
        XCTAssertEqual(room.description.rotation, 0)
        XCTAssertTrue(room.description.mirrored)
        XCTAssertEqual(door.description.rotation, 90)
        XCTAssertFalse(door.description.mirrored)
        XCTAssertEqual(room.description.microphone, .default)
        XCTAssertEqual(door.description.microphone, .default, "the microphone is shared")

        XCTAssertNotNil(room.description.outputs.movie)
        XCTAssertNil(room.description.outputs.photo)
        XCTAssertEqual(room.description.outputs.movie?.name.text, "room-{counter}.mp4")
        XCTAssertEqual(room.movieFolder?.path, root.appendingPathComponent("clips").path)
        XCTAssertNil(door.description.outputs.movie)
        XCTAssertEqual(door.description.outputs.photo?.name.text, "door-{counter}.jpg")
        XCTAssertEqual(door.photoFolder?.path, root.appendingPathComponent("shots").path)

        // Each camera's positions are in its own entry, keyed as a one-camera file's are.
        let yaml = Self.twoCameras
        XCTAssertEqual(room.description.position(of: "outputs.movie.folder"), position(of: "clips", in: yaml))
        XCTAssertEqual(door.description.position(of: "outputs.photo.folder"), position(of: "shots", in: yaml))
        XCTAssertEqual(door.description.position(of: "camera.pattern"), position(of: "white", in: yaml))
        XCTAssertEqual(door.description.position(of: "rotation"), position(of: "90", in: yaml))
        XCTAssertEqual(door.description.position(of: "microphone"), position(of: "default", in: yaml))
        XCTAssertEqual(room.description.keyPositions["outputs.photo"], nil, "the door's photo output is not the room's")
    }

    /// The sessions are built from the descriptions unchanged, and each camera's files go where its entry says.
    func testEachCameraIsADescribedSessionOfItsOwn() async throws {
        let url = try write(Self.twoCameras)
        let cameras = try CaptureDescription.loadCameras(contentsOf: url, options: .init(usesTestDevices: true))
        let sessions = try cameras.map { try DescribedSession($0) }
        XCTAssertNotNil(sessions[0].movieOutput)
        XCTAssertNil(sessions[0].photoFiles)
        let door = sessions[1]
        try await within(engineDeadline, "door.start()") { try await door.start() }
        let photo = try await door.takePhoto(within: engineDeadline)
        try await within(engineDeadline, "door.stop()") { await door.stop() }
        XCTAssertEqual(photo.fileURL?.deletingLastPathComponent().path, url.deletingLastPathComponent().appendingPathComponent("shots").path)
        XCTAssertEqual(photo.fileURL?.lastPathComponent, "door-0001.jpg")
    }

    func testAMistakeInTheSecondEntryIsReportedAtItsLineAndColumnNamedByItsEntry() throws {
        let yaml = Self.twoCameras.replacingOccurrences(of: "folder: shots", with: "folder: shots, quality: fast")
        let errors = readErrors(yaml)
        XCTAssertEqual(errors.count, 1, errors.map(\.description).joined(separator: "\n"))
        assertError(errors, at: position(of: "fast", in: yaml),
                    says: "cameras[1].outputs.photo.quality cannot be 'fast'; it is one of: speed, balanced, quality")

        // The machine check names the entry too: a folder that is a file.
        let url = try write(Self.twoCameras)
        try Data().write(to: url.deletingLastPathComponent().appendingPathComponent("shots"))
        XCTAssertThrowsError(try CaptureDescription.loadCameras(contentsOf: url, file: "cameras.yaml", options: .init(usesTestDevices: true))) { error in
            let diagnostics = (error as? DescriptionError)?.diagnostics ?? []
            XCTAssertEqual(diagnostics.map(\.description),
                           ["cameras.yaml:\(position(of: "shots", in: Self.twoCameras)): error: cameras[1].outputs.photo.folder 'shots' is a file, not a folder"])
        }
    }

    func testTheListItselfIsCheckedAtItsPosition() {
        let cases: [(yaml: String, at: String, says: String)] = [
            ("version: 1\ncameras: room\n", "room", "cameras is a list, not 'room': write each camera as '- name: ...'"),
            ("version: 1\ncameras: []\n", "[]", "cameras is empty: write each camera as '- name: ...'"),
            ("version: 1\ncameras:\n", "cameras", "cameras has no entries: write each camera as '- name: ...'"),
        ]
        for (yaml, at, says) in cases {
            assertError(readErrors(yaml), at: position(of: at, in: yaml), says: says)
        }
        let five = "version: 1\ncameras:\n" + (1...5).map { "  - name: c\($0)\n    camera: {id: /dev/video\($0)}\n    outputs: {frames: true}\n" }.joined()
        let errors = readErrors(five)
        XCTAssertEqual(errors.count, 1, errors.map(\.description).joined(separator: "\n"))
        assertError(errors, at: position(of: "name: c5", in: five), says: "cameras has 5 entries; gcapture runs at most 4 cameras at once: leave out 1")
    }

    func testPerCameraKeysAtTheTopAndSharedKeysInAnEntryAreSaidWhereTheyGo() {
        let yaml = "version: 1\ncamera: test\nrotation: 90\nmirror: true\noutputs: {frames: true}\ncameras:\n"
            + "  - name: a\n    camera: test\n    microphone: default\n    web: {}\n    outputs: {frames: true}\n"
        let errors = readErrors(yaml)
        for key in ["camera", "rotation", "mirror", "outputs"] {
            assertError(errors, at: position(of: "\(key):", in: yaml),
                        says: "\(key) goes in each camera's entry when the file lists `cameras:`: move it into the entries under cameras")
        }
        assertError(errors, at: position(of: "microphone:", in: yaml),
                    says: "microphone is shared by all the cameras: write it once at the top level, not in cameras[0]")
        assertError(errors, at: position(of: "web:", in: yaml), says: "web is shared by all the cameras")
        XCTAssertEqual(errors.count, 6, errors.map(\.description).joined(separator: "\n"))
    }

    func testAnEntryNeedsANameACameraAndOutputsAndOnlyItsKeys() {
        let yaml = """
            version: 1
            cameras:
              - camera: test
                outputs: {frames: true}
              - name: "front door"
                camera: {id: test, pattern: ball}
                outputs: {}
              - name: back
                camera: {id: test, pattern: snow}
                outptus: {frames: true}
              - name: side
                outputs: {frames: true}

            """
        let errors = readErrors(yaml)
        assertError(errors, at: position(of: "camera: test", in: yaml), says: "cameras[0] has no name: give each camera one (letters, digits, - and _)")
        assertError(errors, at: position(of: "\"front door\"", in: yaml),
                    says: "cameras[1].name must be 1 to 200 letters, digits, - and _ (it goes into events and file names), not 'front door'")
        assertError(errors, at: position(of: "{}", in: yaml),
                    says: "cameras[1].outputs has none of preview, photo, movie, frames or stream: the session would capture for nobody")
        assertError(errors, at: position(of: "outptus", in: yaml), says: "unknown key 'outptus' in cameras[2]; did you mean 'outputs'?")
        assertError(errors, at: position(of: "name: back", in: yaml), says: "cameras[2] has no outputs")
        assertError(errors, at: position(of: "name: side", in: yaml), says: "cameras[3] has no camera")
        XCTAssertEqual(errors.count, 6, errors.map(\.description).joined(separator: "\n"))
    }

    func testAMovieWithAudioNeedsTheSharedMicrophone() {
        let yaml = "version: 1\ncameras:\n  - name: a\n    camera: test\n    outputs: {frames: true}\n"
            + "  - name: b\n    camera: {id: test, pattern: ball}\n    outputs:\n      movie: {folder: b}\n"
        assertError(readErrors(yaml), at: position(of: "movie:", in: yaml),
                    says: "cameras[1].outputs.movie records audio (audio: true is the default) but there is no microphone: add `microphone: default`, or set audio: false")
        let none = "version: 1\nmicrophone: none\n" + yaml.dropFirst("version: 1\n".count)
        assertError(readErrors(none), at: position(of: "none", in: none),
                    says: "microphone is none, but cameras[1].outputs.movie records audio: name a microphone (or `default`), or set cameras[1].outputs.movie.audio: false")
    }

    /// A camera's warnings are its own entry's and the shared keys', not another entry's.
    func testEachCameraHasItsOwnWarnings() {
        let yaml = "version: 1\ncameras:\n  - name: a\n    camera: /dev/video5\n    outputs: {frames: true}\n"
            + "  - name: b\n    camera: {id: /dev/video6, position: front}\n    outputs: {frames: true}\n"
        let reading = DescriptionReader.readCameras(Data(yaml.utf8), file: "cameras.yaml")
        XCTAssertEqual(reading.errors, [])
        XCTAssertEqual(reading.warningsByCamera[0], [])
        XCTAssertEqual(reading.warningsByCamera[1].map(\.description), [
            "cameras.yaml:\(position(of: "position", in: yaml)): warning: cameras[1].camera.position chooses among cameras for `id: auto`; with an id it changes nothing",
        ])
    }

    // MARK: Clashes between the cameras

    func testTwoEntriesMayNotShareANameOrACamera() {
        let yaml = """
            version: 1
            cameras:
              - name: hall
                camera: /dev/video7
                outputs: {frames: true}
              - name: hall
                camera: {id: /dev/video7}
                outputs: {frames: true}
              - name: a1
                camera: auto
                outputs: {frames: true}
              - name: a2
                camera: {id: auto, position: back}
                outputs: {frames: true}

            """
        let errors = readErrors(yaml)
        assertError(errors, at: position(of: "hall", in: yaml, occurrence: 2),
                    says: "cameras[1].name 'hall' is also cameras[0]'s name: give each camera a name of its own")
        assertError(errors, at: position(of: "/dev/video7", in: yaml, occurrence: 2),
                    says: "cameras[1].camera.id '/dev/video7' is also cameras[0]'s camera, and a camera is opened by one entry only: name another (`gcapture devices`)")
        assertError(errors, at: position(of: "auto", in: yaml, occurrence: 2),
                    says: "cameras[3].camera is auto, as cameras[2].camera is: both would take the same first camera; name each camera by its id (`gcapture devices`)")
        XCTAssertEqual(errors.count, 3, errors.map(\.description).joined(separator: "\n"))

        let tests = "version: 1\ncameras:\n  - name: a\n    camera: test\n    outputs: {frames: true}\n"
            + "  - name: b\n    camera: {id: test}\n    outputs: {frames: true}\n  - name: c\n    camera: {id: test, pattern: ball}\n    outputs: {frames: true}\n"
        let testErrors = readErrors(tests)
        XCTAssertEqual(testErrors.count, 1, "test cameras of different patterns are different cameras: \(testErrors)")
        assertError(testErrors, at: position(of: "test", in: tests, occurrence: 2),
                    says: "cameras[1].camera is the same test camera as cameras[0].camera (the same pattern and noise): give it another pattern")
    }

    /// Two cameras naming files alike in one folder would take each other's numbers: said at the second's name.
    func testTwoCamerasMayNotNumberFilesAlikeInOneFolder() throws {
        let yaml = """
            version: 1
            cameras:
              - name: room
                camera: {id: test, pattern: black}
                outputs:
                  movie: {audio: false, folder: clips, name: "cam-{counter}.mp4"}
                  photo: {folder: clips}
              - name: door
                camera: {id: test, pattern: white}
                outputs:
                  timelapse: {folder: ./clips/, name: "cam-{counter:6}.mp4"}
                  photo: {folder: shots}
                  movie: {audio: false, folder: clips, name: "door-{counter}.mp4"}

            """
        let url = try write(yaml)
        XCTAssertThrowsError(try CaptureDescription.loadCameras(contentsOf: url, file: "cameras.yaml")) { error in
            let errors = (error as? DescriptionError)?.diagnostics ?? []
            let clips = url.deletingLastPathComponent().appendingPathComponent("clips").resolvingSymlinksInPath().path
            XCTAssertEqual(errors.map(\.description), [
                "cameras.yaml:\(position(of: "\"cam-{counter:6}.mp4\"", in: yaml)): error: cameras[1].outputs.timelapse names its files "
                    + "'cam-{counter:6}.mp4' in \(clips), as cameras[0].outputs.movie does: the two cameras would overwrite each other's numbering; "
                    + "give it a folder or a name of its own (with 'door' in it, say)",
            ])
        }
        // Different names in one folder, or one name in different folders, are fine.
        let apart = yaml.replacingOccurrences(of: "cam-{counter:6}", with: "door-{date}-{counter}")
        XCTAssertEqual(try CaptureDescription.loadCameras(contentsOf: try write(apart)).count, 2)
    }

    // MARK: --safe

    func testSafeRulesApplyToEveryEntry() {
        let yaml = """
            version: 1
            cameras:
              - name: a
                camera: test
                outputs:
                  movie: {audio: false}
              - name: b
                camera: {source: videotestsrc}
                outputs:
                  photo: {folder: ../outside}
                  movie: {audio: false, max-duration: 7200}
                  stream: {url: "rtmp://example.com/live/key"}

            """
        let reading = DescriptionReader.readCameras(Data(yaml.utf8), file: "cameras.yaml", safe: true)
        let errors = reading.errors
        assertError(errors, at: position(of: "source", in: yaml),
                    says: "cameras[1].camera.source is a custom GStreamer fragment, which --safe does not allow")
        assertError(errors, at: position(of: "../outside", in: yaml),
                    says: "cameras[1].outputs.photo.folder '../outside' leaves the root through '..', which --safe forbids")
        assertError(errors, at: position(of: "7200", in: yaml),
                    says: "cameras[1].outputs.movie.max-duration must be from 0.1 to 3600 seconds; 7200 is not")
        XCTAssertEqual(reading.descriptions.map { $0.outputs.movie?.maxSize }, [SafeLimits.defaultMaxSize, SafeLimits.defaultMaxSize],
                       "every camera's movie is bounded")
        XCTAssertEqual(readErrors(yaml, safe: false).count, 0, "without --safe these are the machine check's")

        // The value budget is the whole file's, all entries together.
        let many = "version: 1\ncameras:\n" + (0..<4).map { index in
            "  - name: c\(index)\n    camera: {id: test, noise: \(index)}\n    outputs:\n      motion:\n        zones: ["
                + Array(repeating: "[0, 0, 1, 1]", count: 120).joined(separator: ", ") + "]\n"
        }.joined()
        let budget = readErrors(many, safe: true)
        XCTAssertEqual(budget.count, 1)
        XCTAssertTrue(budget.first?.message.contains("more than 2000 values") ?? false, "\(budget)")
        XCTAssertEqual(readErrors(many, safe: false), [])
    }

    // MARK: One camera, and load

    func testAOneCameraFileGivesOneDescriptionAsLoadReadsIt() throws {
        let url = Self.pipelines.appendingPathComponent("photobooth.yaml")
        let root = try temporaryFolder()
        let options = DescriptionOptions(root: root, usesTestDevices: true)
        let cameras = try CaptureDescription.loadCameras(contentsOf: url, options: options)
        XCTAssertEqual(cameras.count, 1)
        XCTAssertNil(cameras[0].description.cameraName)
        XCTAssertEqual(cameras[0].description, try CaptureDescription.load(contentsOf: url, options: options).description)
    }

    func testLoadRefusesAFileListingCamerasAtCameras() throws {
        let url = try write(Self.twoCameras)
        XCTAssertThrowsError(try CaptureDescription.load(contentsOf: url, file: "cameras.yaml", options: .init(usesTestDevices: true))) { error in
            let errors = (error as? DescriptionError)?.diagnostics ?? []
            XCTAssertEqual(errors.map(\.description), [
                "cameras.yaml:\(position(of: "cameras:", in: Self.twoCameras)): error: this file lists its cameras under `cameras:`, "
                    + "and this program takes one camera (CaptureDescription.load): read it with CaptureDescription.loadCameras, or run it with `gcapture run`",
            ])
        }
    }

    // MARK: The example and inspect

    func testTheExampleIsValidUnderSafeToo() throws {
        let example = Self.pipelines.appendingPathComponent("two-cameras.yaml")
        let root = try temporaryFolder()
        let cameras = try CaptureDescription.loadCameras(contentsOf: example, options: .init(safe: true, root: root, usesTestDevices: true))
        XCTAssertEqual(cameras.map(\.description.cameraName), ["room", "door"])
        XCTAssertEqual(cameras.map { $0.description.camera.pattern }, ["black", "white"])
        XCTAssertEqual(cameras[0].movieFolder?.path, root.appendingPathComponent("two-cameras").path)
        XCTAssertEqual(cameras[1].photoFolder?.path, root.appendingPathComponent("two-cameras").path)
        XCTAssertEqual(cameras.flatMap(\.warnings), [])
    }

    func testInspectShowsEachCameraNameFirstAndDrawsEachGraph() throws {
        let example = Self.pipelines.appendingPathComponent("two-cameras.yaml").path
        let folder = try temporaryFolder()
        let result = try runProduct("gcapture", ["inspect", example, "--dot", folder.appendingPathComponent("two.dot").path])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stderr.contains(": error: ") || result.stderr.contains(": warning: "), result.stderr)
        let lines = result.stdout.components(separatedBy: "\n")
        XCTAssertEqual(lines.first, "\(example): valid (version 1), 2 cameras")
        let room = try XCTUnwrap(lines.firstIndex(of: "name: room"), result.stdout)
        let door = try XCTUnwrap(lines.firstIndex(of: "name: door"), result.stdout)
        XCTAssertLessThan(room, door)
        XCTAssertTrue(lines[room + 1].hasPrefix("camera: Test Camera"), lines[room + 1])
        XCTAssertTrue(lines[room..<door].contains { $0.hasPrefix("movie: ") && $0.contains("room-{date}-{counter}.mp4") }, result.stdout)
        XCTAssertTrue(lines[room..<door].contains { $0.contains("videotestsrc pattern=black") }, result.stdout)
        XCTAssertTrue(lines[door...].contains { $0.hasPrefix("photo: ") && $0.contains("door-{date}-{counter}.jpg") }, result.stdout)
        XCTAssertTrue(lines[door...].contains("photos, movies and frames: turned 180° clockwise"), result.stdout)
        XCTAssertTrue(lines[door...].contains { $0.contains("videotestsrc pattern=white") }, result.stdout)
        XCTAssertEqual(lines.filter { $0 == "graph (gst-launch syntax):" }.count, 2)
        for camera in ["room", "door"] {
            XCTAssertTrue(try String(contentsOf: folder.appendingPathComponent("two-\(camera).dot"), encoding: .utf8).hasPrefix("digraph"))
        }

        let safe = try runProduct("gcapture", ["inspect", example, "--safe", "--root", folder.path])
        XCTAssertEqual(safe.status, 0, safe.stderr)
    }

    func testInspectReportsEachCamerasMistakesAtOnce() throws {
        let yaml = Self.twoCameras
            .replacingOccurrences(of: "pattern: black}", with: "pattern: blak}")
            .replacingOccurrences(of: "folder: shots", with: "folder: shots, quality: fast")
        let url = try write(yaml, named: "bad.yaml")
        let result = try runProduct("gcapture", ["inspect", "bad.yaml"], currentDirectory: url.deletingLastPathComponent())
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stdout, "")
        XCTAssertEqual(result.stderr, """
            bad.yaml:\(position(of: "blak", in: yaml)): error: cameras[0].camera.pattern cannot be 'blak'; did you mean 'black'? it is one of: smpte, ball, gradient, checkers-8, black, white, snow
            bad.yaml:\(position(of: "fast", in: yaml)): error: cameras[1].outputs.photo.quality cannot be 'fast'; it is one of: speed, balanced, quality

            """)
    }
}

/// Cameras of one file on a real camera (vivid, inside ../shared/testbed/v4l2-vm); skipped elsewhere.
final class SeveralCameraDescriptionV4L2Tests: XCTestCase {
    override func setUpWithError() throws { try requireVividCamera() }

    /// A node and the stable id of one device are one camera, though the reader cannot tell: said by the
    /// machine check, at the second.
    func testTwoIdsOfOneCameraAreOneCamera() throws {
        let vivid = try XCTUnwrap(CaptureDevice.allDevices.first { $0.nodePath == "/dev/video0" })
        try XCTSkipIf(vivid.uniqueID == "/dev/video0", "the camera has no id other than its node")
        let yaml = "version: 1\ncameras:\n  - name: a\n    camera: /dev/video0\n    outputs: {frames: true}\n"
            + "  - name: b\n    camera: {id: \(vivid.uniqueID)}\n    outputs: {frames: true}\n"
        let file = try temporaryFolder().appendingPathComponent("cameras.yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try CaptureDescription.loadCameras(contentsOf: file, file: "cameras.yaml")) { error in
            XCTAssertEqual((error as? DescriptionError)?.diagnostics.map(\.description), [
                "cameras.yaml:7:18: error: cameras[1].camera opens \(vivid.localizedName) ('\(vivid.uniqueID)'), as cameras[0].camera does: "
                    + "a camera is opened by one entry only; name another (`gcapture devices`)",
            ])
        }
    }
}
