import GStreamerKit

/// Something a session delivers to (AVCaptureOutput). Each output becomes one branch of the session's
/// graph, fed by a tee; the session puts a queue in front of it so a slow or failing output cannot stall or
/// stop the others.
public class CaptureOutput: @unchecked Sendable, Hashable {
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

    /// The branch is built and attached (the session is running).
    func didAttach(branch: Bin) {}
    /// The branch was removed from the graph.
    func didDetach() {}
    /// The branch failed and was detached; the session keeps running.
    func didFail(_ error: GStreamerError) {}

    var displayName: String { String(describing: type(of: self)) }
}
