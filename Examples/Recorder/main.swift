// A recorder that lives through interruptions, on the GCapture library, in AVFoundation's shape: a session
// with a camera, a microphone and a movie file output; the session's interruption notifications observed;
// each file ended by a limit (or by a failure) followed at once by the next one, until told to stop.
//
//   swift run recorder --folder recordings --segment 600      ten-minute files until Ctrl+C
//
// Unplug the camera while it records: the movie goes on with black frames until the camera is back (the
// session finds it again by itself), or, with --split, the file is finalized at the interruption and the
// recording goes on in a new file when the camera is back (AVFoundation's behaviour). A microphone whose
// audio server goes away is filled with silence. A failure of the recording (a full disk) ends that file; the
// next one starts after a second.
//
// Options: --folder DIR (default ./recordings), --camera ID, --microphone ID|none, --segment SECONDS
// (default 600), --split, --preset NAME (default high), --duration SECONDS (stop by itself).
import Foundation
import GCapture

struct Options {
    var folder = URL(fileURLWithPath: "recordings", isDirectory: true)
    var camera: String?
    var microphone: String?
    var segment: Double = 600
    var split = false
    var duration: Double?
    var preset = CaptureSession.Preset.high

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func value(_ name: String) -> String {
            guard let value = rest.popFirst() else { fail("\(name) needs a value") }
            return value
        }
        func seconds(_ name: String) -> Double {
            guard let seconds = Double(value(name)), seconds > 0 else { fail("\(name) takes a number of seconds") }
            return seconds
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--folder": folder = URL(fileURLWithPath: value(argument), isDirectory: true)
            case "--camera": camera = value(argument)
            case "--microphone": microphone = value(argument)
            case "--segment": segment = seconds(argument)
            case "--split": split = true
            case "--duration": duration = seconds(argument)
            case "--preset":
                let name = value(argument)
                guard let named = CaptureSession.Preset(rawValue: name) else { fail("no preset \(name) (see `gcapture frames --help`)") }
                preset = named
            default: fail("unknown option \(argument) (see the top of Examples/Recorder/main.swift)")
            }
        }
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("recorder: \(message)\n".utf8))
    exit(1)
}

func say(_ line: String) {
    print(line)
    fflush(nil)
}

func device(_ id: String?, for mediaType: MediaType) -> CaptureDevice? {
    if let id {
        guard let device = CaptureDevice.device(withUniqueID: id) else { fail("no device \(id) (see `gcapture devices`)") }
        return device
    }
    return CaptureDevice.default(for: mediaType)
}

final class Recorder: CaptureFileOutputRecordingDelegate, @unchecked Sendable {
    let session = CaptureSession()
    let movieOutput = CaptureMovieFileOutput()
    private let folder: URL
    private let queue = DispatchQueue(label: "recorder")
    private var observers: [NSObjectProtocol] = []
    private var stopping = false
    private var finished: (() -> Void)?
    private var counter = 0
    private var files: [URL] = []
    /// The files finished so far.
    var recordedFiles: [URL] { queue.sync { files } }

    init(folder: URL) { self.folder = folder }

    func configure(camera: CaptureDevice, microphone: CaptureDevice?, preset: CaptureSession.Preset, segment: Double,
                   split: Bool) throws {
        session.beginConfiguration()
        session.sessionPreset = preset
        try session.add(CaptureDeviceInput(device: camera))
        if let microphone { try session.add(CaptureDeviceInput(device: microphone)) }
        guard session.canAddOutput(movieOutput) else { fail("the session cannot take a movie output") }
        session.addOutput(movieOutput)
        movieOutput.maxRecordedDuration = segment
        movieOutput.interruptionBehavior = split ? .finalizeAndResume : .continueThroughGap
        try session.commitAndWait()

        let center = NotificationCenter.default
        observers = [
            center.addObserver(forName: CaptureSession.wasInterruptedNotification, object: session, queue: nil) { note in
                say("interrupted: \(Self.reason(note))")
            },
            center.addObserver(forName: CaptureSession.interruptionEndedNotification, object: session, queue: nil) { note in
                say("interruption ended: \(Self.reason(note))")
            },
            center.addObserver(forName: CaptureSession.runtimeErrorNotification, object: session, queue: nil) { note in
                let error = note.userInfo?[CaptureSession.runtimeErrorUserInfoKey]
                say("runtime error: \(error.map { "\($0)" } ?? "unknown")")
            },
        ]
    }

    private static func reason(_ note: Notification) -> String {
        guard let raw = note.userInfo?[CaptureSessionInterruptionReasonKey] as? Int,
              let reason = CaptureSession.InterruptionReason(rawValue: raw) else { return "unknown" }
        return "\(reason)"
    }

    func startNextFile() {
        queue.async { [self] in
            guard !stopping else { return }
            counter += 1
            var url: URL
            repeat {
                url = folder.appendingPathComponent(String(format: "recording-%04d.mp4", counter))
                if FileManager.default.fileExists(atPath: url.path) { counter += 1 } else { break }
            } while true
            movieOutput.startRecording(to: url, recordingDelegate: self)
        }
    }

    // MARK: CaptureFileOutputRecordingDelegate

    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        say("recording \(fileURL.path)")
    }

    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?) {
        queue.async { [self] in
            // A limit reached (the segment's length) or an interruption with --split leaves a complete file.
            let complete = error == nil || (error as? CaptureError)?.recordingFinishedSuccessfully == true
            say("finished \(outputFileURL.path)" + (error.map { " (\($0))" } ?? "") + (complete ? "" : ": it plays up to the failure"))
            files.append(outputFileURL)
            if stopping {
                finished?()
                finished = nil
            } else if output.isRecording {
                // --split: the output goes on by itself in the next file when the interruption ends.
            } else {
                // The next segment, at once after a limit; a second later after a failure, so that a full disk
                // does not spin.
                queue.asyncAfter(deadline: .now() + (complete ? 0 : 1)) { self.startNextFile() }
            }
        }
    }

    /// Finalizes the file being recorded, then calls `done`.
    func stop(_ done: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            stopping = true
            guard movieOutput.isRecording else { return done() }
            finished = done
            movieOutput.stopRecording()
        }
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
do {
    try FileManager.default.createDirectory(at: options.folder, withIntermediateDirectories: true)
} catch {
    fail("cannot create the folder \(options.folder.path): \(error.localizedDescription)")
}
guard let camera = device(options.camera, for: .video) else {
    fail((CaptureDevice.discoveryError.map { "\($0)" } ?? "no camera found") + "; --camera test uses the built-in test camera")
}
let microphone = options.microphone == "none" ? nil : device(options.microphone, for: .audio)

let recorder = Recorder(folder: options.folder)
do {
    try recorder.configure(camera: camera, microphone: microphone, preset: options.preset, segment: options.segment,
                          split: options.split)
    try await recorder.session.start()
} catch {
    fail("cannot start: \(error)")
}
say("capturing from \(camera.localizedName)" + (microphone.map { " and \($0.localizedName)" } ?? ", no sound"))
recorder.startNextFile()

let (stopRequests, requestStop) = AsyncStream<Void>.makeStream()
let signals = [SIGINT, SIGTERM].map { number in
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
    source.setEventHandler { requestStop.yield() }
    source.resume()
    return source
}
if let duration = options.duration {
    DispatchQueue.main.asyncAfter(deadline: .now() + duration) { requestStop.yield() }
}
for await _ in stopRequests { break }
await withCheckedContinuation { continuation in recorder.stop { continuation.resume() } }
await recorder.session.stop()
signals.forEach { $0.cancel() }
say("\(recorder.recordedFiles.count) files in \(options.folder.path)")
