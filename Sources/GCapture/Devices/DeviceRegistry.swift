import Foundation
import GStreamerKit
import Synchronization

/// A device appearing or going away.
public enum DeviceConnectionEvent: Sendable {
    case connected(CaptureDevice)
    case disconnected(CaptureDevice)

    public var device: CaptureDevice {
        switch self { case .connected(let d), .disconnected(let d): d }
    }
}

extension CaptureDevice {
    /// Posted on NotificationCenter.default with the device as `object` (AVCaptureDeviceWasConnected).
    public static let wasConnectedNotification = Notification.Name("GCaptureDeviceWasConnected")
    public static let wasDisconnectedNotification = Notification.Name("GCaptureDeviceWasDisconnected")

    /// Hotplug events from now on, as a stream (the device monitor starts with the first caller).
    public static func connectionEvents() -> AsyncStream<DeviceConnectionEvent> {
        DeviceRegistry.shared.makeEventStream()
    }
}

/// Keeps the list of present devices, fed by one GStreamer device monitor for the whole process.
final class DeviceRegistry: Sendable {
    static let shared = DeviceRegistry()

    private struct State {
        var monitor: DeviceMonitor?
        var realDevices: [CaptureDevice] = []
        var discoveryError: CaptureError?
    }

    private let state = Locked(State())
    private let classes: [String]

    /// `classes`: the device monitor's filters (tests use one that no provider serves).
    init(classes: [String] = ["Video/Source", "Audio/Source"]) {
        self.classes = classes
    }

    /// Why the device monitor did not start, if it did not.
    var discoveryError: CaptureError? {
        startIfNeeded()
        return state.withLock { $0.discoveryError }
    }
    private let events = Broadcast<DeviceConnectionEvent>()
    let testCamera = CaptureDevice.makeTestCamera(options: TestCameraOptions())
    let testMicrophone = CaptureDevice.makeTestMicrophone()

    var devices: [CaptureDevice] {
        startIfNeeded()
        let found = state.withLock { $0.realDevices }
        let denied = DeviceFactory.inaccessibleCameras(excluding: Set(found.compactMap(\.nodePath)))
        return found + denied + [testCamera, testMicrophone]
    }

    func device(withUniqueID id: String) -> CaptureDevice? {
        let devices = devices
        if let named = devices.first(where: { $0.uniqueID == id || ($0.nodePath != nil && $0.nodePath == id) }) { return named }
        // A link of the owner's own to the node (a udev rule's SYMLINK+="kiosk-camera") names the camera
        // too: a kiosk's unit names its camera so, whichever /dev/videoN it got at boot.
        guard id.hasPrefix("/") else { return nil }
        let target = URL(fileURLWithPath: id).resolvingSymlinksInPath().path
        guard target != id else { return nil }
        return devices.first { $0.nodePath.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path } == target }
    }

    func makeEventStream() -> AsyncStream<DeviceConnectionEvent> {
        startIfNeeded()
        return events.makeStream()
    }

    private func startIfNeeded() {
        let monitor: DeviceMonitor? = state.withLock { state in
            guard state.monitor == nil else { return nil }
            let monitor = DeviceMonitor(classes: classes)
            state.monitor = monitor
            return monitor
        }
        guard let monitor else { return }
        monitor.bus.setHandler(for: [.devices, .error, .warning]) { [weak self] message in
            switch message.kind {
            case .deviceAdded(let device): self?.added(device)
            case .deviceRemoved(let device): self?.removed(device)
            case .error(let error): Log.devices.error("device monitor: \(error.message)", metadata: error.logMetadata)
            case .warning(let warning): Log.devices.warning("device monitor: \(warning.message)", metadata: warning.logMetadata)
            default: break
            }
        }
        do {
            try monitor.start()
        } catch {
            // No camera will be found: say so, rather than leave a program to think the machine has none.
            let failure = CaptureError.deviceDiscoveryFailed(
                classes: classes, underlying: error as? GStreamerError ?? GStreamerError(kind: .stateChange, message: "\(error)"))
            state.withLock { $0.discoveryError = failure }
            Log.devices.error("\(failure)")
            return
        }
        state.withLock { $0.discoveryError = nil }
        Log.devices.debug("device monitor started for \(classes.joined(separator: ", "))")
        for device in monitor.devices { added(device, announce: false) }
    }

    private func added(_ device: GStreamerKit.Device, announce: Bool = true) {
        guard let captureDevice = DeviceFactory.makeDevice(from: device) else { return }
        // The monitor re-announces devices it has already listed: only the first sighting counts.
        let isNew = state.withLock { state in
            guard !state.realDevices.contains(captureDevice) else { return false }
            state.realDevices.append(captureDevice)
            return true
        }
        guard announce, isNew else { return }
        NotificationCenter.default.post(name: CaptureDevice.wasConnectedNotification, object: captureDevice)
        events.yield(.connected(captureDevice))
    }

    private func removed(_ device: GStreamerKit.Device) {
        let identity = DeviceFactory.identity(of: device)
        let gone = state.withLock { state -> CaptureDevice? in
            guard let index = state.realDevices.firstIndex(where: { DeviceFactory.matches($0, identity) }) else { return nil }
            return state.realDevices.remove(at: index)
        }
        guard let captureDevice = gone else { return }
        NotificationCenter.default.post(name: CaptureDevice.wasDisconnectedNotification, object: captureDevice)
        events.yield(.disconnected(captureDevice))
    }
}

extension DeviceRegistry {
    /// Stops the device monitor and forgets the devices it found (the next query starts it again).
    func shutDown() {
        let monitor = state.withLock { state -> DeviceMonitor? in
            defer { state.monitor = nil; state.realDevices.removeAll(); state.discoveryError = nil }
            return state.monitor
        }
        monitor?.bus.removeHandler()
        monitor?.stop()
    }
}
