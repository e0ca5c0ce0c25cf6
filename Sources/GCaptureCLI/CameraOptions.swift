import ArgumentParser
import GCapture

/// The options of every command that opens a camera itself: which camera, the session preset, and the
/// test camera's noise. One declaration, so that their names, help and checks cannot drift apart; the
/// preset's default is the command's (`Defaults`), and --help shows it.
struct CameraOptions<Defaults: CameraDefaults>: ParsableArguments {
    @Option(help: DeviceChoice.cameraHelp)
    var camera: String?

    @Option(help: "Session preset.")
    var preset: CaptureSession.Preset = Defaults.preset

    @Option(parsing: .unconditional, help: "Sensor noise of the test camera in ± 8-bit steps, \(NumberRanges.noise.accepted) (default: 0).", transform: NumberRanges.noise.parser)
    var noise: Int = 0

    @Flag(name: .customLong("stamp-time"), help: DeviceChoice.stampTimeHelp)
    var stampTime = false

    /// The camera these options name, the test camera with their --noise and --stamp-time.
    func cameraChoice() throws -> DeviceChoice {
        try DeviceChoice.camera(camera, noise: noise, stampsTime: stampTime)
    }
}

/// A command's defaults for `CameraOptions`.
protocol CameraDefaults {
    static var preset: CaptureSession.Preset { get }
}

/// The highest the camera gives: what a photo, a recording and a preview want.
enum HighestQuality: CameraDefaults {
    static var preset: CaptureSession.Preset { .high }
}

/// 720p: what an encoder for a live stream keeps up with, and a viewer's bandwidth carries.
enum LiveStreaming: CameraDefaults {
    static var preset: CaptureSession.Preset { .hd1280x720 }
}
