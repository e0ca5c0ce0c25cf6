import GStreamerKit
import Synchronization

/// The picture of several cameras as one: a compositor fed by one appsrc per camera. It is the camera of the
/// composite's own capture session (a `CaptureDevice` with this as its backend), so every output works on it as
/// on a camera; each camera's session feeds it through a `CompositeFeed` output. The appsrcs are those of the
/// graph built last (a session builds its graph again at each start).
final class CompositeSource: Sendable {
    let geometry: CompositeGeometry
    private let sources = Locked<[AppSource?]>([])

    init(geometry: CompositeGeometry) {
        self.geometry = geometry
        sources.withLock { $0 = Array(repeating: nil, count: geometry.cells.count) }
    }

    /// The compositor and its appsrcs in gst-launch syntax, its output pinned to `caps`. Cameras not yet
    /// delivering are black; a camera that stops delivering keeps its last picture (its session sends black frames
    /// while it is interrupted). One frame interval of latency lets each camera's frame of a moment arrive.
    func launchDescription(caps: String) -> String {
        let interval = 1_000_000_000 * Int64(geometry.frameRate.denominator) / Int64(max(geometry.frameRate.numerator, 1))
        var description = "compositor name=mix background=black latency=\(interval)"
        for (index, cell) in geometry.cells.enumerated() {
            description += " sink_\(index)::xpos=\(cell.x) sink_\(index)::ypos=\(cell.y)"
                + " sink_\(index)::width=\(cell.width) sink_\(index)::height=\(cell.height) sink_\(index)::zorder=\(index)"
        }
        description += " ! videoconvert ! capsfilter name=caps caps=\"\(caps)\""
        for index in geometry.cells.indices {
            description += " appsrc name=camera\(index) is-live=true format=time do-timestamp=true max-buffers=2 "
                + "leaky-type=downstream block=false ! mix.sink_\(index)"
        }
        return description
    }

    /// Takes the appsrcs of a graph just built from launchDescription.
    func attach(_ bin: Bin) {
        let found = geometry.cells.indices.map { bin.element(named: "camera\($0)").flatMap(AppSource.init) }
        sources.withLock { $0 = found }
    }

    /// One camera's frame, its memory shared, stamped on arrival with the composite's running time. Only once its
    /// appsrc plays: the cameras start first, and a frame pushed into an appsrc not yet started is refused while
    /// its caps, set with it, could be lost in the start's flush; the appsrc keeps them as its own and is never told
    /// again (seen: a picture-in-picture movie without its inset, about one run in sixteen under load).
    func push(_ sample: Sample, from camera: Int) {
        guard let source = sources.withLock({ camera < $0.count ? $0[camera] : nil }),
              source.element.state().current == .playing else { return }
        source.pushForRestamping(sample)
    }
}

/// A camera's frames on their way to a composite: the output a multi-camera session adds to the camera's own
/// session for each composite the camera is in.
final class CompositeFeed: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: as every output; its state is two lets.
    private let composite: CompositeSource
    private let index: Int

    init(_ composite: CompositeSource, camera index: Int) {
        self.composite = composite
        self.index = index
        super.init()
    }

    override func branchDescription() throws(CaptureError) -> String? { Self.appSinkFragment }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        Self.appSink(in: branch)?.setSampleHandler { [weak self] sample in
            guard let self else { return }
            self.composite.push(sample, from: self.index)
        }
    }

    override var displayName: String { "the composite's feed of camera \(index + 1)" }
}
