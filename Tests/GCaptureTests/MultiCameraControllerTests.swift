import Foundation
@testable import GCapture
import GCaptureControl
import GCaptureDescription
import GCaptureSupport
import XCTest

/// The control commands on a set-up of two cameras (a black and a white test camera, each in its own session), as
/// `gcapture serve --camera A --camera B` and a description's `cameras` drive them: the picked camera takes the
/// photos and starts the recordings, a recording stays on its camera, and every event names its camera.
final class MultiCameraControllerTests: XCTestCase {
    private func capture(_ pattern: TestCameraOptions.Pattern, name: String, folder: URL) throws -> ControlledCapture {
        let camera = CaptureDevice.makeTestCamera(uniqueID: "controller-\(name)", options: .init(pattern: pattern, motion: 0))
        let session = CaptureSession(name: "controller-\(name)")
        let photos = CapturePhotoOutput(), movie = CaptureMovieFileOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: camera))
        try session.add(photos)
        try session.add(movie)
        session.sessionPreset = .vga640x480
        try session.commitAndWait()
        let settings = ControlledCaptureSettings(photoFolder: folder, movieFolder: folder,
                                                 photoNaming: try FileNamePattern(parsing: "\(name)-{counter}.jpg"),
                                                 movieNaming: try FileNamePattern(parsing: "\(name)-{counter}.mp4"))
        return ControlledCapture(session: session, photoOutput: photos, movieOutput: movie, settings: settings, camera: camera.description)
    }

    func testThePickedCameraTakesThePhotosAndARecordingStaysOnItsCamera() async throws {
        let folder = try temporaryFolder()
        let events = Locked<[ControlEvent]>([])
        let black = try capture(.black, name: "black", folder: folder), white = try capture(.white, name: "white", folder: folder)
        let controller = MultiCameraController(
            [("black", black, CaptureController.reapplyCurrentSettings), ("white", white, CaptureController.reapplyCurrentSettings)],
            events: ControlEvents { event in events.withLock { $0.append(event) } },
            onFatalError: { XCTFail("fatal: \($0)") })
        try await within(engineDeadline, "start") { try await controller.start() }

        func reply(_ command: ControlCommand) async throws -> ControlReply {
            try await controller.perform(command, trigger: "command").get()
        }
        func path(_ command: ControlCommand) async throws -> String {
            let fields = try await reply(command).fields
            return try XCTUnwrap(fields["path"] as? String, "\(command)")
        }
        let blackPhoto = try await path(.photo(path: nil))
        _ = try await reply(.switchCamera("white"))
        let whitePhoto = try await path(.photo(path: nil))
        XCTAssertEqual([blackPhoto, whitePhoto].map { URL(fileURLWithPath: $0).lastPathComponent }, ["black-0001.jpg", "white-0001.jpg"])
        XCTAssertLessThan(try XCTUnwrap(try frameLumas(URL(fileURLWithPath: blackPhoto)).first), 40, "the black camera's photo")
        XCTAssertGreaterThan(try XCTUnwrap(try frameLumas(URL(fileURLWithPath: whitePhoto)).first), 200, "the white camera's photo")

        // An unknown camera is refused with the names, and the pick stays.
        guard case .failure(let refusal) = await controller.perform(.switchCamera("door"), trigger: "command") else {
            return XCTFail("switch to an unknown camera was taken")
        }
        XCTAssertTrue(refusal.message.contains("black, white"), refusal.message)
        let status = await controller.status()
        XCTAssertEqual(status["cameraName"] as? String, "white")
        XCTAssertEqual((status["cameraSet"] as? [ControlFields])?.map { $0["selected"] as? Bool }, [false, true])

        // Both record at once: white first, then black once picked; `record stop` ends the picked camera's, then the other's.
        let whiteMovie = try await path(.recordStart(path: nil))
        _ = try await reply(.switchCamera("black"))
        let blackMovie = try await path(.recordStart(path: nil))
        try await Task.sleep(for: .seconds(1.5))
        let firstStop = try await path(.recordStop)
        let secondStop = try await path(.recordStop)
        XCTAssertEqual([firstStop, secondStop], [blackMovie, whiteMovie])
        // The copy into a plain MP4 fits the controller's 30 s wait for a stop (MovieOutputTests shows
        // what a copy past its limit leaves).
        XCTAssertEqual([black, white].map { $0.movieOutput?.defragmentTimeLimit }, [20, 20])
        guard case .failure(let idle) = await controller.perform(.recordStop, trigger: "command") else { return XCTFail("a third stop was taken") }
        XCTAssertEqual(idle.message, "not recording")
        try await within(engineDeadline, "shutDown") { await controller.shutDown() }

        for (movie, white) in [(blackMovie, false), (whiteMovie, true)] {
            let lumas = try frameLumas(URL(fileURLWithPath: movie))
            XCTAssertGreaterThan(lumas.count, 20, movie)
            XCTAssertEqual(lumas.filter { white ? $0 < 200 : $0 > 40 }, [], "\(movie) holds the other camera's pictures")
        }
        let seen = events.withLock { $0 }
        XCTAssertEqual(seen.filter { $0.name == "started" }.compactMap { $0.fields["cameraName"] as? String }.sorted(), ["black", "white"])
        XCTAssertEqual(seen.filter { $0.name == "recordingFinished" }.compactMap { $0.fields["cameraName"] as? String }, ["black", "white"])
        XCTAssertEqual(seen.filter { $0.name == "cameraSelected" }.compactMap { $0.fields["cameraName"] as? String }, ["white", "black"])
        XCTAssertTrue(seen.filter { $0.name == "started" }.allSatisfy { $0.text?.hasPrefix(($0.fields["cameraName"] as? String ?? "?") + ": ") ?? false },
                      "a camera's plain text begins with its name")
    }

    /// With one camera nothing is labelled and `switch` swaps the session's camera, as before several existed.
    func testOneCameraIsDrivenAsItsOwnController() async throws {
        let folder = try temporaryFolder()
        let events = Locked<[ControlEvent]>([])
        let controller = MultiCameraController([("camera", try capture(.black, name: "only", folder: folder), CaptureController.reapplyCurrentSettings)],
                                               events: ControlEvents { event in events.withLock { $0.append(event) } },
                                               onFatalError: { XCTFail("fatal: \($0)") })
        try await within(engineDeadline, "start") { try await controller.start() }
        // The built-in test camera: SMPTE bars, not black.
        _ = try await controller.perform(.switchCamera("test"), trigger: "command").get()
        let fields = try await controller.perform(.photo(path: nil), trigger: "command").get().fields
        let photo = try XCTUnwrap(fields["path"] as? String)
        try await within(engineDeadline, "shutDown") { await controller.shutDown() }
        XCTAssertGreaterThan(try XCTUnwrap(try frameLumas(URL(fileURLWithPath: photo)).first), 60, "the swapped-in camera's photo")
        let seen = events.withLock { $0 }
        XCTAssertTrue(seen.allSatisfy { $0.fields["cameraName"] == nil }, "\(seen.map(\.name))")
        XCTAssertEqual(seen.filter { $0.name == "cameraSwitched" }.count, 1)
        let status = await controller.status()
        XCTAssertNil(status["cameraSet"])
    }
}
