import Foundation
import GStreamerKit

/// A movie file output's settings; a recording takes them when it starts (its files' branches too).
struct MovieOutputSettings: Sendable {
    var fragmentInterval = 1.0
    var maxDuration: TimeInterval?
    var maxFileSize: Int64?
    var minFreeDisk: Int64 = 0
    var fileType = CaptureMovieFileOutput.FileType.mp4
    var videoBitRate: Int?
    var defragments = true
    var defragmentTimeLimit: TimeInterval = 600
    var videoEncoder: String?
    var interruptionBehavior = CaptureMovieFileOutput.InterruptionBehavior.continueThroughGap
    var preRollDuration: TimeInterval = 0
    /// Seconds of capture between the frames a timelapse keeps; nil: every frame.
    var timelapseInterval: TimeInterval?
    var timelapseFrameRate = 30

    /// The encoding a recording asks for; its branch completes it from the camera and the session.
    func encoding() throws(CaptureError) -> MovieEncoding {
        var encoding = MovieEncoding(container: fileType == .mp4 ? .mp4 : .matroska, videoBitRate: videoBitRate ?? 0,
                                     frameRate: 30, fragmentInterval: fragmentInterval, withAudio: false,
                                     videoEncoder: try H264Encoder.choose(videoEncoder))
        encoding.timelapse = timelapseInterval.map { Timelapse(interval: $0, frameRate: timelapseFrameRate) }
        return encoding
    }
}

/// What a movie file output's API, the session's hooks and the output's queues share, behind one lock:
/// each step of a recording reads and changes it in one go.
struct MovieOutputState {
    var context: OutputContext?
    var recording: MovieRecording?
    var settings = MovieOutputSettings()
    /// The last seconds of the running session, while `preRollDuration` asks for them.
    var preRoll: PreRollRing?
    /// The session's camera is interrupted now (set and cleared by the session's hooks, on its queue).
    var videoInterruption: CaptureSession.InterruptionReason?
    var fileCounter: UInt64 = 0
    /// The statistics of the last recording that finished.
    var finishedStatistics = CaptureMovieFileOutput.Statistics(RecordingTimeline.Statistics())

    /// What a stop found: what to finish and how.
    struct Stop {
        var context: OutputContext?
        /// A file is open and not being cut already: its branch is to drain.
        var drainsFile: Bool
        /// The recording, ended before its first file began (it waited for the camera).
        var unstarted: MovieRecording?
        var timeline: RecordingTimeline?
        var withAudio: Bool
    }

    /// Takes the recording, which ends.
    mutating func takeRecording() -> MovieRecording? {
        defer { recording = nil }
        return recording
    }

    /// The session's camera is interrupted: a recording that splits there cuts its file. Returns what the
    /// cut needs, nil when there is none.
    mutating func cameraWasInterrupted(_ reason: CaptureSession.InterruptionReason) -> (context: OutputContext, fileID: UInt64)? {
        videoInterruption = reason
        guard let context, let fileID = recording?.beginSplit() else { return nil }
        return (context, fileID)
    }

    /// The camera is back: the context to open the next file in, if a recording waits for it.
    mutating func cameraInterruptionEnded() -> OutputContext? {
        videoInterruption = nil
        return recording?.waitingFor != nil ? context : nil
    }

    /// The file `fileID` cut at an interruption has drained. Returns the recording as it was, with that
    /// file to finish, nil when it is no longer the file being cut. A stop asked for meanwhile ends the
    /// recording with it; else the recording waits for the camera.
    mutating func fileWasCut(_ fileID: UInt64, at reason: CaptureSession.InterruptionReason) -> MovieRecording? {
        guard let current = recording, current.fileID == fileID, current.splitting else { return nil }
        if current.stopping {
            recording = nil
        } else {
            recording?.waitBetweenFiles(for: reason)
        }
        return current
    }

    /// A recording waiting between files may open its next one: it is not stopping and the camera delivers.
    var mayOpenNextFile: Bool { recording?.waitingFor != nil && recording?.stopping == false && videoInterruption == nil }

    /// Asked for while the camera is interrupted, a recording that keeps filler out of its files waits for
    /// it before its first file. Returns whether it waits.
    mutating func waitForCameraBeforeFirstFile() -> Bool {
        guard let reason = videoInterruption, recording?.interruptionBehavior == .finalizeAndResume,
              recording?.filesStarted == 0 else { return false }
        recording?.waitingFor = reason
        return true
    }

    /// Opens the recording's `number`th file at `url`. Returns the delegate to tell, nil without a recording.
    mutating func openFile(_ url: URL, number: Int) -> (any CaptureFileOutputRecordingDelegate)? {
        guard recording != nil else { return nil }
        fileCounter += 1
        recording?.open(url, number: number, id: fileCounter)
        return recording?.delegate
    }

    /// Starts stopping the recording, once. Between files nothing is open (the delegate has heard the last
    /// file end): the recording just ends. A file being cut at an interruption ends the recording once it is
    /// finalized.
    mutating func beginStop() -> Stop? {
        guard let current = recording, !current.stopping else { return nil }
        recording?.stopping = true
        recording?.monitor?.cancel()
        if current.waitingFor != nil { recording = nil }
        return Stop(context: context, drainsFile: current.waitingFor == nil && !current.splitting,
                    unstarted: current.waitingFor != nil && current.filesStarted == 0 ? current : nil,
                    timeline: current.timeline, withAudio: current.encoding.withAudio)
    }
}

extension CaptureMovieFileOutput.Statistics {
    /// `requestRunningTime`: when startRecording was called, on the session's clock (for the pre-roll).
    init(_ stats: RecordingTimeline.Statistics, requestRunningTime: UInt64? = nil) {
        var preRoll = 0.0
        if let requested = requestRunningTime, let first = stats.firstFrameRunningTime, first < requested {
            preRoll = Double(requested - first) / 1e9
        }
        self.init(duration: Double(stats.duration) / 1e9, frames: stats.frames, droppedFrames: stats.droppedFrames,
                  audioBuffers: stats.audioBuffers, firstVideoTime: stats.firstVideoTime.map { Double($0) / 1e9 },
                  firstAudioTime: stats.firstAudioTime.map { Double($0) / 1e9 }, preRollDuration: preRoll)
    }
}
