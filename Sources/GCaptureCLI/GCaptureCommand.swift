import ArgumentParser
import Foundation
import GCapture

@main
struct GCaptureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gcapture",
        abstract: "Capture from cameras and microphones on Linux: AVFoundation's model on GStreamer.",
        discussion: """
        Devices are named by id (see `gcapture devices`): a /dev/v4l/by-id or by-path link, a node such as \
        /dev/video0, or `test` for the built-in live test camera, which exists on every machine.

        Examples:
          gcapture devices                   cameras and microphones, their formats
          gcapture devices --json            the same as JSON, for programs
          gcapture frames --duration 2       2 s of frames from the default camera
          gcapture frames --camera /dev/video0 --preset vga640x480 --json
          gcapture photo --output shot.jpg   a photo, zero shutter lag, with EXIF
          gcapture record --output clip.mp4 --duration 10
                                             a movie with audio, crash-safe
          gcapture preview --duration 10     the live picture in a window

        Exit status: 0 when done, or stopped cleanly by a first signal (INT, TERM, HUP, QUIT); 1 on an \
        error; 64 for a mistake on the command line; 128 + N after a second signal N.

        Every subcommand takes --log-level (trace, debug, info, notice, warning, error, critical; default \
        warning): the engine's log and GStreamer's own, on stderr. GST_DEBUG, when set, keeps GStreamer's log \
        in GStreamer's hands.
        """,
        version: "gcapture \(CaptureRuntime.version) (GStreamer \(CaptureRuntime.gstreamerVersion))",
        subcommands: [DevicesCommand.self, FramesCommand.self, PhotoCommand.self, PreviewCommand.self, RecordCommand.self, StreamCommand.self,
                      RunCommand.self, ServeCommand.self, InspectCommand.self, LibraryCommand.self]
    )

    /// ArgumentParser's own main, but with the synopsis wrapped (see HelpWrapping) in what it prints.
    static func main() async {
        do {
            var command = try await asyncParseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ValidationError {
            // Thrown by a command's run (the parser wraps its own): the mistake alone, as the parser words one,
            // without the top-level usage of `gcapture`, which says nothing about it.
            FileHandle.standardError.write(Data("Error: \(error.message)\n".utf8))
            Foundation.exit(ExitCode.validationFailure.rawValue)
        } catch {
            let text = HelpWrapping.wrapUsage(fullMessage(for: error), width: HelpWrapping.columns - 1)
            let code = exitCode(for: error)
            // As the library does: help, the version and clean exits on stdout, errors on stderr.
            if !text.isEmpty {
                if code == .success { print(text) } else { FileHandle.standardError.write(Data((text + "\n").utf8)) }
            }
            Foundation.exit(code.rawValue)
        }
    }
}
