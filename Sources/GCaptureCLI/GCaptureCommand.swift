import ArgumentParser
import GCapture

@main
struct GCaptureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gcapture",
        abstract: "Capture from cameras and microphones on Linux: AVFoundation's model on GStreamer.",
        discussion: """
        Devices are named by id (see `gcapture devices`): a /dev/v4l/by-id or by-path link, a node such as
        /dev/video0, or `test` for the built-in live test camera, which exists on every machine.

        Examples:
          gcapture devices                      list cameras and microphones with their formats
          gcapture devices --json               the same as JSON, for programs
          gcapture frames --duration 2          capture 2 s of frames from the default camera, print stats
          gcapture frames --camera /dev/video0 --preset vga640x480 --json
          gcapture photo --output shot.jpg      a photo with zero shutter lag, EXIF included
          gcapture record --output clip.mp4 --duration 10    a movie with audio, crash-safe
          gcapture preview --duration 10        the live picture in a window (a viewfinder)

        Exit status: 0 when done, or stopped cleanly by a first signal (INT, TERM, HUP, QUIT); 1 on an \
        error; 64 for a mistake on the command line; 128 + N after a second signal N.

        Every subcommand takes --log-level (trace, debug, info, notice, warning, error, critical; default
        warning): the engine's log and GStreamer's own, on stderr. GST_DEBUG, when set, keeps GStreamer's log
        in GStreamer's hands.
        """,
        version: "gcapture \(CaptureRuntime.version) (GStreamer \(CaptureRuntime.gstreamerVersion))",
        subcommands: [DevicesCommand.self, FramesCommand.self, PhotoCommand.self, PreviewCommand.self, RecordCommand.self, StreamCommand.self,
                      RunCommand.self, InspectCommand.self]
    )
}
