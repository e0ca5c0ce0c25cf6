import ArgumentParser
import GCapture

/// The options of every command that opens a camera itself: which camera, the session preset, and the
/// test camera's noise. One declaration, so that their names, help and checks cannot drift apart; the
/// preset's default is the command's (`Defaults`), and --help shows it.
struct CameraOptions<Defaults: CameraDefaults>: ParsableArguments {
    @Option(help: DeviceChoice.cameraHelp)
    var camera: String?

    @OptionGroup var picture: PictureOptions<Defaults>

    var preset: CaptureSession.Preset { picture.preset }
    var noise: Int { picture.noise }
    var stampTime: Bool {
        get { picture.stampTime }
        set { picture.stampTime = newValue }
    }

    /// The camera these options name, the test camera with their --noise and --stamp-time.
    func cameraChoice() throws -> DeviceChoice {
        try DeviceChoice.camera(camera, noise: noise, stampsTime: stampTime)
    }
}

/// CameraOptions for a command that takes several cameras at once (`record`, `photo`): --camera repeated.
struct SeveralCameraOptions<Defaults: CameraDefaults>: ParsableArguments {
    @Option(help: DeviceChoice.severalCamerasHelp)
    var camera: [String] = []

    @OptionGroup var picture: PictureOptions<Defaults>

    var preset: CaptureSession.Preset { picture.preset }

    func validate() throws {
        if let twice = camera.first(where: { id in camera.filter { $0 == id }.count > 1 }) {
            throw ValidationError("--camera \(twice) is given twice: a camera streams to one pipeline at a time")
        }
    }

    /// Every camera these options name (the first real camera, else the test camera, when none is named).
    func cameraChoices() throws -> [DeviceChoice] {
        let named = camera.isEmpty ? [nil] : camera.map(Optional.some)
        return try named.map { try DeviceChoice.camera($0, noise: picture.noise, stampsTime: picture.stampTime) }
    }
}

/// What the camera options say of the picture: the preset, and the test camera's noise and time stamps.
struct PictureOptions<Defaults: CameraDefaults>: ParsableArguments {
    @Option(help: "Session preset.")
    var preset: CaptureSession.Preset = Defaults.preset

    @Option(parsing: .unconditional, help: "Sensor noise of the test camera in ± 8-bit steps, \(NumberRanges.noise.accepted) (default: 0).", transform: NumberRanges.noise.parser)
    var noise: Int = 0

    @Flag(name: .customLong("stamp-time"), help: DeviceChoice.stampTimeHelp)
    var stampTime = false
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
