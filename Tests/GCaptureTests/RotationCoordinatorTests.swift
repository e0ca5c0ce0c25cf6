import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// The RotationCoordinator fed by a camera's mount angle and by a stand-in iio-sensor-proxy on a private bus
/// that the test turns.
final class RotationCoordinatorTests: XCTestCase {
    private typealias Angles = CaptureDevice.RotationCoordinator.Angles

    private func camera(_ position: CaptureDevice.Position, id: String) -> CaptureDevice {
        .makeTestCamera(uniqueID: id, options: .init(position: position, sizes: [.init(width: 320, height: 240)], maxFrameRate: 30))
    }

    /// Waits (up to `timeout`) until the coordinator's angles are `expected`.
    private func waitForAngles(_ coordinator: CaptureDevice.RotationCoordinator, _ expected: Angles, after what: String,
                               timeout: TimeInterval = 5, file: StaticString = #filePath, line: UInt = #line) async {
        let deadline = Date().addingTimeInterval(timeout)
        var now = Angles(preview: -1, capture: -1)
        while Date() < deadline {
            now = Angles(preview: coordinator.videoRotationAngleForHorizonLevelPreview,
                         capture: coordinator.videoRotationAngleForHorizonLevelCapture)
            if now == expected { return }
            try? await Task.sleep(for: .milliseconds(5))
        }
        XCTFail("after \(what): \(now), expected \(expected) within \(timeout) s", file: file, line: line)
    }

    /// Everything an AsyncStream of angles gave, collected until cancelled.
    private final class Collected: @unchecked Sendable {
        let values = Locked<[Angles]>([])
        var task: Task<Void, Never>?
        init(_ stream: AsyncStream<Angles>) {
            task = Task { [values] in for await angles in stream { values.withLock { $0.append(angles) } } }
        }
    }

    func testABackCameraFollowsTheSensorTurningTheMachineAllFourWays() async throws {
        let bus = try SensorBus()
        // The coordinator starts before the service: it follows the service once it appears.
        let coordinator = CaptureDevice.RotationCoordinator(device: camera(.back, id: "rot-back"), previewLayer: CapturePreviewOutput(),
                                                            environment: ["GCAPTURE_SENSOR_BUS": bus.address])
        XCTAssertEqual(coordinator.videoRotationAngleForHorizonLevelCapture, 0)
        let collected = Collected(coordinator.angles())
        let captureSeen = Locked<[Double]>([]), previewSeen = Locked<[Double]>([])
        let captureObservation = coordinator.observe(\.videoRotationAngleForHorizonLevelCapture, options: [.new]) { _, change in
            captureSeen.withLock { $0.append(change.newValue ?? -1) }
        }
        let previewObservation = coordinator.observe(\.videoRotationAngleForHorizonLevelPreview, options: [.new]) { coordinator, _ in
            previewSeen.withLock { $0.append(coordinator.videoRotationAngleForHorizonLevelPreview) }
        }

        let service = try SensorService(bus: bus, orientation: "normal")
        try service.waitFor("the coordinator to claim the accelerometer") { $0.contains("ClaimAccelerometer") }
        let tracking = Date().addingTimeInterval(5)
        while !coordinator.isTrackingGravity, Date() < tracking { try await Task.sleep(for: .milliseconds(5)) }
        XCTAssertTrue(coordinator.isTrackingGravity)
        // The desktop turns the screen with the sensor (the default): the preview needs what the capture needs.
        for (orientation, angle) in [("left-up", 90.0), ("bottom-up", 180), ("right-up", 270), ("normal", 0)] {
            let started = Date()
            service.turn(to: orientation)
            await waitForAngles(coordinator, Angles(preview: angle, capture: angle), after: "turning to \(orientation)")
            print("turned to \(orientation): angles followed in \(Int(Date().timeIntervalSince(started) * 1000)) ms")
        }
        // Flat on a table: no edge is up, the last angle stands.
        service.turn(to: "left-up")
        await waitForAngles(coordinator, Angles(preview: 90, capture: 90), after: "turning to left-up")
        service.turn(to: "undefined")
        service.turn(to: "left-up")  // a marker: once it is seen, "undefined" was seen before it
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(coordinator.videoRotationAngleForHorizonLevelCapture, 90)

        // Callbacks and the stream saw every change, in order, and nothing else.
        let expected: [Double] = [90, 180, 270, 0, 90]
        let deadline = Date().addingTimeInterval(5)
        while captureSeen.withLock({ $0 }).count < expected.count || previewSeen.withLock({ $0 }).count < expected.count, Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual(captureSeen.withLock { $0 }, expected)
        XCTAssertEqual(previewSeen.withLock { $0 }, expected)
        XCTAssertEqual(collected.values.withLock { $0 }.map(\.capture), [0] + expected)

        // An ended observation hears nothing more; the coordinator releases its claim when it goes.
        captureObservation.invalidate()
        service.turn(to: "bottom-up")
        await waitForAngles(coordinator, Angles(preview: 180, capture: 180), after: "turning to bottom-up")
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(captureSeen.withLock { $0 }, expected)
        XCTAssertEqual(previewSeen.withLock { $0 }.last, 180)
        _ = previewObservation
        collected.task?.cancel()
    }

    func testAFrontCameraMountedSidewaysCombinesItsMountAngleWithTheSensor() async throws {
        let bus = try SensorBus()
        let service = try SensorService(bus: bus, orientation: "normal")
        // Mounted a quarter turn off, configured by its stable id; the screen's rotation is fixed (rotation lock).
        let preview = CapturePreviewOutput()
        let coordinator = CaptureDevice.RotationCoordinator(
            device: camera(.front, id: "/dev/v4l/by-id/usb-rot-front-video-index0"), previewLayer: preview,
            environment: ["GCAPTURE_SENSOR_BUS": bus.address, "GCAPTURE_DISPLAY_ROTATION": "normal",
                          "GCAPTURE_CAMERA_MOUNT_ANGLES": "/dev/v4l/by-id/other=180,/dev/v4l/by-id/usb-rot-front-video-index0=90"])
        await waitForAngles(coordinator, Angles(preview: 90, capture: 90), after: "the start")
        try service.waitFor("the coordinator to claim the accelerometer") { $0.contains("ClaimAccelerometer") }
        // A front camera looks the other way: a clockwise turn of the machine turns its picture clockwise too,
        // so the capture turns back the other way. Its preview is mirrored (automatically, after the turn), and
        // the screen turned with the machine: the preview needs no turn beyond the mount's.
        for (orientation, capture) in [("left-up", 0.0), ("bottom-up", 270), ("right-up", 180), ("normal", 90)] {
            service.turn(to: orientation)
            await waitForAngles(coordinator, Angles(preview: 90, capture: capture), after: "turning to \(orientation)")
        }
        // Not mirrored, the preview turns back by the screen's turn instead.
        preview.connection.automaticallyAdjustsVideoMirroring = false
        service.turn(to: "left-up")
        await waitForAngles(coordinator, Angles(preview: 270, capture: 0), after: "turning to left-up, preview not mirrored")
        preview.connection.automaticallyAdjustsVideoMirroring = true
        // The same with a screen that turns with the sensor: the preview needs what the capture needs.
        coordinator.displayRotation = .followsSensor
        service.turn(to: "left-up")
        await waitForAngles(coordinator, Angles(preview: 0, capture: 0), after: "turning to left-up, screen following")

        // The sensor goes away: the mount angle alone counts again.
        service.setHasAccelerometer(false)
        await waitForAngles(coordinator, Angles(preview: 90, capture: 90), after: "the accelerometer went away")
        XCTAssertFalse(coordinator.isTrackingGravity)
        service.setHasAccelerometer(true)
        await waitForAngles(coordinator, Angles(preview: 0, capture: 0), after: "the accelerometer came back (left-up)")
        // The service stops: the same.
        service.stop()
        await waitForAngles(coordinator, Angles(preview: 90, capture: 90), after: "the service stopped")
    }

    func testWithoutASensorServiceTheMountAngleStandsAndFollowsItsSetting() async throws {
        let bus = try SensorBus()
        let id = "/dev/v4l/by-path/platform-rot-kiosk-video-index0"
        for address in [bus.address, "unix:abstract=/gcapture/no-such-bus-\(UUID().uuidString)"] {
            let coordinator = CaptureDevice.RotationCoordinator(
                device: camera(.back, id: id), previewLayer: nil,
                environment: ["GCAPTURE_SENSOR_BUS": address, "GCAPTURE_CAMERA_MOUNT_ANGLES": "\(id)=270"])
            // Without a preview output its angle is 0.
            await waitForAngles(coordinator, Angles(preview: 0, capture: 270), after: "the start on \(address)")
            try await Task.sleep(for: .milliseconds(300))
            XCTAssertFalse(coordinator.isTrackingGravity)
            XCTAssertEqual(coordinator.videoRotationAngleForHorizonLevelCapture, 270)

            // The program sets the mount angle: the coordinator follows at once.
            let seen = Locked<[ (old: Double?, new: Double?) ]>([])
            let observation = coordinator.observe(\.videoRotationAngleForHorizonLevelCapture, options: [.initial, .old, .new]) { _, change in
                seen.withLock { $0.append((change.oldValue, change.newValue)) }
            }
            CaptureDevice.setMountAngle(90, forUniqueID: id)
            await waitForAngles(coordinator, Angles(preview: 0, capture: 90), after: "setMountAngle(90)")
            CaptureDevice.setMountAngle(nil, forUniqueID: id)
            await waitForAngles(coordinator, Angles(preview: 0, capture: 270), after: "setMountAngle(nil)")
            let deadline = Date().addingTimeInterval(5)
            while seen.withLock({ $0.count }) < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
            let changes = seen.withLock { $0 }
            XCTAssertEqual(changes.map(\.old), [nil, 270, 90])
            XCTAssertEqual(changes.map(\.new), [270, 90, 270])
            observation.invalidate()
        }
    }

    func testACameraOfUnspecifiedPositionDoesNotTurnWithTheMachine() async throws {
        let bus = try SensorBus()
        let service = try SensorService(bus: bus, orientation: "normal")
        var coordinator: CaptureDevice.RotationCoordinator! = CaptureDevice.RotationCoordinator(
            device: camera(.unspecified, id: "rot-stand"), previewLayer: CapturePreviewOutput(),
            environment: ["GCAPTURE_SENSOR_BUS": bus.address, "GCAPTURE_DISPLAY_ROTATION": "0"])
        try service.waitFor("the coordinator to claim the accelerometer") { $0.contains("ClaimAccelerometer") }
        let deadline = Date().addingTimeInterval(5)
        while !coordinator.isTrackingGravity, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        // A camera on a stand: what it captures stays as it is; the preview on the turned, rotation-locked screen
        // turns back by the machine's turn.
        service.turn(to: "right-up")
        await waitForAngles(coordinator, Angles(preview: 90, capture: 0), after: "turning to right-up")

        // A released coordinator gives its claim back, so the service can stop reading the sensor.
        coordinator = nil
        try service.waitFor("the released coordinator to release the accelerometer") { $0.contains("ReleaseAccelerometer") }
    }
}
