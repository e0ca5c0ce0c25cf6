import Foundation
import GStreamerKit

/// A recording, from startRecording to its end; with `.finalizeAndResume` it spans several files, and
/// what describes the file being written (url to sidecarLock) is replaced at each.
struct MovieRecording {
    /// The file startRecording named; the files after interruptions are named after it.
    let requestedURL: URL
    var url: URL
    let delegate: any CaptureFileOutputRecordingDelegate
    var encoding: MovieEncoding
    let interruptionBehavior: CaptureMovieFileOutput.InterruptionBehavior
    /// Running time of the startRecording call: a recording with a pre-roll begins that much before it.
    var requestRunningTime: UInt64?
    /// The file's branch, once built.
    var branch: MovieRecordingBranch?
    var monitor: RecordingLimitMonitor?
    var sidecarLock: SidecarLock?
    var stopping = false
    /// Files begun so far.
    var filesStarted = 0
    /// Identifies the file being written, so that work queued for one file never touches the next.
    var fileID: UInt64 = 0
    /// The file is being finalized at a video interruption (its branch not yet drained).
    var splitting = false
    /// Between files: no file is open until the interruption ends.
    var waitingFor: CaptureSession.InterruptionReason?
    /// The file ended at the interruption was paused: so is the next.
    var pausedAcrossFiles = false

    init(to url: URL, delegate: any CaptureFileOutputRecordingDelegate, encoding: MovieEncoding,
         interruptionBehavior: CaptureMovieFileOutput.InterruptionBehavior) {
        requestedURL = url
        self.url = url
        self.delegate = delegate
        self.encoding = encoding
        self.interruptionBehavior = interruptionBehavior
    }

    var timeline: RecordingTimeline? { branch?.timeline }

    var isPaused: Bool { timeline?.isPaused ?? (waitingFor != nil && pausedAcrossFiles) }

    /// The branch built for the current file; the next file starts from its encoding (the encoder that
    /// opened, the bit rate chosen).
    mutating func attach(_ branch: MovieRecordingBranch) {
        self.branch = branch
        encoding = branch.encoding
    }

    /// The current file ends at an interruption of the camera: frames from now on are the session's filler,
    /// not this file's. Returns the file's ID, nil when this recording does not split there or cannot now.
    mutating func beginSplit() -> UInt64? {
        guard interruptionBehavior == .finalizeAndResume, !stopping, !splitting, waitingFor == nil, let timeline else { return nil }
        timeline.end()
        splitting = true
        pausedAcrossFiles = timeline.isPaused
        monitor?.cancel()
        return fileID
    }

    /// The file cut at an interruption has drained: the recording holds nothing of it any more and waits
    /// for the camera.
    mutating func waitBetweenFiles(for reason: CaptureSession.InterruptionReason) {
        splitting = false
        waitingFor = reason
        branch = nil
        monitor = nil
        sidecarLock = nil
    }

    /// The recording's next file is `url`, its `number`th, identified by `id`.
    mutating func open(_ url: URL, number: Int, id: UInt64) {
        self.url = url
        fileID = id
        filesStarted = number
        waitingFor = nil
    }

    /// Pauses or resumes the current file, or the next when between files; false when there is neither.
    mutating func setPaused(_ paused: Bool) -> Bool {
        if let timeline {
            if paused { timeline.pause() } else { timeline.resume() }
        } else if waitingFor != nil {
            pausedAcrossFiles = paused
        } else {
            return false
        }
        return true
    }
}
