import GStreamerKit

/// Something a session delivers to (AVCaptureOutput). Each output becomes one branch of the session's
/// graph, fed by a tee; the session puts a queue in front of it so a slow or failing output cannot stall or
/// stop the others.
public class CaptureOutput: @unchecked Sendable, Hashable {
    // @unchecked Sendable: a non-final class can only be Sendable unchecked (AVCaptureOutput is subclassed); it
    // stores one let of a Sendable connection, and each subclass keeps its state behind a lock.
    /// The output's connection to the session's video input: rotation, mirroring.
    public let connection: CaptureConnection

    init() {
        connection = CaptureConnection(turnsCapturedFrames: Self.turnsCapturedFrames)
    }

    /// Whether the output turns and mirrors what it captures as its connection says: every video output
    /// does (preview, frames to code, photos, movies) and says so by overriding this.
    class var turnsCapturedFrames: Bool { false }

    /// The connection for a media type (AVCaptureOutput.connection(with:)).
    public func connection(with mediaType: MediaType) -> CaptureConnection? {
        mediaType == self.mediaType ? connection : nil
    }

    public static func == (a: CaptureOutput, b: CaptureOutput) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// Media the output consumes.
    var mediaType: MediaType { .video }

    /// How many buffers the guard queue holds before dropping the oldest.
    var queueDepth: Int { 2 }

    /// Whether the output keeps video frames past the next one (an encoder's queue and lookahead, a backlog):
    /// a camera's frames are then copied as they enter its branch, so that none in the driver's memory stays
    /// after the camera went (DeviceFrameCopy). Outputs that let each frame go when the next one comes say no
    /// and take the driver's buffers as they are.
    var keepsFrames: Bool { true }

    /// Whether removing the output must push end-of-stream through it first (files need finalizing).
    var drainsOnDetach: Bool { false }

    /// How long that drain may take in all before the branch is stopped as it is (TeeBranch.detach's limit).
    var drainLimit: Duration { .seconds(30) }

    /// Whether the output gives up frames first under system pressure (SessionPressure): what takes video
    /// and does not record it. Asked at each frame while the session thins frame outputs.
    var yieldsFramesUnderPressure: Bool { mediaType == .video && !drainsOnDetach }

    /// The output's permanent branch in gst-launch syntax, starting where the guard queue ends; nil for
    /// outputs that attach branches only while they work (a movie file output, between start and stop).
    func branchDescription() throws(CaptureError) -> String? { nil }

    /// The output joined a graph (which may not be playing yet); `branch` is its permanent branch, if any.
    func didJoin(_ context: OutputContext, branch: Bin?) {}
    /// The output left the graph (the session stopped, or the output was removed or failed).
    func didDetach() {}
    /// The same, saying whether the output's branch, if it had one to drain, drained completely.
    func didDetach(drained: Bool) { didDetach() }
    /// The branch failed and was detached; the session keeps running.
    func didFail(_ error: GStreamerError) {}
    /// On the session's queue: the graph the output joined is the session's running one now (a graph is
    /// built, and outputs join it, before it is known to start).
    func sessionDidStartRunning(_ graph: any OutputGraph) {}
    /// On the session's queue, while the graph unlinks (and maybe drains) the output's branch, once the drain
    /// can see the branch's end: a branch fed by the output itself rather than by the tees ends its inputs here.
    func branchWillDetach() {}
    /// Whether the output builds its branch again by itself after a failure (a stream reconnecting): the
    /// session then does not report the failure as a runtime error, which says the output was detached for
    /// good; the output's own state says what goes on.
    var recoversFromBranchFailures: Bool { false }
    /// The session's microphone failed and was removed; video goes on.
    func audioSourceDidFail(_ device: CaptureDevice, error: GStreamerError) {}
    /// The session's camera (or microphone, as `reason.affectsVideo` says) was interrupted. Called on the
    /// session's queue; the graph keeps running and the session fills the gap until the interruption ends.
    func sessionWasInterrupted(_ reason: CaptureSession.InterruptionReason) {}
    /// The interrupted device delivers again. Called on the session's queue.
    func sessionInterruptionEnded(_ reason: CaptureSession.InterruptionReason) {}
    /// Another camera now feeds the session (a switch inside a configuration), its branch kept running.
    func videoDeviceDidChange(_ device: CaptureDevice?) {}

    var displayName: String { String(describing: type(of: self)) }

    /// The branch end for outputs that take frames in Swift: an appsink named "sink" that never syncs to the
    /// clock and never keeps a sample of its own.
    ///
    /// async=false: an asynchronous sink inside a branch bin is not told PLAYING with the pipeline (the bin,
    /// still busy going to PAUSED, only records the target), so its first frame waits in preroll until the
    /// bin's state change goes on from GLib's thread pool. On two cores that thread often queued behind the
    /// test camera rendering its next frame: the first frame stood 2-4 ms in the appsink in 7 starts of 40.
    /// A sink that never syncs has no preroll to wait for.
    static let appSinkFragment = "appsink name=sink sync=false async=false max-buffers=1 drop=false emit-signals=false enable-last-sample=false"

    /// That appsink in a branch built with `appSinkFragment`.
    static func appSink(in branch: Bin?) -> AppSink? {
        branch?.element(named: "sink").flatMap(AppSink.init)
    }
}

/// What an output may ask of the session while it is part of its graph.
struct OutputContext: Sendable {
    /// Session running time now, in nanoseconds: the clock frame timestamps are in.
    let runningTime: @Sendable () -> UInt64?
    /// The camera feeding the session now.
    let videoDevice: @Sendable () -> CaptureDevice?
    /// Runs `body` on the session's queue with the graph, if that graph is still the session's running one;
    /// else calls `body` with nil. Graph changes (attaching a recording) happen only there.
    let onSessionQueue: @Sendable (@escaping @Sendable ((any OutputGraph)?) -> Void) -> Void
}
