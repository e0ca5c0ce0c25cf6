import ArgumentParser
import Foundation
import GCapture

/// The camera or microphone a command uses: the one named, else the system's default, else the built-in
/// test device. That last fallback is the CLI's own decision (the library hands out test devices only where
/// a program asks for them), and it is announced: a kiosk whose camera stack failed must not record test
/// bars without a word.
struct DeviceChoice {
    var device: CaptureDevice
    /// Set when the built-in test device stands in for a missing real one; already said on stderr, and
    /// repeated in the --json started events.
    var notice: String?

    /// The --camera and --microphone options' help, the same for every command.
    static let cameraHelp = ArgumentHelp("Camera id (see `gcapture devices`); default: the first real camera, else `test`.")
    static let severalCamerasHelp = ArgumentHelp(
        "Camera id (see `gcapture devices`); default: the first real camera, else `test`. Give it again for each further camera: "
            + "they run at once, one output each, named after the camera (clip.mp4 becomes clip-video0.mp4, clip-video1.mp4).")
    static let stampTimeHelp = ArgumentHelp(
        "Write each frame's capture time into the test camera's top rows (a band of cells), to measure latency from what a viewer shows.")
    static func microphoneHelp(none: String) -> ArgumentHelp {
        ArgumentHelp("Microphone id, `none` \(none); default: the first real microphone, else `test-microphone`.")
    }

    /// The camera; the test camera gets --noise and --stamp-time.
    static func camera(_ id: String?, noise: Int, stampsTime: Bool = false) throws -> DeviceChoice {
        var choice = try choose(id, mediaType: .video, option: "--camera", kind: "camera",
                                fallback: .testCamera, fallbackName: "test camera")
        if choice.device.deviceType == .testCamera, noise > 0 || stampsTime {
            choice.device = CaptureDevice.makeTestCamera(options: TestCameraOptions(noiseLevel: noise, stampsCaptureTime: stampsTime))
        }
        return choice
    }

    /// The microphone, or nil for `none`.
    static func microphone(_ id: String?) throws -> DeviceChoice? {
        if id == "none" { return nil }
        return try choose(id, mediaType: .audio, option: "--microphone", kind: "microphone",
                          fallback: .testMicrophone, fallbackName: "test microphone")
    }

    private static func choose(_ id: String?, mediaType: MediaType, option: String, kind: String,
                               fallback: CaptureDevice, fallbackName: String) throws -> DeviceChoice {
        if let id {
            let device = try CaptureDevice.requireDevice(withUniqueID: id)
            // Said before anything starts: a camera given as a microphone (or the reverse) used to open,
            // deliver nothing and time out, or record nothing at all.
            guard device.mediaType == mediaType else {
                let other = device.mediaType == .video ? "camera" : "microphone"
                throw CommandFailure("\(option) \(id) names a \(other), not a \(kind) (see `gcapture devices --media-type \(mediaType.rawValue)`)")
            }
            return DeviceChoice(device: device)
        }
        if let device = CaptureDevice.default(for: mediaType), !device.deviceType.isTest {
            return DeviceChoice(device: device)
        }
        let notice = "no \(kind) found: using the built-in \(fallbackName) `\(fallback.uniqueID)`"
        FileHandle.standardError.write(Data("gcapture: \(notice)\n".utf8))
        return DeviceChoice(device: fallback, notice: notice)
    }

    /// What a --json started event says of the fallbacks: "testDevice", and the notices when there are any.
    static func startedFields(_ choices: [DeviceChoice?]) -> [String: Any] {
        let notices = choices.compactMap { $0?.notice }
        var fields: [String: Any] = ["testDevice": !notices.isEmpty]
        if !notices.isEmpty { fields["notice"] = notices.joined(separator: "; ") }
        return fields
    }
}

/// A mistake of the user's that the CLI itself finds: printed as "Error: <sentence>", exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension ValidationError {
    /// The library's refusal of something the user typed (a stream URL, a sink's name) is a mistake on the
    /// command line: exit status 64, in the library's words; anything else it throws stays what it is.
    static func fromSettings<T>(_ body: () throws(CaptureError) -> T) throws -> T {
        do { return try body() } catch {
            if case .invalidSettings(let reason) = error { throw ValidationError(reason) }
            throw error
        }
    }
}
