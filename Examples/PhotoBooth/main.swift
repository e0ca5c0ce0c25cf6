// A photo booth on the GCapture library, written as an iOS developer writes one with AVFoundation: a
// session with a camera, a preview and a photo output, a countdown, and a photo when a key is pressed (or
// SIGUSR1 comes, for a big button wired to a script); the photos go into a folder, listed newest first when
// the booth closes.
//
//   swift run photo-booth --folder booth          any key: a photo (3, 2, 1...); q: close
//   kill -USR1 $(pidof photo-booth)               a photo from elsewhere
//
// Options: --folder DIR (default ./booth), --camera ID (default: the first camera; `test` for the built-in
// test camera), --countdown SECONDS (default 3), --preset NAME (default photo: the camera's largest
// pictures), --no-preview (no screen: a booth driven from elsewhere), --duration SECONDS (close by itself).
// The preview needs a display: Wayland, X, or a console (kmssink).
import Foundation
import GCapture

struct Options {
    var folder = URL(fileURLWithPath: "booth", isDirectory: true)
    var camera: String?
    var countdown = 3
    var preview = true
    var duration: Double?
    var preset = CaptureSession.Preset.photo

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func value(_ name: String) -> String {
            guard let value = rest.popFirst() else { fail("\(name) needs a value") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--folder": folder = URL(fileURLWithPath: value(argument), isDirectory: true)
            case "--camera": camera = value(argument)
            case "--countdown":
                guard let seconds = Int(value(argument)), (0...10).contains(seconds) else { fail("--countdown takes 0 to 10 seconds") }
                countdown = seconds
            case "--no-preview": preview = false
            case "--preset":
                let name = value(argument)
                guard let named = CaptureSession.Preset(rawValue: name) else { fail("no preset \(name) (see `gcapture frames --help`)") }
                preset = named
            case "--duration":
                guard let seconds = Double(value(argument)), seconds > 0 else { fail("--duration takes a number of seconds") }
                duration = seconds
            default: fail("unknown option \(argument) (see the top of Examples/PhotoBooth/main.swift)")
            }
        }
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("photo-booth: \(message)\n".utf8))
    exit(1)
}

/// One line at a time, flushed: a program reading through a pipe sees each when it happens.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

final class PhotoBooth: CapturePhotoCaptureDelegate, @unchecked Sendable {
    let session = CaptureSession()
    let photoOutput = CapturePhotoOutput()
    let previewOutput = CapturePreviewOutput()

    // Everything the booth decides (a countdown running, the next file's number, photos still being
    // written) happens on this queue, as an app keeps its session work on one serial queue.
    private let boothQueue = DispatchQueue(label: "booth")
    private let folder: URL
    private let countdown: Int
    private var counting = false
    private var pending = 0
    private var closing: (() -> Void)?

    init(folder: URL, countdown: Int) {
        self.folder = folder
        self.countdown = countdown
    }

    func configure(camera: CaptureDevice, preset: CaptureSession.Preset, preview: Bool) throws {
        session.beginConfiguration()
        session.sessionPreset = preset
        let input = try CaptureDeviceInput(device: camera)
        guard session.canAddInput(input) else { fail("the session cannot take \(camera.localizedName)") }
        session.addInput(input)
        guard session.canAddOutput(photoOutput) else { fail("the session cannot take a photo output") }
        session.addOutput(photoOutput)
        photoOutput.maxPhotoQualityPrioritization = .quality
        if preview {
            previewOutput.videoGravity = .resizeAspect
            // waylandsink and kmssink fill the screen; on an X desktop the preview is a window.
            let environment = ProcessInfo.processInfo.environment
            previewOutput.isFullscreen = !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty || (environment["DISPLAY"] ?? "").isEmpty
            // A booth is a mirror: people expect to see themselves as in one (the photos stay unmirrored).
            previewOutput.connection.automaticallyAdjustsVideoMirroring = false
            previewOutput.connection.isVideoMirrored = true
            session.addOutput(previewOutput)
        }
        // commitAndWait throws why a configuration could not be applied (commitConfiguration would report it
        // through runtimeErrorNotification instead).
        try session.commitAndWait()
    }

    /// A press: the countdown, then the photo. A press during a countdown is the same press.
    func press(_ trigger: String) {
        boothQueue.async { [self] in
            guard !counting, closing == nil else { return }
            counting = true
            say("\(trigger): smile!")
            tick(countdown)
        }
    }

    private func tick(_ remaining: Int) {
        guard remaining > 0 else {
            counting = false
            pending += 1
            let settings = CapturePhotoSettings(photoQualityPrioritization: .quality)
            photoOutput.capturePhoto(with: settings, delegate: self)
            return
        }
        say("\(remaining)...")
        boothQueue.asyncAfter(deadline: .now() + 1) { [self] in tick(remaining - 1) }
    }

    // MARK: CapturePhotoCaptureDelegate

    func photoOutput(_ output: CapturePhotoOutput, willCapturePhotoFor resolvedSettings: CaptureResolvedPhotoSettings) {
        say("click")
    }

    func photoOutput(_ output: CapturePhotoOutput, didFinishProcessingPhoto photo: CapturePhoto, error: (any Error)?) {
        boothQueue.async { [self] in
            defer { photoDone() }
            if let error {
                say("the photo failed: \(error)")
                return
            }
            guard let data = photo.fileDataRepresentation() else { return say("the photo has no data") }
            let url = nextURL()
            do {
                try data.write(to: url, options: .atomic)
                say("saved \(url.path)")
            } catch {
                say("cannot save \(url.path): \(error.localizedDescription)")
            }
        }
    }

    private func photoDone() {
        pending -= 1
        if pending == 0, let closing { closing() }
    }

    private func nextURL() -> URL {
        var number = (try? FileManager.default.contentsOfDirectory(atPath: folder.path))?
            .compactMap { name -> Int? in
                guard name.hasPrefix("booth-"), name.hasSuffix(".jpg") else { return nil }
                return Int(name.dropFirst(6).dropLast(4))
            }.max() ?? 0
        var url: URL
        repeat {
            number += 1
            url = folder.appendingPathComponent(String(format: "booth-%04d.jpg", number))
        } while FileManager.default.fileExists(atPath: url.path)
        return url
    }

    /// Waits for the photos being taken (a countdown under way is dropped), then calls `done` on the booth's queue.
    func close(_ done: @escaping @Sendable () -> Void) {
        boothQueue.async { [self] in
            guard closing == nil else { return }
            closing = done
            if pending == 0 { done() }
        }
    }

    /// The folder's photos, newest first.
    func gallery() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".jpg") }.map { folder.appendingPathComponent($0) }
            .map { ($0, (try? $0.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate) ?? .distantPast) }
            .sorted { $0.1 > $1.1 }.map { $0.0.path }
    }
}

/// Keys from the terminal, one at a time (no Enter needed); from a pipe, one line is one press.
final class Keys: @unchecked Sendable {
    private var saved = termios()
    private let isTerminal = isatty(STDIN_FILENO) == 1

    func start(onPress: @escaping @Sendable () -> Void, onQuit: @escaping @Sendable () -> Void) {
        if isTerminal {
            tcgetattr(STDIN_FILENO, &saved)
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        }
        let isTerminal = isTerminal
        Thread.detachNewThread {
            var line = ""
            var byte: UInt8 = 0
            while read(STDIN_FILENO, &byte, 1) == 1 {
                let character = Character(Unicode.Scalar(byte))
                if isTerminal {
                    if character == "q" { return onQuit() }
                    onPress()
                } else if character == "\n" {
                    if line == "q" || line == "quit" { return onQuit() }
                    onPress()
                    line = ""
                } else {
                    line.append(character)
                }
            }
            // The end of a pipe ends the keys, not the booth: SIGUSR1 and the signals still work.
        }
    }

    func restore() {
        if isTerminal { tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
do {
    try FileManager.default.createDirectory(at: options.folder, withIntermediateDirectories: true)
} catch {
    fail("cannot create the folder \(options.folder.path): \(error.localizedDescription)")
}
let camera: CaptureDevice
if let id = options.camera {
    guard let named = CaptureDevice.device(withUniqueID: id) else { fail("no camera \(id) (see `gcapture devices`)") }
    camera = named
} else {
    guard let found = CaptureDevice.default(for: .video) else {
        fail((CaptureDevice.discoveryError.map { "\($0)" } ?? "no camera found") + "; --camera test uses the built-in test camera")
    }
    camera = found
}

let booth = PhotoBooth(folder: options.folder, countdown: options.countdown)
// Before the camera starts: a SIGUSR1 that comes early must not end the booth (its default action).
let (closed, closeNow) = AsyncStream<String>.makeStream()
let signals = [SIGUSR1, SIGINT, SIGTERM].map { number in
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
    source.setEventHandler { if number == SIGUSR1 { booth.press("SIGUSR1") } else { closeNow.yield("signal") } }
    source.resume()
    return source
}
do {
    try booth.configure(camera: camera, preset: options.preset, preview: options.preview)
    try await booth.session.start()
} catch {
    fail("cannot start the camera: \(error)")
}

let keys = Keys()
keys.start(onPress: { booth.press("key") }, onQuit: { closeNow.yield("q") })
if let duration = options.duration {
    DispatchQueue.main.asyncAfter(deadline: .now() + duration) { closeNow.yield("time") }
}
say("ready: \(camera.localizedName)" + (options.preview ? ", preview on \(booth.previewOutput.sinkInUse ?? "the screen")" : "")
    + "; press a key for a photo, q to close")

for await _ in closed { break }
await withCheckedContinuation { continuation in booth.close { continuation.resume() } }
await booth.session.stop()
keys.restore()
signals.forEach { $0.cancel() }
if options.preview { say("the preview showed \(booth.previewOutput.shownFrameCount) frames") }
let photos = booth.gallery()
say("gallery (\(photos.count), newest first):")
photos.forEach { say("  \($0)") }
