import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// Where devices come from, and when the built-in test devices stand in for real ones.
final class DeviceDiscoveryTests: XCTestCase {
    private let nonTestTypes = CaptureDevice.DeviceType.allCases.filter { !$0.isTest }

    private func realDevices(_ mediaType: MediaType) -> [CaptureDevice] {
        CaptureDevice.allDevices.filter { !$0.deviceType.isTest && $0.mediaType == mediaType }
    }

    /// The fallback is tested on a machine without a camera. CI's host has none (the V4L2 tests run in the
    /// VM, not this class), so there a camera fails rather than skips.
    private func requireNoCamera() throws {
        let cameras = realDevices(.video)
        guard cameras.isEmpty else {
            throw TestEnvironment.missing("a machine without a camera: this one has \(cameras.map(\.uniqueID)), so the fallback is not used")
        }
    }

    func testTheTestDevicesAreADefaultOnlyWhereTheEnvironmentAnnouncesThem() throws {
        try requireNoCamera()
        XCTAssertNil(CaptureDevice.defaultDevice(types: nonTestTypes, mediaType: .video, position: .unspecified, environment: [:]),
                     "without GCAPTURE_TEST_DEVICES=1 a camera-less machine has no default camera")
        XCTAssertNil(CaptureDevice.defaultDevice(types: nonTestTypes, mediaType: .video, position: .unspecified,
                                                 environment: ["GCAPTURE_TEST_DEVICES": "0"]))
        XCTAssertEqual(CaptureDevice.defaultDevice(types: nonTestTypes, mediaType: .video, position: .unspecified,
                                                   environment: ["GCAPTURE_TEST_DEVICES": "1"]), .testCamera)
        XCTAssertEqual(CaptureDevice.defaultDevice(types: [.builtInWideAngleCamera], mediaType: .video, position: .back,
                                                   environment: ["GCAPTURE_TEST_DEVICES": "1"]), .testCamera,
                       "AVFoundation-shaped code asking for the back wide-angle camera runs on the test camera in a demo")
        XCTAssertNil(CaptureDevice.defaultDevice(types: [.microphone], mediaType: .video, position: .unspecified,
                                                 environment: ["GCAPTURE_TEST_DEVICES": "1"]), "no microphone is a camera")
        if realDevices(.audio).isEmpty {
            XCTAssertNil(CaptureDevice.defaultDevice(types: nonTestTypes, mediaType: .audio, position: .unspecified, environment: [:]))
            XCTAssertEqual(CaptureDevice.defaultDevice(types: [.microphone], mediaType: .audio, position: .unspecified,
                                                       environment: ["GCAPTURE_TEST_DEVICES": "1"]), .testMicrophone)
        }
        // The public calls read the process's real environment.
        let announced = ProcessInfo.processInfo.environment["GCAPTURE_TEST_DEVICES"] == "1"
        XCTAssertEqual(CaptureDevice.default(for: .video), announced ? .testCamera : nil)
        XCTAssertEqual(CaptureDevice.default(.builtInWideAngleCamera, for: .video, position: .unspecified), announced ? .testCamera : nil)
    }

    /// The example program, as a user runs it on a machine without a camera: it says how to get the test
    /// camera, and with GCAPTURE_TEST_DEVICES=1 counts its frames.
    func testTheExampleRunsOnTheTestCameraOnlyWhenAnnounced() throws {
        try requireNoCamera()
        let refused = try runProduct("frame-counter", [], environment: ["GCAPTURE_TEST_DEVICES": "0"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("no camera found; run with GCAPTURE_TEST_DEVICES=1"), refused.stderr)
        let demo = try runProduct("frame-counter", [], environment: ["GCAPTURE_TEST_DEVICES": "1"])
        XCTAssertEqual(demo.status, 0, demo.stderr)
        XCTAssertTrue(demo.stdout.contains("frames from Test Camera"), demo.stdout)
    }

    func testTheTestDevicesAreAlwaysThereByName() {
        XCTAssertEqual(CaptureDevice.device(withUniqueID: "test"), .testCamera)
        XCTAssertEqual(CaptureDevice.device(withUniqueID: "test-microphone"), .testMicrophone)
        XCTAssertEqual(CaptureDevice.default(.testCamera, for: .video, position: .unspecified), .testCamera)
        XCTAssertEqual(CaptureDevice.default(.testMicrophone, for: nil, position: .unspecified), .testMicrophone)
        XCTAssertEqual(CaptureDevice.testCamera.deviceType.mediaType, .video)
        XCTAssertEqual(CaptureDevice.DeviceType.microphone.mediaType, .audio)
    }

    func testADeviceMonitorThatCannotStartIsReportedNotHidden() throws {
        // A filter no provider serves: GStreamer's monitor refuses to start, as it does on a machine
        // without any device provider plugin.
        let log = LogCapture.shared
        let registry = DeviceRegistry(classes: ["Gcapture/NoSuchClass"])
        defer { registry.shutDown() }
        let error = try XCTUnwrap(registry.discoveryError, "the monitor's start failure was dropped")
        guard case .deviceDiscoveryFailed(let classes, _) = error else { return XCTFail("\(error)") }
        XCTAssertEqual(classes, ["Gcapture/NoSuchClass"])
        XCTAssertTrue("\(error)".contains("device monitor did not start"), "\(error)")
        XCTAssertTrue(log.lines(label: "gcapture.devices").contains { $0.level == .error && $0.message == "\(error)" },
                      "the failure is logged as an error")
        XCTAssertEqual(registry.devices.filter { $0.deviceType.isTest }.count, 2, "the test devices are still listed")
        // The process's own discovery works on this machine.
        XCTAssertNil(CaptureDevice.discoveryError)
    }
}
