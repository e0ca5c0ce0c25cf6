import Foundation
import GCaptureControl
import GCaptureWeb

/// The web page's commands and events: carried out by the same controller as stdin's, the events the same
/// as stdout's. What a browser may not ask for the page refuses before it gets here (WebCommands).
struct WebConsole: OperatorConsole {
    let controller: MultiCameraController
    let output: ControlOutput

    func perform(_ request: ControlRequest) async -> ControlResponse {
        ControlResponse(id: request.id, await controller.perform(request.command, trigger: "web"))
    }

    func events() -> AsyncStream<ControlEvent> { output.events.stream() }

    func status() async -> ControlFields { await controller.status() }
}
