import Foundation
import GStreamerKit

/// What a machine's owner says about its cameras where the system cannot tell: where a camera faces and how
/// it is mounted, per device, keyed by its stable id (`/dev/v4l/by-id/...`, `/dev/v4l/by-path/...`; a node
/// path or, for positions, the card's name work too). Read from the environment at each use, so a setting
/// made before the program starts needs no code; a program can also set mount angles itself.
enum DeviceSettings {
    /// `id=front|back|unspecified,...`
    static let positionsVariable = "GCAPTURE_CAMERA_POSITIONS"
    /// `id=0|90|180|270,...`: degrees clockwise that turn the camera's frames upright while the machine
    /// stands as it normally does (a camera mounted sideways in a kiosk: 90 or 270).
    static let mountAnglesVariable = "GCAPTURE_CAMERA_MOUNT_ANGLES"

    /// `KEY=VALUE,KEY=VALUE`; the value follows the last `=`, so a key may contain one.
    static func entries(_ list: String) -> [(key: String, value: String)] {
        list.split(separator: ",").compactMap { entry in
            guard let equals = entry.lastIndex(of: "=") else { return nil }
            let key = entry[..<equals].trimmingCharacters(in: .whitespaces)
            let value = entry[entry.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            return key.isEmpty ? nil : (key, value)
        }
    }

    /// The configured value for the first of `keys` that the list names.
    static func value(in variable: String, for keys: [String], environment: [String: String]) -> String? {
        guard let list = environment[variable] else { return nil }
        let found = entries(list)
        for key in keys {
            if let entry = found.first(where: { $0.key == key }) { return entry.value }
        }
        return nil
    }

    static func position(for keys: [String], environment: [String: String]) -> CaptureDevice.Position? {
        guard let value = self.value(in: positionsVariable, for: keys, environment: environment) else { return nil }
        guard let position = CaptureDevice.Position(rawValue: value) else {
            Log.devices.warning("\(positionsVariable): '\(value)' is not a position (front, back or unspecified); ignored")
            return nil
        }
        return position
    }

    // MARK: Mount angles

    private static let programmaticMountAngles = Locked<[String: Int]>([:])
    private static let mountListeners = Locked<[UUID: @Sendable () -> Void]>([:])

    /// The mount angle of a camera: set by the program, else from the environment, else 0.
    static func mountAngle(of device: CaptureDevice, environment: [String: String]) -> Int {
        let keys = [device.uniqueID] + (device.nodePath.map { [$0] } ?? [])
        if let angle = programmaticMountAngles.withLock({ angles in keys.compactMap { angles[$0] }.first }) {
            return angle
        }
        guard let value = self.value(in: mountAnglesVariable, for: keys, environment: environment) else { return 0 }
        guard let degrees = Int(value), CaptureConnection.supportedVideoRotationAngles.contains(Double(degrees)) else {
            Log.devices.warning("\(mountAnglesVariable): '\(value)' for \(device.uniqueID) is not 0, 90, 180 or 270; ignored")
            return 0
        }
        return degrees
    }

    static func setMountAngle(_ degrees: Int?, forUniqueID uniqueID: String) {
        programmaticMountAngles.withLock { $0[uniqueID] = degrees }
        for listener in mountListeners.withLock({ Array($0.values) }) { listener() }
    }

    /// Calls `listener` after each mount angle the program sets, until removed.
    static func addMountAngleListener(_ listener: @escaping @Sendable () -> Void) -> UUID {
        let key = UUID()
        mountListeners.withLock { $0[key] = listener }
        return key
    }

    static func removeMountAngleListener(_ key: UUID) {
        _ = mountListeners.withLock { $0.removeValue(forKey: key) }
    }
}

extension CaptureDevice {
    /// Degrees clockwise that turn this camera's frames upright while the machine stands as it normally does:
    /// 90 or 270 for a camera mounted sideways in a kiosk, 180 for one mounted upside down. Set per device by
    /// its stable id with `setMountAngle(_:forUniqueID:)` or `GCAPTURE_CAMERA_MOUNT_ANGLES="id=90,..."`;
    /// 0 when nothing says otherwise. A RotationCoordinator starts from it.
    public var mountAngle: Double {
        Double(DeviceSettings.mountAngle(of: self, environment: ProcessInfo.processInfo.environment))
    }

    /// Sets how the camera with this id is mounted (see `mountAngle`), for this process; nil goes back to the
    /// environment's setting. Running RotationCoordinators of that camera follow at once. An angle other than
    /// 0, 90, 180 or 270 is a programming error, as for a connection's videoRotationAngle.
    public static func setMountAngle(_ degrees: Double?, forUniqueID uniqueID: String) {
        if let degrees {
            precondition(CaptureConnection.supportedVideoRotationAngles.contains(degrees), "a mount angle must be 0, 90, 180 or 270")
        }
        DeviceSettings.setMountAngle(degrees.map { Int($0) }, forUniqueID: uniqueID)
    }
}
