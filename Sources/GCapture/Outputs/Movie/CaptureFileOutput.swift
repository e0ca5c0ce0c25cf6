import Foundation

/// Follows a recording (AVCaptureFileOutputRecordingDelegate). Called on the output's delegate queue, with
/// the output as its base class and its connections, as AVFoundation calls it, so a delegate written for
/// AVFoundation conforms after renaming.
public protocol CaptureFileOutputRecordingDelegate: AnyObject, Sendable {
    func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection])
    /// `error` is nil for a recording stopped on request, else a `CaptureError` (typed `Error?` as in
    /// AVFoundation, so its delegates port unchanged). Limits reached (`recordingFinishedSuccessfully`) still
    /// leave a complete file; failures leave a file that plays up to the failure.
    func fileOutput(_ output: CaptureFileOutput, didFinishRecordingTo outputFileURL: URL, from connections: [CaptureConnection],
                    error: (any Error)?)
    func fileOutput(_ output: CaptureFileOutput, didPauseRecordingTo fileURL: URL, from connections: [CaptureConnection])
    func fileOutput(_ output: CaptureFileOutput, didResumeRecordingTo fileURL: URL, from connections: [CaptureConnection])
}

extension CaptureFileOutputRecordingDelegate {
    public func fileOutput(_ output: CaptureFileOutput, didStartRecordingTo fileURL: URL, from connections: [CaptureConnection]) {}
    public func fileOutput(_ output: CaptureFileOutput, didPauseRecordingTo fileURL: URL, from connections: [CaptureConnection]) {}
    public func fileOutput(_ output: CaptureFileOutput, didResumeRecordingTo fileURL: URL, from connections: [CaptureConnection]) {}
}

/// An output that records to files (AVCaptureFileOutput): what the recording delegate receives. Only the
/// engine's own outputs derive from it (CaptureMovieFileOutput); each implements every member below, so the
/// base's bodies are never reached.
public class CaptureFileOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: it stores nothing; its subclass keeps its state behind a lock.
    override init() {}

    /// The file being recorded to, nil when not recording.
    public var outputFileURL: URL? { Self.subclassMustImplement() }
    public var isRecording: Bool { Self.subclassMustImplement() }
    public var isRecordingPaused: Bool { Self.subclassMustImplement() }
    /// Seconds recorded so far, pauses excluded.
    public var recordedDuration: TimeInterval { Self.subclassMustImplement() }
    /// Bytes written so far.
    public var recordedFileSize: Int64 { Self.subclassMustImplement() }
    public var maxRecordedDuration: TimeInterval? {
        get { Self.subclassMustImplement() } set { Self.subclassMustImplement() }
    }
    /// Bytes the file may not exceed: the recording stops before the first encoded sample that would take the
    /// finished file past them (in either form an MP4 takes, fragmented or defragmented), so it ends within
    /// about a frame of the limit and is complete.
    public var maxRecordedFileSize: Int64? {
        get { Self.subclassMustImplement() } set { Self.subclassMustImplement() }
    }
    /// Bytes of free space to leave on the file's disk.
    public var minFreeDiskSpaceLimit: Int64 {
        get { Self.subclassMustImplement() } set { Self.subclassMustImplement() }
    }

    /// Starts recording to `url`; returns at once, the delegate hears when the recording really started or
    /// why it could not.
    public func startRecording(to url: URL, recordingDelegate delegate: any CaptureFileOutputRecordingDelegate) {
        Self.subclassMustImplement()
    }
    /// Stops and finalizes the file; the delegate hears when it is complete.
    public func stopRecording() { Self.subclassMustImplement() }
    public func pauseRecording() { Self.subclassMustImplement() }
    public func resumeRecording() { Self.subclassMustImplement() }

    private static func subclassMustImplement(_ member: StaticString = #function) -> Never {
        preconditionFailure("\(Self.self) does not implement CaptureFileOutput.\(member)")
    }
}
