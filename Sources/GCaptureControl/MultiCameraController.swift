import Foundation
import GCapture
import GCaptureSupport

/// Carries out the control commands on one camera or several, each a `ControlledCapture` of its own (its own
/// session: an unplugged camera interrupts only its outputs) driven by a `CaptureController`. With several, the
/// operator picks the camera the shutter and a new recording use (`switch NAME`); a recording goes on on its
/// camera whichever is picked later, and `record stop`, `pause` and `resume` go to the camera that records.
/// With one, every command goes to its controller as it is (`switch ID` swaps that session's camera).
public actor MultiCameraController {
    /// One camera of the set-up: the name the commands and events call it by, and its controller.
    public struct Camera: Sendable {
        public let name: String
        public let controller: CaptureController
        public var capture: ControlledCapture { controller.capture }
    }

    /// A photo requested of one camera (see `CaptureController.requestPhoto`).
    public struct PhotoTicket: Sendable {
        let camera: Int
        let ticket: CaptureController.PhotoTicket
    }

    /// In the order given; never empty.
    public nonisolated let cameras: [Camera]
    private nonisolated let events: ControlEvents
    /// The camera the shutter, a new recording, a trigger and the settings go to.
    private var selected = 0

    /// `setUps`: each camera's name, capture and reload hook. With several, each camera's events carry its
    /// name (`cameraName`) and their text begins with it; with one, the events are as `CaptureController`'s.
    public init(_ setUps: [(name: String, capture: ControlledCapture, onReload: CaptureController.ReloadHook)], events: ControlEvents,
                onFatalError: @escaping @Sendable (String) -> Void) {
        precondition(!setUps.isEmpty, "a controlled set-up has at least one camera")
        let several = setUps.count > 1
        var cameras: [Camera] = []
        for setUp in setUps {
            let name = setUp.name
            let cameraEvents = several ? events.labelled(cameraName: name) : events
            var fatal = onFatalError
            if several { fatal = { message in onFatalError("\(name): \(message)") } }
            let controller = CaptureController(capture: setUp.capture, events: cameraEvents, onReload: setUp.onReload, onFatalError: fatal)
            cameras.append(Camera(name: name, controller: controller))
        }
        self.cameras = cameras
        self.events = events
    }

    public nonisolated var isSeveral: Bool { cameras.count > 1 }

    // MARK: Running

    /// Starts every camera at once; when one cannot start, those started are stopped and its error thrown,
    /// named by its camera.
    public func start() async throws {
        let results = await withTaskGroup(of: (Int, CaptureError?).self) { group in
            for (index, camera) in cameras.enumerated() {
                group.addTask {
                    do throws(CaptureError) { try await camera.controller.start(); return (index, nil) } catch { return (index, error) }
                }
            }
            var results: [(Int, CaptureError?)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }
        }
        guard let (failed, failure) = results.first(where: { $0.1 != nil }), let error = failure else { return }
        await shutDown()
        if !isSeveral { throw error }
        throw ControlFailure("camera \(cameras[failed].name) (\(cameras[failed].capture.camera)) cannot start: \(error)")
    }

    /// Finishes every camera at once: recordings finalized, photos written, sessions stopped.
    public func shutDown() async {
        await withTaskGroup(of: Void.self) { group in
            for camera in cameras { group.addTask { await camera.controller.shutDown() } }
        }
    }

    /// SIGHUP: every camera re-reads its set-up.
    public func reload() async {
        for camera in cameras { await camera.controller.reload() }
    }

    // MARK: Commands

    public func perform(_ command: ControlCommand, trigger: String) async -> Result<ControlReply, ControlFailure> {
        guard isSeveral else { return await cameras[0].controller.perform(command, trigger: trigger) }
        switch command {
        case .switchCamera(let name):
            return select(name)
        case .recordStop, .pause, .resume:
            return await recordingCamera().controller.perform(command, trigger: trigger)
        case .photo:
            if let refusal = refusalForPickedCamera(without: \.photoOutput, "takes no photos") { return .failure(refusal) }
            return await cameras[selected].controller.perform(command, trigger: trigger)
        case .recordStart, .trigger:
            if let refusal = refusalForPickedCamera(without: \.movieOutput, "records no movies") { return .failure(refusal) }
            return await cameras[selected].controller.perform(command, trigger: trigger)
        case .rotate, .mirror, .help, .quit:
            return await cameras[selected].controller.perform(command, trigger: trigger)
        }
    }

    public func requestPhoto(path: String?, trigger: String) async throws(ControlFailure) -> PhotoTicket {
        if isSeveral, let refusal = refusalForPickedCamera(without: \.photoOutput, "takes no photos") { throw refusal }
        let camera = selected
        return PhotoTicket(camera: camera, ticket: try await cameras[camera].controller.requestPhoto(path: path, trigger: trigger))
    }

    public func takePhoto(_ ticket: PhotoTicket) async -> Result<ControlReply, ControlFailure> {
        await cameras[ticket.camera].controller.takePhoto(ticket.ticket)
    }

    /// Why the picked camera cannot do what was asked for want of an output, and which cameras can.
    private func refusalForPickedCamera(without output: KeyPath<ControlledCapture, (some CaptureOutput)?>, _ cannot: String) -> ControlFailure? {
        let picked = cameras[selected]
        guard picked.capture[keyPath: output] == nil else { return nil }
        let able = cameras.filter { $0.capture[keyPath: output] != nil }.map(\.name)
        return ControlFailure("the picked camera, \(picked.name), \(cannot) (it has no such output)"
                              + (able.isEmpty ? "" : ": `switch \(able[0])` picks one that does"))
    }

    /// The camera that records now (the picked one first), else the picked one, which then answers that
    /// nothing records.
    private func recordingCamera() async -> Camera {
        let picked = cameras[selected]
        if await picked.controller.isRecording { return picked }
        for camera in cameras where await camera.controller.isRecording { return camera }
        return picked
    }

    /// `switch NAME` with several cameras: the operator's pick, by name (or the camera's id or node).
    private func select(_ name: String) -> Result<ControlReply, ControlFailure> {
        let index = cameras.firstIndex { $0.name == name }
            ?? cameras.firstIndex { camera in
                let device = camera.controller.capture.cameraDevice
                return device?.uniqueID == name || device?.nodePath == name
            }
        guard let index else {
            return .failure(ControlFailure("no camera here is called \(name): the cameras are "
                                           + cameras.map(\.name).joined(separator: ", ")))
        }
        selected = index
        let camera = cameras[index]
        let fields: ControlFields = ["cameraName": camera.name, "camera": camera.capture.camera]
        events.emit("cameraSelected", fields, text: "the shutter and new recordings use \(camera.name) (\(camera.capture.camera))")
        return .success(ControlReply(fields: fields, text: "the shutter and new recordings use \(camera.name)"))
    }

    // MARK: Status

    /// The picked camera's status, and with several every camera's name, device, state and recording.
    public func status() async -> ControlFields {
        guard isSeveral else { return await cameras[0].controller.status() }
        var statuses: [ControlFields] = []
        for camera in cameras { statuses.append(await camera.controller.status()) }
        let picked = selected
        var fields = statuses[picked]
        fields["cameraName"] = cameras[picked].name
        fields["cameraSet"] = zip(cameras, statuses).enumerated().map { index, entry -> ControlFields in
            let (camera, status) = entry
            return ["name": camera.name, "camera": camera.capture.camera, "selected": index == picked,
                    "interruption": status["interruption"] ?? NSNull(), "recording": status["recording"] ?? NSNull(),
                    "running": status["running"] ?? false]
        }
        return fields
    }
}

extension ControlledCapture {
    /// The device the session's camera input uses now.
    public var cameraDevice: CaptureDevice? {
        session.inputs.compactMap { $0 as? CaptureDeviceInput }.first { $0.device.mediaType == .video }?.device
    }
}

extension ControlEvents {
    /// Events of one of several cameras: `cameraName` in their fields, the name before their text, then as
    /// this one's.
    func labelled(cameraName: String) -> ControlEvents {
        ControlEvents { [self] event in
            var fields = event.fields
            fields["cameraName"] = cameraName
            emit(event.name, fields, text: event.text.map { "\(cameraName): \($0)" })
        }
    }
}
