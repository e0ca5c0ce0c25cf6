import ArgumentParser
import Foundation
import GCapture
import GCaptureControl
import GCaptureWeb

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve an operator's web page: the live picture, the shutter, recording and a gallery.",
        discussion: """
        The page shows the camera live (WebRTC, else MJPEG; either encoded once however many browsers watch, \
        "NO SIGNAL" while the camera is interrupted), has buttons for a photo, a recording, pause and the camera, pushes the \
        events (photos, progress, interruptions) as they happen, and lists the photos and movies of the \
        output folder with small thumbnails and download links, newest first.

        With --camera given more than once, the page shows every camera live, and the operator picks the one the \
        shutter and a new recording use (`switch NAME`, NAME being video0 for /dev/video0); each camera runs in a \
        session of its own, so an unplugged one interrupts only its own outputs.

        The page's API: POST /api/command with a control-protocol request as JSON (see docs/control-protocol.md; \
        a path is not taken, files are named by the naming rule); GET /api/status, /api/gallery; \
        /api/events (Server-Sent Events); /live.mjpg; WHEP at POST /whep (an SDP offer; DELETE the Location it \
        answers with to leave).

        It listens on 127.0.0.1 unless --listen says otherwise. Any other address needs an access token: \
        given with --token, or made and printed at start; the page asks for it once (a cookie keeps it), \
        programs send `Authorization: Bearer TOKEN`. There the token crosses the network in clear unless \
        --tls-cert and --tls-key serve the page over HTTPS (TLS 1.2 or newer; the cookie is then Secure). \
        The commands of `gcapture run` work on stdin too, and \
        the signals as there: SIGUSR1 takes a photo, SIGUSR2 triggers an event, the first INT or TERM finalizes and stops.

        Examples:
          gcapture serve
          gcapture serve --listen 0.0.0.0:8080 --output /srv/booth
          gcapture serve --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem
          gcapture serve --camera /dev/video0 --camera /dev/video2
          curl -H 'Content-Type: application/json' -d '{"command":"photo"}' \\
               localhost:8080/api/command
        """)

    @OptionGroup var logging: LoggingOptions

    @Option(help: "ADDR:PORT to listen on; 0.0.0.0:PORT for every address (then a token is needed).")
    var listen = "127.0.0.1:8080"

    @Option(help: ArgumentHelp("Camera id (see `gcapture devices`); default: the first real camera, else `test`. Give it again for each "
        + "further camera: the page shows every camera live and the operator picks the one the shutter and a new recording use; "
        + "their files are named after the camera (photo-…-video1.jpg)."))
    var camera: [String] = []

    @Option(help: DeviceChoice.microphoneHelp(none: "for silent movies"))
    var microphone: String?

    @Option(help: "Folder for the photos and movies, which the gallery shows (created if missing).")
    var output = "captures"

    @Flag(name: .customLong("stamp-time"), help: DeviceChoice.stampTimeHelp)
    var stampTime = false

    @OptionGroup var web: WebOptions

    @OptionGroup var events: EventOptions

    @Flag(help: "Replies and events on stdout as JSON lines, for programs.")
    var json = false

    /// A mistake in --listen is told before anything is made: no camera opened, no --output folder left behind.
    func validate() throws {
        if case .failure(let error) = WebServerConfiguration.parseListenAddress(listen) {
            throw ValidationError("--listen \(error)")
        }
        if let twice = camera.first(where: { id in camera.filter { $0 == id }.count > 1 }) {
            throw ValidationError("--camera \(twice) is given twice: a camera streams to one pipeline at a time")
        }
    }

    func run() async throws {
        // Made here, so that an error names this command's option rather than run's --photo-folder.
        let folder = try RunCommand.folder(output, option: "--output").path
        let cameras = camera.isEmpty ? [nil] : camera.map(Optional.some)
        try await ControlledRun.run(json: json, web: ControlledRun.Web(options: web, listen: listen)) {
            let setUps = try cameras.map { id in
                var setup = try RunCommand.parse([])
                setup.device.camera = id
                setup.device.stampTime = stampTime
                setup.microphone = microphone
                setup.events = events
                setup.photoFolder = folder
                setup.movieFolder = folder
                return try setup.captureFromOptions()
            }
            guard setUps.count > 1 else { return ControlledRun.SetUp(capture: setUps[0]) }
            // Several cameras share the folder: each one's files carry its name, as `record` names them.
            return ControlledRun.SetUp(cameras: try setUps.enumerated().map { index, capture in
                let name = capture.cameraDevice.map(OutputPath.cameraLabel) ?? "camera\(index + 1)"
                var capture = capture
                capture.settings.photoNaming = try capture.settings.photoNaming.forCamera(name)
                capture.settings.movieNaming = try capture.settings.movieNaming.forCamera(name)
                return ControlledRun.SetUp.Camera(name: name, capture: capture)
            })
        }
    }
}
