import ArgumentParser
import Foundation
import GCapture

struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List cameras and microphones, with their formats and whether this user may open them.")

    @OptionGroup var logging: LoggingOptions

    @Flag(help: "Print one JSON document (an array of devices) instead of a table.")
    var json = false

    @Option(help: "Only devices of this media type (video or audio).")
    var mediaType: MediaType?

    func run() async throws {
        let devices = CaptureDevice.allDevices.filter { mediaType == nil || $0.mediaType == mediaType }
        let discoveryError = CaptureDevice.discoveryError
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = try encoder.encode(devices.map(DeviceSummary.init))
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(DeviceTable.render(devices))
        }
        await CaptureRuntime.shutDownForLeakReport()
        // The list above holds only the built-in test devices then: a machine whose camera stack failed
        // must not read as one without cameras.
        if let discoveryError { throw CommandFailure("\(discoveryError)") }
    }
}

extension MediaType: ExpressibleByArgument {}

/// What `gcapture devices --json` prints for a device.
struct DeviceSummary: Encodable {
    var id: String
    var name: String
    var mediaType: MediaType
    var type: CaptureDevice.DeviceType
    var position: CaptureDevice.Position
    var node: String?
    var authorization: CaptureDevice.AuthorizationStatus
    var authorizationAdvice: String?
    var formats: [CaptureDevice.Format]

    init(_ device: CaptureDevice) {
        id = device.uniqueID
        name = device.localizedName
        mediaType = device.mediaType
        type = device.deviceType
        position = device.position
        node = device.nodePath
        authorization = device.authorizationStatus
        authorizationAdvice = device.authorizationAdvice
        formats = device.formats
    }
}

enum DeviceTable {
    static func render(_ devices: [CaptureDevice]) -> String {
        var lines: [String] = []
        for device in devices {
            var header = "\(device.localizedName)  [\(device.uniqueID)]  \(device.mediaType.rawValue), \(device.deviceType.rawValue)"
            if device.position != .unspecified { header += ", \(device.position.rawValue)" }
            if let node = device.nodePath, node != device.uniqueID { header += ", \(node)" }
            lines.append(header)
            if let advice = device.authorizationAdvice { lines.append("    access denied: \(advice)") }
            // One line per size: the pixel formats and the fastest rate each size reaches.
            var sizes: [(String, [String], Double)] = []
            for format in device.formats {
                if let index = sizes.firstIndex(where: { $0.0 == format.dimensionsDescription }) {
                    if !sizes[index].1.contains(format.pixelFormat) { sizes[index].1.append(format.pixelFormat) }
                    sizes[index].2 = max(sizes[index].2, format.maxFrameRate)
                } else {
                    sizes.append((format.dimensionsDescription, [format.pixelFormat], format.maxFrameRate))
                }
            }
            for (size, pixelFormats, rate) in sizes {
                let shown = pixelFormats.prefix(8).joined(separator: " ") + (pixelFormats.count > 8 ? " +\(pixelFormats.count - 8)" : "")
                lines.append("    \(size.padding(toLength: 11, withPad: " ", startingAt: 0)) up to \(formatRate(rate)) fps  \(shown)")
            }
        }
        return lines.joined(separator: "\n")
    }

    private static func formatRate(_ rate: Double) -> String {
        rate == rate.rounded() ? String(Int(rate)) : String(rate)
    }
}
