/// Something a session captures from (AVCaptureInput).
public class CaptureInput: @unchecked Sendable, Hashable {
    public static func == (a: CaptureInput, b: CaptureInput) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    var mediaType: MediaType { .video }
}

/// A camera or microphone as a session input.
public final class CaptureDeviceInput: CaptureInput, @unchecked Sendable, CustomStringConvertible {
    public let device: CaptureDevice

    /// Fails when the process may not open the device, saying how to get access.
    public init(device: CaptureDevice) throws(CaptureError) {
        if let advice = device.authorizationAdvice {
            throw .accessDenied(device: device.description, advice: advice)
        }
        self.device = device
    }

    /// The input for a device id (or node path), with an error that lists the devices when it is unknown.
    public convenience init(deviceWithUniqueID id: String) throws(CaptureError) {
        try self.init(device: CaptureDevice.requireDevice(withUniqueID: id))
    }

    override var mediaType: MediaType { device.mediaType }
    public var description: String { "input \(device)" }
}
