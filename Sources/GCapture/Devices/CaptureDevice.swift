import Foundation
import GStreamerKit

/// A camera or microphone: found by the system's device providers (V4L2, PulseAudio, PipeWire) or one of
/// the built-in `test` devices, which behave like real ones and exist on every machine.
public final class CaptureDevice: @unchecked Sendable, Hashable, Identifiable, CustomStringConvertible {
    public enum Position: String, Sendable, Codable, CaseIterable {
        case unspecified, back, front
    }

    public enum DeviceType: String, Sendable, Codable, CaseIterable {
        /// A camera on a bus (USB, platform) found through V4L2 or another provider.
        case external
        /// A microphone found through the audio server.
        case microphone
        /// The built-in live test pattern camera (videotestsrc).
        case testCamera
        /// The built-in live test tone microphone (audiotestsrc).
        case testMicrophone
    }

    /// Stable across reboots and re-plugging where the system offers it (/dev/v4l/by-id, by-path), else
    /// the node path or the audio server's name. "test" and "test-microphone" for the built-in devices.
    public let uniqueID: String
    public let localizedName: String
    public let modelID: String
    public let manufacturer: String
    public let deviceType: DeviceType
    public let position: Position
    public let mediaType: MediaType
    /// The device node (/dev/video0) when there is one.
    public let nodePath: String?
    /// Video formats, in the device's own order. Empty for microphones.
    public let formats: [Format]

    let backend: Backend

    enum Backend: @unchecked Sendable {
        case v4l2(path: String)
        case testCamera(TestCameraOptions)
        case testMicrophone(TestMicrophoneOptions)
        /// Any other provider's device (PulseAudio, PipeWire): GStreamer makes its element.
        case provided(GStreamerKit.Device)
        /// An audio server source by name ("pulse:default", "pulse:alsa_input..."), usable without the
        /// device monitor (for a server that appeared after the monitor started).
        case pulse(source: String)
    }

    init(uniqueID: String, localizedName: String, modelID: String, manufacturer: String, deviceType: DeviceType,
         position: Position, mediaType: MediaType, nodePath: String?, formats: [Format], backend: Backend) {
        self.uniqueID = uniqueID
        self.localizedName = localizedName
        self.modelID = modelID
        self.manufacturer = manufacturer
        self.deviceType = deviceType
        self.position = position
        self.mediaType = mediaType
        self.nodePath = nodePath
        self.formats = formats
        self.backend = backend
    }

    public func hasMediaType(_ type: MediaType) -> Bool { mediaType == type }

    /// Whether the device is present now (test devices always are).
    public var isConnected: Bool { DeviceRegistry.shared.device(withUniqueID: uniqueID) != nil }

    public static func == (a: CaptureDevice, b: CaptureDevice) -> Bool { a.uniqueID == b.uniqueID }
    public func hash(into hasher: inout Hasher) { hasher.combine(uniqueID) }
    public var id: String { uniqueID }
    public var description: String { "\(localizedName) [\(uniqueID)]" }

    // MARK: Finding devices

    /// The device with this id, or nil. Node paths (/dev/video0) are accepted as ids too, and
    /// "pulse:NAME" names an audio server source directly ("pulse:default" for the server's default).
    public static func device(withUniqueID uniqueID: String) -> CaptureDevice? {
        if uniqueID.hasPrefix("pulse:"), GStreamer.hasElement("pulsesrc") {
            let name = String(uniqueID.dropFirst("pulse:".count))
            return CaptureDevice(uniqueID: uniqueID, localizedName: name == "default" ? "Default microphone" : name,
                                 modelID: "pulsesrc", manufacturer: "", deviceType: .microphone, position: .unspecified,
                                 mediaType: .audio, nodePath: nil, formats: [], backend: .pulse(source: name))
        }
        return DeviceRegistry.shared.device(withUniqueID: uniqueID)
    }

    /// The device with this id, or an error that lists the devices there are.
    public static func requireDevice(withUniqueID uniqueID: String) throws(CaptureError) -> CaptureDevice {
        if let device = device(withUniqueID: uniqueID) { return device }
        throw .unknownDevice(id: uniqueID, known: DeviceRegistry.shared.devices.map(\.uniqueID))
    }

    /// The system's default device for a media type: the first real one at the position asked for, else the
    /// built-in test device, so code written against a camera runs on machines that have none.
    public static func `default`(for mediaType: MediaType, position: Position = .unspecified) -> CaptureDevice? {
        let session = DiscoverySession(mediaType: mediaType, position: position)
        return session.devices.first { !$0.deviceType.isTest } ?? session.devices.first
    }

    /// Every device present now.
    public static var allDevices: [CaptureDevice] { DeviceRegistry.shared.devices }

    /// The built-in test camera with default options.
    public static var testCamera: CaptureDevice { DeviceRegistry.shared.testCamera }
    /// The built-in test microphone.
    public static var testMicrophone: CaptureDevice { DeviceRegistry.shared.testMicrophone }

    /// A test camera with other options (noise, pattern, motion, position, sizes); its id is `uniqueID`.
    public static func makeTestCamera(uniqueID: String = "test", options: TestCameraOptions) -> CaptureDevice {
        CaptureDevice(uniqueID: uniqueID, localizedName: "Test Camera", modelID: "videotestsrc",
                      manufacturer: "gcapture", deviceType: .testCamera, position: options.position,
                      mediaType: .video, nodePath: nil, formats: options.formats,
                      backend: .testCamera(options))
    }

    static func makeTestMicrophone(options: TestMicrophoneOptions = .init()) -> CaptureDevice {
        CaptureDevice(uniqueID: "test-microphone", localizedName: "Test Microphone", modelID: "audiotestsrc",
                      manufacturer: "gcapture", deviceType: .testMicrophone, position: .unspecified,
                      mediaType: .audio, nodePath: nil, formats: [], backend: .testMicrophone(options))
    }
}

extension CaptureDevice.DeviceType {
    public var isTest: Bool { self == .testCamera || self == .testMicrophone }
}

extension CaptureDevice {
    /// Finds devices by media type, type and position (AVCaptureDevice.DiscoverySession).
    public struct DiscoverySession: Sendable {
        public var deviceTypes: [DeviceType]
        public var mediaType: MediaType?
        public var position: Position

        public init(deviceTypes: [DeviceType] = DeviceType.allCases, mediaType: MediaType?,
                    position: Position = .unspecified) {
            self.deviceTypes = deviceTypes
            self.mediaType = mediaType
            self.position = position
        }

        /// Matching devices present now, real ones first.
        public var devices: [CaptureDevice] {
            DeviceRegistry.shared.devices.filter { device in
                deviceTypes.contains(device.deviceType)
                    && (mediaType == nil || device.mediaType == mediaType)
                    && (position == .unspecified || device.position == position)
            }
        }
    }
}
