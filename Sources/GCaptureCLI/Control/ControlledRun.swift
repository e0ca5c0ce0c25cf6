import Foundation
import GCapture
import GCaptureControl
import GCaptureSupport
import GCaptureWeb

/// A controlled capture run until told to stop: what `gcapture run` and `gcapture serve` share. Commands
/// come from stdin and signals, and from the web page when one is served.
enum ControlledRun {
    /// The web page to serve beside the run.
    struct Web {
        var options: WebOptions
        var listen: String
    }

    /// What a run drives: its cameras, each a capture and how SIGHUP reloads it, and the web page's
    /// certificate when a description names one (`web.tls-cert`/`web.tls-key`; --tls-cert/--tls-key take precedence).
    struct SetUp {
        /// One camera of the run: its name (for the commands, events and live views of a run of several), its
        /// capture and its reload.
        struct Camera {
            var name: String
            var capture: ControlledCapture
            var reload: CaptureController.ReloadHook = CaptureController.reapplyCurrentSettings
        }

        var cameras: [Camera]
        var webTLS: WebTLSIdentity?
        /// Waited for once the sessions have stopped, before the process ends: files the sessions' stop
        /// finalized and whose outputs settle them on their own queue (a description's timelapse).
        var settle: @Sendable () async -> Void = {}

        init(cameras: [Camera], webTLS: WebTLSIdentity? = nil, settle: @escaping @Sendable () async -> Void = {}) {
            (self.cameras, self.webTLS, self.settle) = (cameras, webTLS, settle)
        }

        /// A run of one camera.
        init(capture: ControlledCapture, reload: @escaping CaptureController.ReloadHook = CaptureController.reapplyCurrentSettings,
             webTLS: WebTLSIdentity? = nil, settle: @escaping @Sendable () async -> Void = {}) {
            self.init(cameras: [Camera(name: "camera", capture: capture, reload: reload)], webTLS: webTLS, settle: settle)
        }
    }

    static func run(json: Bool, web: Web?, makeCapture: () throws -> SetUp) async throws {
        // A file size limit of the process (ulimit -f) must end the recording with an error, not kill us.
        signal(SIGXFSZ, SIG_IGN)
        // Installed before anything else: a SIGUSR1 or SIGHUP arriving early must not kill the process.
        let loop = Locked<ControlLoop?>(nil)
        StopSignals.shared.install(actions: [
            SIGUSR1: { if let loop = loop.withLock({ $0 }) { Task { await loop.shutter() } } },
            SIGUSR2: { if let loop = loop.withLock({ $0 }) { Task { await loop.triggerEvent() } } },
            SIGHUP: { if let loop = loop.withLock({ $0 }) { Task { await loop.controller.reload() } } },
        ])
        let output = ControlOutput(json: json)
        output.hello()
        // Under systemd (Type=notify): readiness, status, the watchdog; nothing without NOTIFY_SOCKET.
        let service = ServiceNotifications()
        let controlLoop: ControlLoop
        var server: OperatorWebServer?
        var settle: @Sendable () async -> Void = {}
        do {
            let setUp = try makeCapture()
            settle = setUp.settle
            let controller = MultiCameraController(setUp.cameras.map { ($0.name, $0.capture, $0.reload) }, events: output.events) { message in
                loop.withLock { $0 }?.fail(message)
            }
            controlLoop = ControlLoop(controller: controller, output: output) { service?.stopping() }
            // The page's port is taken before the camera opens (a port in use fails the run before anything is
            // captured), and announced once the capture runs.
            var listening: (url: String, port: Int)?
            if let web {
                let prepared = try prepareWeb(web, cameras: setUp.cameras, tls: setUp.webTLS, controller: controller, output: output)
                server = prepared
                listening = try await listen(prepared)
            }
            try await controller.start()
            if let server, let listening {
                let login = server.configuration.token.map { "\(listening.url)?token=\($0)" } ?? listening.url
                output.event("listening", ["url": listening.url, "port": listening.port, "token": server.configuration.token != nil],
                             text: "the web page is at \(login)")
            }
            let first = setUp.cameras[0].capture
            service?.ready(session: first.session, camera: setUp.cameras.map(\.capture.camera).joined(separator: ", "))
        } catch {
            await server?.stop()
            // A program reading the protocol hears why the run ended there too, not only a person on stderr.
            output.event("stopped", ["reason": "error", "error": "\(error)"], text: nil)
            throw error
        }
        loop.withLock { $0 = controlLoop }
        do {
            try await controlLoop.run()
        } catch {
            await server?.stop()
            await settle()
            throw error
        }
        await server?.stop()
        await settle()
    }

    /// The server and a live view per camera, whose outputs join the cameras' sessions before they start.
    private static func prepareWeb(_ web: Web, cameras: [SetUp.Camera], tls: WebTLSIdentity?, controller: MultiCameraController,
                                   output: ControlOutput) throws -> OperatorWebServer {
        // A description's folders are made with their first file; the gallery shows them from the start.
        let captures = cameras.map(\.capture)
        let timelapses = captures.compactMap(\.timelapse)
        var folders: [URL] = []
        for url in captures.flatMap({ [$0.settings.photoFolder, $0.settings.movieFolder] + [$0.timelapse?.files?.folder].compactMap { $0 } }) {
            let folder = try RunCommand.folder(url.path, option: "the gallery's folder")
            if !folders.contains(folder) { folders.append(folder) }
        }
        let (server, liveViews, madeToken) = try web.options.server(
            listen: web.listen, folders: folders, tls: tls,
            isTimelapse: { name, folder in timelapses.contains { $0.isTimelapse(name, in: folder) } },
            cameras: cameras.map(\.name), console: WebConsole(controller: controller, output: output))
        for (capture, liveView) in zip(captures, liveViews.map(\.view)) {
            capture.session.beginConfiguration()
            try capture.session.add(liveView.output)
            try capture.session.add(liveView.webRTC)
            try capture.session.commitAndWait()
            liveView.follow(capture.session)
        }
        if let madeToken {
            FileHandle.standardError.write(Data("gcapture: \(server.configuration.host) is reachable from other machines; the page's access token is \(madeToken)\n".utf8))
        }
        if server.configuration.requiresToken, server.configuration.tls == nil {
            // Once, at start, on stderr like the made token (the protocol has no warning event): off loopback,
            // plain HTTP lets anyone on the network read the token and the pictures.
            let message = "\(server.configuration.host) is reachable from other machines over plain HTTP: the access token "
                + "and the pictures cross the network unencrypted; serve HTTPS with --tls-cert FILE --tls-key FILE"
            FileHandle.standardError.write(Data("gcapture: warning: \(message)\n".utf8))
        }
        return server
    }

    /// Binds the server's port; the page's address and the port bound (the system's choice for port 0).
    private static func listen(_ server: OperatorWebServer) async throws -> (url: String, port: Int) {
        let port: Int
        do { port = try await server.start() } catch { throw CommandFailure(error.description) }
        let host = server.configuration.host
        let shown = host == "0.0.0.0" || host == "::" ? ProcessInfo.processInfo.hostName : host.contains(":") ? "[\(host)]" : host
        return ("\(server.configuration.scheme)://\(shown):\(port)/", port)
    }
}
