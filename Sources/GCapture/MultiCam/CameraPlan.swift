extension CaptureMultiCamSession {
    /// What one camera's session holds for a configuration: the outputs the camera's video port feeds, the
    /// microphone they hear (if any connection gives them one) and the camera's preset.
    struct CameraPlan {
        let camera: CaptureDeviceInput
        var outputs: [CaptureOutput]
        var microphone: CaptureInput?
        var preset: CaptureSession.Preset
    }
}

extension CaptureMultiCamSession.Configuration {
    /// Per connected camera, in the order the cameras were added, its session's part. A camera's session has one
    /// microphone, so the camera's outputs that record sound all hear the one their connections name; an output
    /// with sound but no camera has no pipeline to be in. Outputs without a connection get nothing, as in
    /// AVFoundation.
    func plan() throws(CaptureError) -> [CaptureMultiCamSession.CameraPlan] {
        var plans: [CaptureMultiCamSession.CameraPlan] = []
        for output in outputs {
            let video = connection(of: output, carrying: .video)
            let microphone = connection(of: output, carrying: .audio)?.inputPorts.first?.input
            guard let camera = video?.inputPorts.first?.input as? CaptureDeviceInput else {
                if microphone != nil {
                    throw .configurationFailed(reason: "\(output.displayName) is connected to a microphone but to no camera: "
                                               + "connect a camera's video port to it as well", underlying: nil)
                }
                continue
            }
            guard let index = plans.firstIndex(where: { $0.camera == camera }) else {
                plans.append(.init(camera: camera, outputs: [output], microphone: microphone,
                                   preset: presets[ObjectIdentifier(camera)] ?? .high))
                continue
            }
            if let microphone, let other = plans[index].microphone, other != microphone {
                throw .configurationFailed(reason: "the outputs of \(camera.device) are connected to two microphones "
                                           + "(\(other) and \(microphone)): one camera's outputs hear one microphone", underlying: nil)
            }
            plans[index].outputs.append(output)
            plans[index].microphone = plans[index].microphone ?? microphone
        }
        return plans.sorted { a, b in
            (inputs.firstIndex(of: a.camera) ?? .max) < (inputs.firstIndex(of: b.camera) ?? .max)
        }
    }

    private func connection(of output: CaptureOutput, carrying mediaType: MediaType) -> CaptureConnection? {
        connections.first { $0.output == output && $0.inputPorts.first?.mediaType == mediaType }
    }
}
