extension CaptureMultiCamSession {
    /// What the cameras' sessions hold for a configuration.
    struct Plan {
        var cameras: [CameraPlan] = []
        var composites: [CompositePlan] = []
    }

    /// One camera's session: the outputs the camera's video port feeds, the microphone they hear (if any
    /// connection gives them one) and the camera's preset. A camera only in composites has no outputs of its own.
    struct CameraPlan {
        let camera: CaptureDeviceInput
        var outputs: [CaptureOutput]
        var microphone: CaptureInput?
        var preset: CaptureSession.Preset
    }

    /// An output connected to several cameras' video ports: it gets their composite picture.
    struct CompositePlan {
        let output: CaptureOutput
        let cameras: [CaptureDeviceInput]
        let microphone: CaptureInput?
        let layout: CompositeLayout
    }
}

extension CaptureMultiCamSession.Configuration {
    /// Per connected camera, in the order the cameras were added, its session's part; per composite output its
    /// cameras. A camera's session has one microphone, so the camera's outputs that record sound all hear the one
    /// their connections name; an output with sound but no camera has no pipeline to be in. Outputs without a
    /// connection get nothing, as in AVFoundation.
    func plan() throws(CaptureError) -> CaptureMultiCamSession.Plan {
        var plan = CaptureMultiCamSession.Plan()
        func cameraPlan(_ camera: CaptureDeviceInput) -> Int {
            if let index = plan.cameras.firstIndex(where: { $0.camera == camera }) { return index }
            plan.cameras.append(.init(camera: camera, outputs: [], microphone: nil, preset: presets[ObjectIdentifier(camera)] ?? .high))
            return plan.cameras.count - 1
        }
        for output in outputs {
            let cameras = connection(of: output, carrying: .video)?.inputPorts.compactMap { $0.input as? CaptureDeviceInput } ?? []
            let microphone = connection(of: output, carrying: .audio)?.inputPorts.first?.input
            if cameras.count > 1 {
                for camera in cameras { _ = cameraPlan(camera) }
                plan.composites.append(.init(output: output, cameras: cameras, microphone: microphone,
                                             layout: layouts[ObjectIdentifier(output)] ?? .sideBySide))
                continue
            }
            guard let camera = cameras.first else {
                if microphone != nil {
                    throw .configurationFailed(reason: "\(output.displayName) is connected to a microphone but to no camera: "
                                               + "connect a camera's video port to it as well", underlying: nil)
                }
                continue
            }
            let index = cameraPlan(camera)
            if let microphone, let other = plan.cameras[index].microphone, other != microphone {
                throw .configurationFailed(reason: "the outputs of \(camera.device) are connected to two microphones "
                                           + "(\(other) and \(microphone)): one camera's outputs hear one microphone", underlying: nil)
            }
            plan.cameras[index].outputs.append(output)
            plan.cameras[index].microphone = plan.cameras[index].microphone ?? microphone
        }
        plan.cameras.sort { a, b in (inputs.firstIndex(of: a.camera) ?? .max) < (inputs.firstIndex(of: b.camera) ?? .max) }
        return plan
    }

    private func connection(of output: CaptureOutput, carrying mediaType: MediaType) -> CaptureConnection? {
        connections.first { $0.output == output && $0.inputPorts.first?.mediaType == mediaType }
    }
}
