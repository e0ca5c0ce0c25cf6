import GStreamerKit

/// Something a session delivers to (AVCaptureOutput). Each output becomes one branch of the session's
/// graph, fed by a tee; the session puts a queue in front of it so a slow or failing output cannot stall or
/// stop the others.
public class CaptureOutput: @unchecked Sendable, Hashable {
    /// The output's connection to the session's video input: rotation, mirroring.
    public let connection = CaptureConnection()

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

    /// Whether removing the output must push end-of-stream through it first (files need finalizing).
    var drainsOnDetach: Bool { false }

    /// The output's part of the graph, in gst-launch syntax, starting where the guard queue ends.
    func branchDescription() throws(CaptureError) -> String {
        preconditionFailure("\(type(of: self)) must describe its branch")
    }

    /// The branch is built and part of the session's graph (which may not be playing yet).
    func didAttach(branch: Bin, context: OutputContext) {}
    /// The branch was removed from the graph.
    func didDetach() {}
    /// The branch failed and was detached; the session keeps running.
    func didFail(_ error: GStreamerError) {}

    var displayName: String { String(describing: type(of: self)) }
}

/// What an output may ask of the session's graph while attached.
struct OutputContext: Sendable {
    /// Session running time now, in nanoseconds: the clock frame timestamps are in.
    let runningTime: @Sendable () -> UInt64?
    /// The camera feeding the session now.
    let videoDevice: @Sendable () -> CaptureDevice?
}
