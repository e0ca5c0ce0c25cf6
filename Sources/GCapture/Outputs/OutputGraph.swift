import GStreamerKit

/// The session's graph as an output sees it (`OutputContext.onSessionQueue`): what feeds it, and the few
/// operations an output that attaches branches while it works (a recording, a stream) needs. Nothing of the
/// sources' plugging, the bus or the other outputs: those stay the graph's (SessionGraph). Used on the
/// session's queue only.
protocol OutputGraph: AnyObject {
    /// The format and frame rate of the camera's source now (a filler's keeps the camera's); nil without one.
    var videoSelection: FormatSelection? { get }

    /// Whether the session has a source for the media type now.
    func hasSource(_ mediaType: MediaType) -> Bool

    /// Parses a branch bin with a name unique in the graph.
    func makeBin(_ description: String, for output: CaptureOutput, ghostUnlinkedPads: Bool) throws(CaptureError) -> Bin

    /// An H.264 encode of the camera that gives `request` what it asks, shared with other outputs.
    func sharedVideoEncoder(for request: VideoEncodeRequest) throws(CaptureError) -> SharedVideoEncoder

    /// Keeps a shared encoder running for something that is not a branch (a pre-roll ring) until released.
    func holdSharedEncoder(_ encoder: SharedVideoEncoder)
    func releaseSharedEncoder(_ encoder: SharedVideoEncoder)

    /// A branch of no output, fed by the medium's tee (a pre-roll ring's audio encoder), until detached; an
    /// error inside it cuts off only it.
    func attachTap(_ bin: Bin, to mediaType: MediaType) throws(CaptureError) -> TeeBranch
    func detachTap(_ tap: TeeBranch)

    /// Links a branch of `output` to the tees: each named sink pad of `bin` to its media's tee, the video one
    /// to `encodedVideo`'s tee when the branch takes H.264 from a shared encoder.
    func attachBranch(_ bin: Bin, of output: CaptureOutput, inputs: [MediaType: String],
                      encodedVideo encoder: SharedVideoEncoder?) throws(CaptureError)

    /// Removes the output's branch (draining it first when `drain` says so, or when nil, when the output
    /// writes a file); the output stays part of the graph. Returns whether the drain completed.
    @discardableResult
    func detachBranch(of output: CaptureOutput, drain: Bool?) -> Bool
}

extension SessionGraph: OutputGraph {
    var videoSelection: FormatSelection? { videoSource?.selection }
}
