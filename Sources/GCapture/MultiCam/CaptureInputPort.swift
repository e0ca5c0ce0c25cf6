extension CaptureInput {
    /// One stream an input gives (AVCaptureInput.Port): a camera's video, a microphone's audio. A
    /// multi-camera session connects outputs to ports (`CaptureConnection(inputPorts:output:)`).
    public struct Port: Hashable, Sendable, CustomStringConvertible {
        public let input: CaptureInput
        public let mediaType: MediaType

        /// The kind of camera the port's frames come from (nil for an input that is not a device's).
        public var sourceDeviceType: CaptureDevice.DeviceType? { device?.deviceType }
        /// Where that camera faces (.unspecified for an input that is not a device's).
        public var sourceDevicePosition: CaptureDevice.Position { device?.position ?? .unspecified }

        var device: CaptureDevice? { (input as? CaptureDeviceInput)?.device }

        public var description: String { "\(mediaType.rawValue) of \(device.map(\.description) ?? "\(input)")" }
    }

    /// The input's ports (AVCaptureInput.ports): a device input has one, of its device's medium.
    public var ports: [Port] { [Port(input: self, mediaType: mediaType)] }

    /// The ports of a medium from a kind and position of camera (AVCaptureDeviceInput.ports(for:sourceDeviceType:
    /// sourceDevicePosition:)); nil matches any medium or kind, .unspecified any position.
    public func ports(for mediaType: MediaType?, sourceDeviceType: CaptureDevice.DeviceType?,
                      sourceDevicePosition: CaptureDevice.Position) -> [Port] {
        ports.filter { port in
            (mediaType == nil || port.mediaType == mediaType)
                && (sourceDeviceType == nil || port.sourceDeviceType == sourceDeviceType)
                && (sourceDevicePosition == .unspecified || port.sourceDevicePosition == sourceDevicePosition)
        }
    }
}
