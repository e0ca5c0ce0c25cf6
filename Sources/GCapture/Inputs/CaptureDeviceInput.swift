import GStreamerKit

/// Something a session captures from (AVCaptureInput).
public class CaptureInput: @unchecked Sendable, Hashable {
    // @unchecked Sendable: a non-final class can only be Sendable unchecked (AVCaptureInput is subclassed); it
    // stores nothing.
    public static func == (a: CaptureInput, b: CaptureInput) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    var mediaType: MediaType { .video }
}

/// A camera or microphone as a session input.
public final class CaptureDeviceInput: CaptureInput, @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: inherited from CaptureInput; its own state is a let of a Sendable device and `Locked`.
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

    /// How long the camera may deliver no frame before the session reports it stalled
    /// (`InterruptionReason.videoDeviceStalled`). nil (the default) means ten frame intervals of the
    /// format in use, at least one second (see README). Read when the session builds the camera's source:
    /// a change takes effect at the next start or configuration change of the camera.
    public var frameStallTimeout: Duration? {
        get { stallTimeout.withLock { $0 } }
        set { stallTimeout.withLock { $0 = newValue } }
    }
    private let stallTimeout = Locked<Duration?>(nil)

    override var mediaType: MediaType { device.mediaType }
    public var description: String { "input \(device)" }
}
