import Foundation
import GCapture
import GCaptureSupport

/// A description's `outputs.timelapse`: a second movie output of the session, recording one frame every
/// `interval` for as long as the session runs. It starts itself each time the session starts (whoever
/// starts it: `DescribedSession.start`, `gcapture run`'s controller), into the next file of its folder, and
/// ends with the session: `DescribedSession.stop` finalizes it first; a session stopped directly drains it
/// as it stops (the file is complete; the plain-MP4 rewrite follows on the output's own queue).
public final class DescribedTimelapse: CaptureFileOutputRecordingDelegate, Sendable {
    public let output = CaptureMovieFileOutput()

    /// What became of a timelapse file.
    public struct Outcome: Sendable {
        public let url: URL
        /// Nil for a file stopped on request (or at its limit: see `recordingFinishedSuccessfully`).
        public let error: CaptureError?
    }

    /// A file's course, told to `onEvent`.
    public enum Event: Sendable {
        case started(URL)
        /// With what the file holds.
        case finished(Outcome, CaptureMovieFileOutput.Statistics)
    }

    /// Called on the movie output's delegate queue as each file starts and is finished: a run's events.
    /// A file's `finished` is told before `waitUntilSettled` returns.
    public var onEvent: (@Sendable (Event) -> Void)? {
        get { state.withLock { $0.onEvent } }
        set { state.withLock { $0.onEvent = newValue } }
    }

    private struct State {
        var files: OutputFiles?
        var current: URL?
        var finished: [Outcome] = []
        var watch: Task<Void, Never>?
        var onEvent: (@Sendable (Event) -> Void)?
    }
    private let state = Locked(State())

    init() {}

    deinit { state.withLock { $0.watch }?.cancel() }

    /// The file being recorded, nil between runs.
    public var currentFile: URL? { state.withLock { $0.current } }
    /// Every file finished so far, in order, and why it ended (a file that could not start too).
    public var outcomes: [Outcome] { state.withLock { $0.finished } }
    /// Where the next file goes.
    public var files: OutputFiles? { state.withLock { $0.files } }

    /// Whether the file `name` in `folder` is a timelapse of this rule (the one in force).
    public func isTimelapse(_ name: String, in folder: URL) -> Bool { files?.names(name, in: folder) ?? false }

    /// The description's settings, for the next file (a reload changes them so too).
    func configure(_ timelapse: CaptureDescription.Timelapse, folder: URL?) {
        output.timelapseInterval = timelapse.interval
        output.timelapseFrameRate = timelapse.frameRate
        output.maxRecordedDuration = timelapse.maxDuration
        output.maxRecordedFileSize = timelapse.maxSize
        let files = folder.map { OutputFiles(folder: $0, pattern: timelapse.name) }
        state.withLock { state in
            // A reload that names the same folder and pattern keeps the numbering where it is.
            if state.files?.folder != files?.folder || state.files?.pattern != files?.pattern { state.files = files }
        }
    }

    /// Starts a file whenever `session` starts running.
    func follow(_ session: CaptureSession) {
        let events = session.events()
        let watch = Task { [weak self] in
            for await event in events {
                if case .didStartRunning = event { self?.start() }
            }
        }
        state.withLock { $0.watch = watch }
    }

    /// Starts recording into the next file, unless it records already.
    func start() {
        guard !output.isRecording, let files = state.withLock({ $0.files }) else { return }
        do throws(CaptureError) {
            let url = try files.next()
            state.withLock { $0.current = url }
            output.startRecording(to: url, recordingDelegate: self)
        } catch {
            state.withLock { $0.finished.append(Outcome(url: files.folder, error: error)) }
        }
    }

    /// Stops the file being recorded and waits (at most `timeout` seconds) for it to be finished.
    func stop(timeout: Double = 30) async {
        guard output.isRecording else { return }
        output.stopRecording()
        await waitUntilSettled(timeout: timeout)
    }

    /// Waits (at most `timeout` seconds) until no file is being recorded or settled: after the session's
    /// stop drained the timelapse, its file is rewritten as a plain MP4 on the output's queue, and a process
    /// that ended meanwhile would leave the fragmented file and its sidecar for the next run to recover.
    public func waitUntilSettled(timeout: Double = 30) async {
        let deadline = Date().addingTimeInterval(timeout)
        while output.isRecording || currentFile != nil, Date() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    public func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {
        onEvent?(.started(fileURL))
    }

    public func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                           error: (any Error)?) {
        let failure = error.map { $0 as? CaptureError ?? .recordingFailed(reason: "\($0)", underlying: nil) }
        let outcome = Outcome(url: outputFileURL, error: failure)
        // Told before `current` goes: whoever waits until settled has heard of it.
        onEvent?(.finished(outcome, self.output.lastStatistics))
        state.withLock { state in
            if state.current == outputFileURL { state.current = nil }
            state.finished.append(outcome)
        }
    }
}
