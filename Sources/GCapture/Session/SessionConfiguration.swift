import Foundation

extension CaptureSession {
    /// What the app configured: its inputs, outputs and preset (committed, or staged between begin and commit).
    struct Configuration {
        var inputs: [CaptureInput] = []
        var outputs: [CaptureOutput] = []
        var preset: Preset = .high

        var videoDevice: CaptureDevice? { device(for: .video) }
        var audioDevice: CaptureDevice? { device(for: .audio) }
        func device(for mediaType: MediaType) -> CaptureDevice? {
            inputs.lazy.compactMap { $0 as? CaptureDeviceInput }.first { $0.device.mediaType == mediaType }?.device
        }

        /// Checks the configuration against the devices as they are now, without touching any graph.
        func resolve() throws(CaptureError) -> ResolvedConfiguration {
            var resolved = ResolvedConfiguration()
            for device in [videoDevice, audioDevice].compactMap({ $0 }) {
                if let node = device.nodePath, !FileManager.default.fileExists(atPath: node) {
                    throw .unknownDevice(id: device.uniqueID, known: DeviceRegistry.shared.devices.map(\.uniqueID))
                }
                if let advice = device.authorizationAdvice { throw .accessDenied(device: device.description, advice: advice) }
            }
            if let configured = videoDevice {
                // The first available camera is one present now; with none, its source waits for one.
                let device = configured.isFirstAvailableCamera ? SourceRecovery.findAgain(configured) ?? configured : configured
                let selection = try FormatSelector.select(preset, from: device.formats, deviceName: device.description)
                resolved.video = (device, selection)
                resolved.videoStallTimeout = CaptureDeviceInput.frameStallTimeout(of: configured, among: inputs)
            }
            resolved.audio = audioDevice
            return resolved
        }
    }

    struct ResolvedConfiguration {
        var video: (device: CaptureDevice, selection: FormatSelection)?
        /// The camera input's frame-stall timeout (nil: from the frame rate).
        var videoStallTimeout: Duration?
        var audio: CaptureDevice?
    }
}
