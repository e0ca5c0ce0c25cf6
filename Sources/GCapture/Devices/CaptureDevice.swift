import Foundation
import GStreamerKit

/// A camera or microphone: found by the system's device providers (V4L2, PulseAudio, PipeWire) or one of
/// the built-in `test` devices, which behave like real ones and exist on every machine.
public final class CaptureDevice: Sendable, Hashable, Identifiable, CustomStringConvertible {
    public enum Position: String, Sendable, Codable, CaseIterable {
        case unspecified, back, front
    }

    /// AVCaptureDevice.DeviceType's names for what Linux has: a camera built into the machine (a laptop's
    /// lid camera, a board's CSI/platform camera) is `.builtInWideAngleCamera`, a USB or other pluggable one
    /// `.external`, every audio source `.microphone`. Linux cannot tell ultra-wide or telephoto lenses apart,
    /// so those types find nothing here.
    public enum DeviceType: String, Sendable, Codable, CaseIterable {
        /// A camera that is part of the machine: on a platform bus, or named "Integrated"/"Built-in".
        case builtInWideAngleCamera
        case builtInUltraWideCamera
        case builtInTelephotoCamera
        /// A camera on a bus (USB...) found through V4L2 or another provider.
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

    enum Backend: Sendable {
        case v4l2(path: String)
        case testCamera(TestCameraOptions)
        case testMicrophone(TestMicrophoneOptions)
        /// Any other provider's device (PulseAudio, PipeWire): GStreamer makes its element.
        case provided(GStreamerKit.Device)
        /// An audio server source by name ("pulse:default", "pulse:alsa_input..."), usable without the
        /// device monitor (for a server that appeared after the monitor started).
        case pulse(source: String)
        /// No device: `firstAvailableCamera(preferring:)`, which a session replaces by a real camera.
        case firstAvailableCamera(preferring: Position)
        /// Several cameras as one picture: the camera of a multi-camera session's composite output.
        case composite(CompositeSource)
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

    /// The system's default device for a media type: the first real one at the position asked for, or nil.
    /// The built-in test device stands in only where that is announced: when no real device of the media type
    /// exists and the environment has GCAPTURE_TEST_DEVICES=1 (demos, CI). Otherwise a machine whose camera
    /// stack failed would quietly capture test bars; see `discoveryError` for why a list may be empty.
    public static func `default`(for mediaType: MediaType, position: Position = .unspecified) -> CaptureDevice? {
        defaultDevice(types: DeviceType.allCases.filter { !$0.isTest }, mediaType: mediaType, position: position,
                      environment: ProcessInfo.processInfo.environment)
    }

    /// The default device of a type (AVCaptureDevice.default(_:for:position:)): the first one present of
    /// `deviceType`, for `mediaType` (any when nil), at `position` (any when unspecified). The test device
    /// types always find their device; real types fall back to it as `default(for:)` does.
    public static func `default`(_ deviceType: DeviceType, for mediaType: MediaType?, position: Position) -> CaptureDevice? {
        defaultDevice(types: [deviceType], mediaType: mediaType, position: position,
                      environment: ProcessInfo.processInfo.environment)
    }

    static let testDevicesVariable = "GCAPTURE_TEST_DEVICES"

    static func defaultDevice(types: [DeviceType], mediaType: MediaType?, position: Position,
                              environment: [String: String]) -> CaptureDevice? {
        if let found = DiscoverySession(deviceTypes: types, mediaType: mediaType, position: position).devices.first {
            return found
        }
        guard environment[testDevicesVariable] == "1", let fallbackType = mediaType ?? types.first?.mediaType else { return nil }
        // Only where there is nothing real of the kind at all: a camera at another position is an answer.
        let real = DeviceRegistry.shared.devices.contains { !$0.deviceType.isTest && $0.mediaType == fallbackType }
        guard !real, types.contains(where: { $0.mediaType == fallbackType }) else { return nil }
        let device = fallbackType == .video ? testCamera : testMicrophone
        Log.devices.notice("no \(fallbackType == .video ? "camera" : "microphone") found; \(testDevicesVariable)=1: using \(device)")
        return device
    }

    /// Why the system's devices could not be listed (the device monitor did not start), or nil when
    /// discovery works. Only the built-in test devices are listed then.
    public static var discoveryError: CaptureError? { DeviceRegistry.shared.discoveryError }

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

    /// What devices of this type capture.
    public var mediaType: MediaType { self == .microphone || self == .testMicrophone ? .audio : .video }

    /// AVFoundation's former name for `.microphone`.
    @available(*, deprecated, renamed: "microphone")
    public static var builtInMicrophone: Self { .microphone }
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
