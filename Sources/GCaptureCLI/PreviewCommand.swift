import ArgumentParser
import Foundation
import GCapture
import GCaptureSupport

struct PreviewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview",
        abstract: "Show the camera's live picture in a window (a viewfinder), until a signal or --duration.",
        discussion: """
        The sink: waylandsink where WAYLAND_DISPLAY is set, an X sink where DISPLAY is set (xvimagesink where \
        the server has Xv, else ximagesink, else glimagesink), kmssink on a console with no desktop, or the one \
        --sink names. A front camera's picture is mirrored, as in a mirror, unless --mirror says otherwise.


        """ + StopSignals.helpText)

    enum Mirror: String, ExpressibleByArgument, CaseIterable { case auto, on, off }

    static let durationRange = NumberRange(0.1...86400.0, "seconds")

    @OptionGroup var logging: LoggingOptions

    @OptionGroup var device: CameraOptions<HighestQuality>

    @Option(help: "Mirror the picture: auto (a front camera's only), on or off (default: auto).")
    var mirror: Mirror = .auto

    @Option(parsing: .unconditional, help: "Degrees clockwise to turn the picture: \(NumberRanges.rotation.accepted) (default: 0).",
            transform: NumberRanges.rotation.parser)
    var rotation: Int = 0

    @Flag(help: "Fill the screen (waylandsink, kmssink).")
    var fullscreen = false

    @Option(help: "Video sink to use instead of choosing one: a GStreamer sink name, or a gst-launch fragment ending in a sink.")
    var sink: String?

    @Option(parsing: .unconditional, help: "Seconds to show, \(durationRange.accepted) (default: until a signal).", transform: durationRange.parser)
    var duration: Double?

    @Flag(help: "Print one JSON object per line (started, finished).")
    var json = false

    func run() async throws {
        StopSignals.shared.install()
        let choice = try device.cameraChoice()
        let session = CaptureSession(name: "gcapture-preview")
        let preview = CapturePreviewOutput()
        preview.sinkName = sink
        preview.isFullscreen = fullscreen
        preview.connection.videoRotationAngle = Double(rotation)
        if mirror != .auto {
            preview.connection.automaticallyAdjustsVideoMirroring = false
            preview.connection.isVideoMirrored = mirror == .on
        }
        // The sink named is the user's to fix (a converter, a misspelt name): a usage error, before the camera opens.
        if let sink { try ValidationError.fromSettings { () throws(CaptureError) in try CapturePreviewOutput.checkSinkName(sink) } }
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: choice.device))
        try session.add(preview)
        session.sessionPreset = device.preset
        try session.commitAndWait()
        // A branch that fails later (the window closed, the display gone) ends the run with its reason.
        let failures = session.runtimeErrors()
        try await session.start()
        let mirrored = preview.connection.isVideoMirrored
        let sinkName = preview.sinkInUse ?? "?"
        if json {
            JSONLine.print(["event": "started", "camera": choice.device.description, "sink": sinkName,
                            "mirrored": mirrored, "rotation": rotation].merging(DeviceChoice.startedFields([choice])) { $1 })
        } else {
            Console.write("previewing \(choice.device.description) on \(sinkName)" + (mirrored ? ", mirrored" : "")
                          + (rotation != 0 ? ", turned \(rotation)°" : "") + (duration.map { " for \($0) s" } ?? ""))
        }
        let failed = Locked<CaptureSession.RuntimeError?>(nil)
        let watcher = Task {
            for await failure in failures where failure.output === preview || failure.isFatal {
                failed.withLock { $0 = failure }
                return
            }
        }
        // In short slices, so a failure ends the wait as a signal does.
        let end = Date().addingTimeInterval(duration ?? Self.durationRange.range.upperBound)
        while failed.withLock({ $0 }) == nil, Date() < end,
              await StopSignals.shared.sleep(seconds: min(0.1, max(0, end.timeIntervalSinceNow))) {}
        let failure = failed.withLock { $0 }
        await session.stop()
        watcher.cancel()
        let shown = preview.shownFrameCount
        let stopped = StopSignals.shared.receivedName
        if json {
            var finished: [String: Any] = ["event": "finished", "framesShown": shown]
            if let stopped { finished["stoppedBy"] = stopped }
            if let failure { finished["error"] = failure.description }
            JSONLine.print(finished)
        } else {
            Console.write("\(shown) frames shown" + (stopped.map { " (stopped by \($0))" } ?? ""))
        }
        await CaptureRuntime.shutDownForLeakReport()
        if let failure { throw CommandFailure("the preview stopped: \(failure.description)") }
    }
}
