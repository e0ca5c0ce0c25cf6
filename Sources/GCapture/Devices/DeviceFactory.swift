import Foundation
import GStreamerKit

/// Builds CaptureDevices from what GStreamer's providers report, and decides what is not a camera.
enum DeviceFactory {
    struct Identity {
        var nodePath: String?
        var name: String
    }

    static func identity(of device: GStreamerKit.Device) -> Identity {
        let properties = device.properties
        return Identity(nodePath: properties["device.path"] ?? properties["api.v4l2.path"],
                        name: properties["device.name"] ?? properties["node.name"] ?? device.displayName)
    }

    static func matches(_ device: CaptureDevice, _ identity: Identity) -> Bool {
        if let path = identity.nodePath { return device.nodePath == path }
        if case .provided(let provided) = device.backend {
            return self.identity(of: provided).name == identity.name
        }
        return false
    }

    static func makeDevice(from device: GStreamerKit.Device) -> CaptureDevice? {
        let properties = device.properties
        let deviceClass = device.deviceClass
        if deviceClass.contains("Video/Source") {
            return makeCamera(device, properties)
        }
        if deviceClass.contains("Audio/Source") {
            return makeMicrophone(device, properties)
        }
        return nil
    }

    private static func makeCamera(_ device: GStreamerKit.Device, _ properties: [String: String]) -> CaptureDevice? {
        let capabilities = properties["device.capabilities"] ?? ":capture:"
        // Metadata nodes of UVC cameras and output-only nodes are not cameras.
        guard capabilities.contains(":capture:") else { return nil }
        let formats = device.caps.map(FormatReader.formats(from:)) ?? []
        guard !formats.isEmpty, !FormatReader.isGreyOnly(formats) else { return nil }
        let nodePath = properties["device.path"] ?? properties["api.v4l2.path"]
        let name = properties["v4l2.device.card"] ?? device.displayName
        let backend: CaptureDevice.Backend
        if properties["device.api"] == "v4l2", let nodePath {
            backend = .v4l2(path: nodePath)
        } else {
            backend = .provided(device)
        }
        let uniqueID = stableID(nodePath: nodePath, busInfo: properties["v4l2.device.bus_info"], fallback: device.displayName)
        return CaptureDevice(
            uniqueID: uniqueID,
            localizedName: name,
            modelID: [properties["device.vendor.id"], properties["device.product.id"]].compactMap { $0 }.joined(separator: ":")
                .nonEmpty ?? (properties["v4l2.device.driver"] ?? name),
            manufacturer: properties["device.vendor.name"] ?? properties["v4l2.device.driver"] ?? "",
            deviceType: isBuiltIn(busInfo: properties["v4l2.device.bus_info"], name: name) ? .builtInWideAngleCamera : .external,
            position: position(uniqueID: uniqueID, nodePath: nodePath, name: name,
                               environment: ProcessInfo.processInfo.environment),
            mediaType: .video, nodePath: nodePath, formats: formats, backend: backend)
    }

    private static func makeMicrophone(_ device: GStreamerKit.Device, _ properties: [String: String]) -> CaptureDevice? {
        // The audio server lists each output's monitor as a source too: those are not microphones.
        if properties["device.class"] == "monitor" { return nil }
        // The audio server's own name for the source ("alsa_input..."), as its element is told.
        let serverName = (try? device.makeElement())?.property("device").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        let name = serverName ?? properties["device.name"] ?? properties["node.name"] ?? device.displayName
        return CaptureDevice(uniqueID: "audio:" + name, localizedName: device.displayName,
                             modelID: properties["device.product.name"] ?? name,
                             manufacturer: properties["device.vendor.name"] ?? "",
                             deviceType: .microphone, position: .unspecified, mediaType: .audio,
                             nodePath: nil, formats: [], backend: .provided(device))
    }

    /// Cameras this user may not open. GStreamer's provider opens a node to describe it, so it never reports
    /// these; listing them (from sysfs) is what lets a user learn that a camera exists and which group to join.
    /// Only a device's first node (index 0) is taken: the others are metadata nodes.
    static func inaccessibleCameras(excluding known: Set<String>) -> [CaptureDevice] {
        let sysfs = "/sys/class/video4linux"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: sysfs) else { return [] }
        return names.filter { $0.hasPrefix("video") }.sorted().compactMap { name -> CaptureDevice? in
            let node = "/dev/" + name
            guard !known.contains(node), access(node, R_OK | W_OK) != 0, FileManager.default.fileExists(atPath: node),
                  let index = try? String(contentsOfFile: "\(sysfs)/\(name)/index", encoding: .utf8),
                  index.trimmingCharacters(in: .whitespacesAndNewlines) == "0" else { return nil }
            let card = (try? String(contentsOfFile: "\(sysfs)/\(name)/name", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? name
            let uniqueID = stableID(nodePath: node, busInfo: nil, fallback: node)
            return CaptureDevice(uniqueID: uniqueID, localizedName: card,
                                 modelID: card, manufacturer: "", deviceType: isBuiltIn(busInfo: nil, name: card) ? .builtInWideAngleCamera : .external,
                                 position: position(uniqueID: uniqueID, nodePath: node, name: card,
                                                    environment: ProcessInfo.processInfo.environment),
                                 mediaType: .video, nodePath: node,
                                 formats: [], backend: .v4l2(path: node))
        }
    }

    /// A camera that is part of the machine: a platform (SoC, CSI) device, or a laptop's lid camera, which
    /// sits on USB but names itself so.
    static func isBuiltIn(busInfo: String?, name: String) -> Bool {
        if busInfo?.hasPrefix("platform:") == true { return true }
        let lower = name.lowercased()
        return lower.contains("integrated") || lower.contains("built-in") || lower.contains("builtin")
    }

    /// /dev/v4l/by-id names survive re-plugging into another port; by-path survives a different camera in
    /// the same port; both are better ids than /dev/videoN, which changes with plug order.
    static func stableID(nodePath: String?, busInfo: String?, fallback: String) -> String {
        guard let nodePath else { return fallback }
        let target = URL(fileURLWithPath: nodePath).resolvingSymlinksInPath().path
        for folder in ["/dev/v4l/by-id", "/dev/v4l/by-path"] {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names.sorted() {
                let link = folder + "/" + name
                if URL(fileURLWithPath: link).resolvingSymlinksInPath().path == target { return link }
            }
        }
        return nodePath
    }

    /// Where a camera faces: as configured (GCAPTURE_CAMERA_POSITIONS="/dev/v4l/by-id/usb-X=front,..."
    /// by stable id, node path or name: the owner's word wins, a driver can describe a board wrongly), else
    /// as the driver reports it (V4L2's camera orientation control, from the firmware's description of a
    /// phone or tablet board; "external" says nothing of where it faces), else from the name ("Front
    /// Camera", "user-facing"), else unspecified.
    static func position(uniqueID: String, nodePath: String?, name: String, environment: [String: String]) -> CaptureDevice.Position {
        if let configured = DeviceSettings.position(for: [uniqueID] + (nodePath.map { [$0] } ?? []) + [name], environment: environment) {
            return configured
        }
        if let nodePath, let reported = V4L2Control.read(V4L2Control.cameraOrientation, of: nodePath),
           let position = position(v4l2CameraOrientation: reported) {
            return position
        }
        let lower = name.lowercased()
        if lower.contains("front") || lower.contains("user-facing") { return .front }
        if lower.contains("back") || lower.contains("rear") || lower.contains("world-facing") { return .back }
        return .unspecified
    }

    /// V4L2_CAMERA_ORIENTATION_FRONT (0) and _BACK (1); _EXTERNAL (2) and anything else say nothing.
    static func position(v4l2CameraOrientation value: Int32) -> CaptureDevice.Position? {
        switch value {
        case 0: .front
        case 1: .back
        default: nil
        }
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
