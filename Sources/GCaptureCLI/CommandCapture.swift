import Foundation
import GCapture

/// The capture a command runs: one camera's session, or, for several cameras, a multi-camera session with one
/// output per camera; interruptions and system pressure reported as they happen (naming the camera when there are
/// several). Started before it is returned.
struct CommandCapture: Sendable {
    private enum Session: Sendable {
        case single(CaptureSession)
        case several(CaptureMultiCamSession)
    }
    private let session: Session
    private let reporters: [InterruptionReporter]
    private let pressure: Task<Void, Never>

    /// `outputs`: each output with its camera, or with the cameras of its composite picture arranged by `layout`.
    /// The microphone, when given, is heard by every output.
    static func start(name: String, _ outputs: [(cameras: [CaptureDevice], output: CaptureOutput)],
                      layout: CaptureMultiCamSession.CompositeLayout? = nil, microphone: CaptureDevice?,
                      preset: CaptureSession.Preset, json: Bool) async throws -> CommandCapture {
        let capture: CommandCapture
        if outputs.count == 1, let only = outputs.first, only.cameras.count == 1 {
            let session = CaptureSession(name: name)
            session.beginConfiguration()
            try session.add(CaptureDeviceInput(device: only.cameras[0]))
            if let microphone { try session.add(CaptureDeviceInput(device: microphone)) }
            try session.add(only.output)
            session.sessionPreset = preset
            try session.commitAndWait()
            capture = CommandCapture(session: .single(session), reporters: [InterruptionReporter(session, json: json)],
                                     pressure: PressureReport.follow(session, json: json))
        } else {
            let session = CaptureMultiCamSession(name: name)
            session.beginConfiguration()
            let heard = try microphone.map { microphone in
                let input = try CaptureDeviceInput(device: microphone)
                try session.addInputWithNoConnections(input)
                return input
            }
            var inputs: [CaptureDevice: CaptureDeviceInput] = [:]
            for (cameras, output) in outputs {
                let ports = try cameras.flatMap { camera in
                    if let input = inputs[camera] { return input.ports }
                    let input = try CaptureDeviceInput(device: camera)
                    try session.addInputWithNoConnections(input)
                    try session.setSessionPreset(preset, for: input)
                    inputs[camera] = input
                    return input.ports
                }
                try session.addOutputWithNoConnections(output)
                try session.addConnection(CaptureConnection(inputPorts: ports, output: output))
                if let heard { try session.addConnection(CaptureConnection(inputPorts: heard.ports, output: output)) }
                if let layout { try session.setCompositeLayout(layout, for: output) }
            }
            try await session.commit()
            capture = CommandCapture(session: .several(session), reporters: [InterruptionReporter(session, json: json)],
                                     pressure: PressureReport.follow(session, json: json))
        }
        switch capture.session {
        case .single(let session): try await session.start()
        case .several(let session): try await session.start()
        }
        return capture
    }

    /// Stops every camera, finalizing what records.
    func stop() async {
        switch session {
        case .single(let session): await session.stop()
        case .several(let session): await session.stop()
        }
        pressure.cancel()
        withExtendedLifetime(reporters) {}
    }
}
