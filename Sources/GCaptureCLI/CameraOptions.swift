import ArgumentParser
import GCapture

/// The options of every command that opens a camera itself: which camera, the session preset, and the
/// test camera's noise. One declaration, so that their names, help and checks cannot drift apart; the
/// preset's default is the command's (`Defaults`), and --help shows it.
struct CameraOptions<Defaults: CameraDefaults>: ParsableArguments {
    @Option(help: Defaults.takesSeveralCameras ? DeviceChoice.severalCamerasHelp : DeviceChoice.cameraHelp)
    var camera: [String] = []

    @Option(help: "Session preset.")
    var preset: CaptureSession.Preset = Defaults.preset

    @Option(parsing: .unconditional, help: "Sensor noise of the test camera in ± 8-bit steps, \(NumberRanges.noise.accepted) (default: 0).", transform: NumberRanges.noise.parser)
    var noise: Int = 0

    @Flag(name: .customLong("stamp-time"), help: DeviceChoice.stampTimeHelp)
    var stampTime = false

    func validate() throws {
        if camera.count > 1, !Defaults.takesSeveralCameras {
            throw ValidationError("--camera is given \(camera.count) times, and this command uses one camera "
                                  + "(`gcapture record` and `gcapture photo` take several)")
        }
        if let twice = camera.first(where: { id in camera.filter { $0 == id }.count > 1 }) {
            throw ValidationError("--camera \(twice) is given twice: a camera streams to one pipeline at a time")
        }
    }

    /// The camera these options name, the test camera with their --noise and --stamp-time.
    func cameraChoice() throws -> DeviceChoice {
        try DeviceChoice.camera(camera.first, noise: noise, stampsTime: stampTime)
    }

    /// Every camera these options name (the one cameraChoice() gives when none is named).
    func cameraChoices() throws -> [DeviceChoice] {
        camera.count < 2 ? [try cameraChoice()] : try camera.map { try DeviceChoice.camera($0, noise: noise, stampsTime: stampTime) }
    }
}

/// A command's defaults for `CameraOptions`.
protocol CameraDefaults {
    static var preset: CaptureSession.Preset { get }
    /// Whether --camera may be given several times (each camera recorded or photographed at once).
    static var takesSeveralCameras: Bool { get }
}

extension CameraDefaults {
    static var takesSeveralCameras: Bool { false }
}

/// The highest the camera gives: what a photo, a recording and a preview want.
enum HighestQuality: CameraDefaults {
    static var preset: CaptureSession.Preset { .high }
}

/// The highest the camera gives, from one camera or several at once: what `record` and `photo` want.
enum HighestQualityFromEachCamera: CameraDefaults {
    static var preset: CaptureSession.Preset { .high }
    static var takesSeveralCameras: Bool { true }
}

/// 720p: what an encoder for a live stream keeps up with, and a viewer's bandwidth carries.
enum LiveStreaming: CameraDefaults {
    static var preset: CaptureSession.Preset { .hd1280x720 }
}
