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
        return CaptureDevice(
            uniqueID: stableID(nodePath: nodePath, busInfo: properties["v4l2.device.bus_info"], fallback: device.displayName),
            localizedName: name,
            modelID: [properties["device.vendor.id"], properties["device.product.id"]].compactMap { $0 }.joined(separator: ":")
                .nonEmpty ?? (properties["v4l2.device.driver"] ?? name),
            manufacturer: properties["device.vendor.name"] ?? properties["v4l2.device.driver"] ?? "",
            deviceType: isBuiltIn(busInfo: properties["v4l2.device.bus_info"], name: name) ? .builtInWideAngleCamera : .external,
            position: position(for: nodePath, name: name),
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
            return CaptureDevice(uniqueID: stableID(nodePath: node, busInfo: nil, fallback: node), localizedName: card,
                                 modelID: card, manufacturer: "", deviceType: isBuiltIn(busInfo: nil, name: card) ? .builtInWideAngleCamera : .external,
                                 position: position(for: node, name: card), mediaType: .video, nodePath: node,
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

    /// Position from configuration (GCAPTURE_CAMERA_POSITIONS="/dev/video0=front,usb-X=back"), else the
    /// name ("Front Camera", "user-facing"), else unspecified.
    static func position(for nodePath: String?, name: String) -> CaptureDevice.Position {
        if let configured = ProcessInfo.processInfo.environment["GCAPTURE_CAMERA_POSITIONS"] {
            for entry in configured.split(separator: ",") {
                let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2, parts[0] == nodePath || parts[0] == name,
                   let position = CaptureDevice.Position(rawValue: parts[1]) { return position }
            }
        }
        let lower = name.lowercased()
        if lower.contains("front") || lower.contains("user-facing") { return .front }
        if lower.contains("back") || lower.contains("rear") || lower.contains("world-facing") { return .back }
        return .unspecified
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
