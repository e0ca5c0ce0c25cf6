extension CaptureDevice {
    /// A camera input's device that stands for "the first camera there is" (AVFoundation has no such thing;
    /// a kiosk whose camera is plugged in after boot needs it). A session with it takes a real camera
    /// present when it starts (one facing `position` if any, else any); with none, it starts interrupted
    /// (`videoDeviceUnplugged`, black frames in its outputs as for an unplugged camera) and takes the first
    /// camera udev announces, which ends the interruption. Likewise when the camera it took goes away: it
    /// comes back, or any other that appears first. Never the built-in test camera.
    public static func firstAvailableCamera(preferring position: Position = .unspecified) -> CaptureDevice {
        CaptureDevice(uniqueID: position == .unspecified ? "auto" : "auto-\(position.rawValue)",
                      localizedName: "First available camera", modelID: "", manufacturer: "",
                      deviceType: .external, position: position, mediaType: .video, nodePath: nil,
                      formats: waitingFormats, backend: .firstAvailableCamera(preferring: position))
    }

    /// Whether this is `firstAvailableCamera(preferring:)`, not a camera of its own.
    public var isFirstAvailableCamera: Bool {
        if case .firstAvailableCamera = backend { true } else { false }
    }

    /// A real camera present now: one facing `position` when there is one (any when unspecified), else
    /// any; nil when the machine has none. What `firstAvailableCamera` takes.
    public static func firstCameraPresent(preferring position: Position = .unspecified) -> CaptureDevice? {
        let cameras = DiscoverySession(deviceTypes: DeviceType.allCases.filter { !$0.isTest }, mediaType: .video).devices
        return cameras.first { position == .unspecified || $0.position == position } ?? cameras.first
    }

    /// The sizes a session's black frames take while it waits (the preset picks one, as it would of a
    /// camera): the standard ones at a frame rate every camera does, so that waiting costs little.
    private static let waitingFormats = TestCameraOptions(maxFrameRate: 30).formats
}
