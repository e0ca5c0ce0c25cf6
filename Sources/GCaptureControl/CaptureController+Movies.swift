import Foundation
import GCapture
import GCaptureDescription
import GCaptureSupport

extension CaptureController {
    // MARK: Movies

    /// How long `record start` waits for the recording's first frame.
    static let recordingStartTimeout: Double = 15
    /// How long `record stop` and the controller's shutdown wait for a stopped recording's files: a service's
    /// stop must end within its unit's TimeoutStopSec (45 s in Examples/kiosk).
    static let recordingFinishTimeout: Double = 30
    /// What of that wait the copy into a plain MP4 may take; the drain before it takes a few seconds at most.
    /// A longer copy (an hour of 1080p on an SD card) is abandoned and the fragmented movie kept: it is
    /// finished and plays, where a process ended mid-copy leaves a movie to recover at the next start.
    static let defragmentBudget: Double = 20

    /// Stops `movie`'s recording and waits for its files (nil: not in time).
    func stopAndWait(_ movie: CaptureMovieFileOutput, _ recording: RecordingWatcher) async -> RecordingFinish? {
        movie.stopRecording()
        return await recording.finished.wait(seconds: Self.recordingFinishTimeout)
    }

    func startRecording(path: String?) async throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        guard let movie = capture.movieOutput else { throw ControlFailure("this set-up records no movies (it has no movie output)") }
        if let recording { throw ControlFailure("already recording to \(recording.url.path); `record stop` first") }
        let url: URL
        if let path { url = try capture.paths.movie(path) } else { url = try nextFile(settings.movieNaming, in: settings.movieFolder) }
        guard let fileType = CaptureMovieFileOutput.FileType(fileExtension: url.pathExtension) else {
            throw ControlFailure("\(url.lastPathComponent): \(NamingRules.movie)")
        }
        let events = events
        let watcher = RecordingWatcher(url: url) { [weak self] watcher, error in
            // Said here, before anyone waiting for the finish hears of it: the event comes before the reply.
            guard case .success? = watcher.started.value else { return }
            Self.emitFinished(watcher.url, movie.lastStatistics, error: error, events: events)
            Task { await self?.forget(watcher) }
        }
        recording = watcher
        movie.fileType = fileType
        // Also when the recording ends by itself (its duration or size limit) and the run stops meanwhile.
        movie.defragmentTimeLimit = min(movie.defragmentTimeLimit, Self.defragmentBudget)
        movie.startRecording(to: url, recordingDelegate: watcher)
        switch await watcher.started.wait(seconds: Self.recordingStartTimeout) {
        case .success?:
            events.emit("recordingStarted", ["path": url.path, "rotation": Int(movie.connection.videoRotationAngle)], text: nil)
            progress = Task { [events] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    guard !Task.isCancelled, movie.isRecording, movie.outputFileURL == url else { return }
                    let stats = movie.recordingStatistics
                    events.emit("recordingProgress", ["path": url.path, "elapsed": movie.recordedDuration, "frames": stats.frames,
                                                       "dropped": stats.droppedFrames, "bytes": movie.recordedFileSize,
                                                       "paused": movie.isRecordingPaused], text: nil)
                }
            }
            return ControlReply(fields: ["path": url.path], text: "recording \(url.path)")
        case .failure(let error)?:
            forget(watcher)
            throw ControlFailure(error.description)
        case nil:
            // Given up on: the controller is no longer recording (a later `record start` tries again), whether
            // or not the output ever reports this take.
            movie.stopRecording()
            forget(watcher)
            throw ControlFailure("the recording to \(url.path) did not start within \(Int(Self.recordingStartTimeout)) s")
        }
    }

    func stopRecording() async throws(ControlFailure) -> ControlReply {
        guard let recording, let movie = capture.movieOutput else { throw ControlFailure("not recording") }
        guard let finish = await stopAndWait(movie, recording) else {
            throw ControlFailure("the recording to \(recording.url.path) did not finish within \(Int(Self.recordingFinishTimeout)) s")
        }
        forget(recording)
        if let error = finish.error, !error.recordingFinishedSuccessfully { throw ControlFailure(error.description) }
        let stats = movie.lastStatistics
        return ControlReply(fields: ["path": recording.url.path, "duration": stats.duration, "frames": stats.frames],
                            text: "recorded \(recording.url.path): \(String(format: "%.2f", stats.duration)) s, \(stats.frames) frames")
    }

    func pauseRecording() throws(ControlFailure) -> ControlReply {
        guard let recording, let movie = capture.movieOutput else { throw ControlFailure("not recording: nothing to pause") }
        if movie.isRecordingPaused { throw ControlFailure("the recording is already paused") }
        movie.pauseRecording()
        guard movie.isRecordingPaused else { throw ControlFailure("the recording has not started yet: nothing to pause") }
        events.emit("recordingPaused", ["path": recording.url.path, "elapsed": movie.recordedDuration], text: nil)
        return ControlReply(fields: ["path": recording.url.path], text: "paused \(recording.url.path)")
    }

    func resumeRecording() throws(ControlFailure) -> ControlReply {
        guard let recording, let movie = capture.movieOutput else { throw ControlFailure("not recording: nothing to resume") }
        guard movie.isRecordingPaused else { throw ControlFailure("the recording is not paused") }
        movie.resumeRecording()
        events.emit("recordingResumed", ["path": recording.url.path, "elapsed": movie.recordedDuration], text: nil)
        return ControlReply(fields: ["path": recording.url.path], text: "resumed \(recording.url.path)")
    }

    /// recordingFinished: `record`'s file and a timelapse's (`timelapse: true`) alike.
    nonisolated static func emitFinished(_ url: URL, _ stats: CaptureMovieFileOutput.Statistics, error: CaptureError?,
                                         timelapse: Bool = false, events: ControlEvents) {
        let complete = error == nil || error!.recordingFinishedSuccessfully
        var fields: ControlFields = ["path": url.path, "duration": stats.duration, "frames": stats.frames, "dropped": stats.droppedFrames,
                                     "complete": complete, "error": error.map { $0.description } ?? NSNull()]
        if timelapse { fields["timelapse"] = true }
        events.emit("recordingFinished", fields,
                    text: "\(timelapse ? "timelapse" : "recording") \(complete ? "finished" : "failed") \(url.path): "
                        + "\(String(format: "%.2f", stats.duration)) s" + (error.map { " (\($0))" } ?? ""))
    }

    /// A description's timelapse, recorded from each start of the session to its stop: its files told as
    /// recordingStarted and recordingFinished with `timelapse: true` (`record` never acts on it).
    func followTimelapse() {
        guard let timelapse = capture.timelapse else { return }
        let events = events, output = timelapse.output
        timelapse.onEvent = { event in
            switch event {
            case .started(let url):
                events.emit("recordingStarted", ["path": url.path, "rotation": Int(output.connection.videoRotationAngle), "timelapse": true],
                            text: "timelapse: recording \(url.path)")
            case .finished(let outcome, let stats):
                Self.emitFinished(outcome.url, stats, error: outcome.error, timelapse: true, events: events)
            }
        }
    }

    func forget(_ watcher: RecordingWatcher) {
        guard recording === watcher else { return }
        recording = nil
        progress?.cancel()
        progress = nil
    }
}
