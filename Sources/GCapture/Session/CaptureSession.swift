import Dispatch
import Foundation
import GStreamerKit
import Synchronization

/// Coordinates inputs and outputs (AVCaptureSession). One GStreamer pipeline per session; every state
/// change runs on the session's own queue, never on the caller's thread unless the method says it blocks.
///
///     let session = CaptureSession()
///     session.beginConfiguration()
///     try session.add(CaptureDeviceInput(device: .default(for: .video)!))
///     try session.add(frames)
///     session.sessionPreset = .hd1280x720
///     try session.commitAndWait()
///     try await session.start()
public final class CaptureSession: Sendable {
    /// Posted with the session as object and the `RuntimeError` under `runtimeErrorUserInfoKey`.
    public static let runtimeErrorNotification = Notification.Name("GCaptureSessionRuntimeError")
    public static let didStartRunningNotification = Notification.Name("GCaptureSessionDidStartRunning")
    public static let didStopRunningNotification = Notification.Name("GCaptureSessionDidStopRunning")
    public static let runtimeErrorUserInfoKey = "error"

    private struct State {
        var batch = ConfigurationBatch(committed: Configuration())
        var isRunning = false
        /// The graph while running.
        var graph: SessionGraph?
        /// While stopped: the committed configuration's graph, built (in NULL, no device opened) so that
        /// start only has to set it playing.
        var prepared: SessionGraph?
    }

    public let name: String
    private let state = Locked(State())
    private let errors = Broadcast<RuntimeError>()
    let sessionEvents = Broadcast<Event>()
    /// The session's queue: every configuration change, start and stop, and every graph event, in order.
    let work: WorkQueue
    var queue: DispatchQueue { work.queue }
    /// Interruptions, from the source's trouble to the device back (Interruptions/InterruptionCoordinator.swift).
    let interruptions: InterruptionCoordinator
    private static let counter = Atomic<Int>(0)
    /// Sessions not yet deinitialized, in the whole process (see CaptureRuntime.shutDownForLeakReport).
    static let alive = Atomic<Int>(0)

    public init(name: String? = nil) {
        let number = Self.counter.add(1, ordering: .relaxed).newValue
        self.name = name ?? "session-\(number)"
        work = WorkQueue(label: "gcapture.\(self.name)")
        interruptions = InterruptionCoordinator(queue: work.queue, sessionName: self.name)
        GStreamer.initialize()
        Self.alive.add(1, ordering: .releasing)
        interruptions.attach(to: self)
    }

    deinit {
        let (graph, prepared) = state.withLock { ($0.graph, $0.prepared) }
        graph?.shutDown()
        prepared?.discard()
        Self.alive.subtract(1, ordering: .releasing)
    }

    // MARK: Inputs and outputs

    public var inputs: [CaptureInput] { state.withLock { $0.batch.current.inputs } }
    public var outputs: [CaptureOutput] { state.withLock { $0.batch.current.outputs } }

    /// Preset changes take effect at commit; outside begin/commitConfiguration they are committed at once,
    /// and a preset the camera cannot do is reported as a runtime error. Use canSetSessionPreset first.
    public var sessionPreset: Preset {
        get { state.withLock { $0.batch.current.preset } }
        set {
            do { try mutate { $0.preset = newValue } } catch { publish(RuntimeError(error: error, output: nil, isFatal: false)) }
        }
    }

    /// Whether the current camera offers the preset (always true without a camera).
    public func canSetSessionPreset(_ preset: Preset) -> Bool {
        guard let device = state.withLock({ $0.batch.current.videoDevice }) else { return true }
        return (try? FormatSelector.select(preset, from: device.formats, deviceName: device.description)) != nil
    }

    /// addInput that throws why the input cannot be added (or, outside begin/commit, applied).
    public func add(_ input: CaptureInput) throws(CaptureError) {
        guard canAddInput(input) else {
            throw .cannotAddInput("the session already has a \(input.mediaType.rawValue) input")
        }
        try mutate { $0.inputs.append(input) }
    }

    /// removeInput that throws why the change was not applied; removing an input the session does not have
    /// changes nothing and succeeds.
    public func remove(_ input: CaptureInput) throws(CaptureError) {
        try mutate { $0.inputs.removeAll { $0 == input } }
    }

    /// addOutput that throws why the output cannot be added (or, outside begin/commit, attached).
    public func add(_ output: CaptureOutput) throws(CaptureError) {
        guard canAddOutput(output) else { throw .cannotAddOutput("\(output.displayName) is already in the session") }
        try mutate { $0.outputs.append(output) }
    }

    /// removeOutput that throws why the change was not applied.
    public func remove(_ output: CaptureOutput) throws(CaptureError) {
        try mutate { $0.outputs.removeAll { $0 == output } }
    }

    // MARK: Configuration

    /// Starts a batch of changes applied together by the matching commitConfiguration (calls nest).
    public func beginConfiguration() {
        state.withLock { $0.batch.begin() }
    }

    /// Applies the batch atomically: on a running session only what changed is rebuilt (a new output is
    /// attached, a new camera or preset swaps the source) while the rest keeps running. If anything cannot be
    /// applied, the previous configuration stays in force and keeps running, and the error says why.
    /// Blocks until applied (a camera swap waits for the new camera's first frame). Like AVFoundation's it
    /// does not throw: a batch that cannot be applied is reported through runtimeErrorNotification and
    /// runtimeErrors() before this returns. `commitAndWait()` (blocking) and `commit()` (async) throw instead.
    public func commitConfiguration() {
        do { try commitAndWait() } catch { publish(RuntimeError(error: error, output: nil, isFatal: false)) }
    }

    /// commitConfiguration that throws why the batch was not applied; blocks until applied. Not a sync
    /// overload of `commit()`: in async code Swift would pick the async one even inside a synchronous
    /// autoclosure (`XCTAssertThrowsError(try session.commit())` does not compile there).
    public func commitAndWait() throws(CaptureError) {
        guard let staged = endConfiguration() else { return }
        try work.sync { () throws(CaptureError) in try self.apply(staged) }
    }

    /// commitAndWait() without blocking the caller.
    public func commit() async throws(CaptureError) {
        guard let staged = endConfiguration() else { return }
        try await work.run { () throws(CaptureError) in try self.apply(staged) }
    }

    /// Commits exactly these inputs, outputs and preset as one batch, as commitAndWait does (a multi-camera
    /// session's part for one camera: it says what the camera's session holds, not what to add).
    func commitAndWait(inputs: [CaptureInput], outputs: [CaptureOutput], preset: Preset) throws(CaptureError) {
        beginConfiguration()
        state.withLock { state in
            state.batch.staged?.inputs = inputs
            state.batch.staged?.outputs = outputs
            state.batch.staged?.preset = preset
        }
        try commitAndWait()
    }

    /// Closes one begin/commit level; returns the staged configuration when it was the outermost.
    private func endConfiguration() -> Configuration? {
        state.withLock { $0.batch.end() }
    }

    private func mutate(_ change: (inout Configuration) -> Void) throws(CaptureError) {
        let implicit = state.withLock { $0.batch.change(change) }
        if implicit { try commitAndWait() }
    }

    // MARK: Running

    public var isRunning: Bool { state.withLock { $0.isRunning } }

    /// Starts capturing and returns when the first frame has left the camera. Blocks the calling thread;
    /// failures are reported through runtimeErrorNotification and runtimeErrors(). Prefer `start()`.
    public func startRunning() {
        do { try work.sync { () throws(CaptureError) in try self.startOnQueue() } }
        catch { publish(RuntimeError(error: error, output: nil, isFatal: true)) }
    }

    /// startRunning that throws why the session did not start (a multi-camera session starts its cameras so,
    /// each on a thread of its own). Blocks the calling thread.
    func startAndWait() throws(CaptureError) {
        try work.sync { () throws(CaptureError) in try self.startOnQueue() }
    }

    /// Stops capturing, finalizing outputs that write files. Blocks the calling thread.
    public func stopRunning() {
        work.sync { self.stopOnQueue() }
    }

    /// Starts capturing without blocking; returns when the first frame has left the camera.
    public func start() async throws(CaptureError) {
        try await work.run { () throws(CaptureError) in try self.startOnQueue() }
    }

    public func stop() async {
        await work.run { self.stopOnQueue() }
    }

    /// Runtime errors from now on (one stream per call).
    public func runtimeErrors() -> AsyncStream<RuntimeError> { errors.makeStream() }

    /// The running graph in Graphviz dot form, for `gcapture inspect` and bug reports.
    public var graphDescription: String? { state.withLock { $0.graph }?.pipeline.dotGraph() }

    /// While stopped, the committed configuration's graph that `start` will play, in dot form: built, in
    /// NULL, no device opened (nil before a commit, or when the configuration could not be built).
    public var preparedGraphDescription: String? { state.withLock { $0.prepared }?.pipeline.dotGraph() }

    /// The running graph, or while stopped the prepared one, in gst-launch syntax: for `gcapture inspect`.
    /// A movie output's recording branch is in it only while it records.
    public var launchDescription: String? { state.withLock { $0.graph ?? $0.prepared }?.pipeline.launchDescription() }

    // MARK: On the session queue

    private func apply(_ configuration: Configuration) throws(CaptureError) {
        let resolved = try configuration.resolve()
        guard let graph = state.withLock({ $0.graph }) else {
            let prepared = try buildGraph(configuration, resolved)
            let replaced = state.withLock { state -> SessionGraph? in
                defer { state.batch.committed = configuration; state.prepared = prepared }
                return state.prepared
            }
            replaced?.discard()
            return
        }
        // Build every new piece before touching the running graph: a failure here changes nothing. Only a source
        // that changes is built: the unchanged microphone's bin, parsed for nothing, cost a camera switch 13-85 ms.
        let oldVideo = graph.videoSource, oldAudio = graph.audioSource
        let videoChanged = oldVideo?.key != resolved.video.map { SourceUnit.key(device: $0.device, selection: $0.selection) }
        let audioChanged = oldAudio?.key != resolved.audio.map { SourceUnit.key(device: $0, selection: nil) }
        let newVideo = !videoChanged ? oldVideo : try resolved.video.map { video throws(CaptureError) in
            try SourceBuilder.videoSource(for: video.device, selection: video.selection, name: graph.makeSourceName(.video),
                                          stallTimeout: resolved.videoStallTimeout)
        }
        let newAudio = !audioChanged ? oldAudio : try resolved.audio.map { device throws(CaptureError) in
            try SourceBuilder.audioSource(for: device, name: graph.makeSourceName(.audio))
        }
        let members = graph.members
        let added = configuration.outputs.filter { output in !members.contains(output) }
        let removed = members.filter { output in !configuration.outputs.contains(output) }
        let branches = try added.map { output throws(CaptureError) in (output, try graph.buildBranch(for: output)) }

        var attachedNow: [CaptureOutput] = []
        do {
            if videoChanged { try graph.setSource(newVideo, for: .video) }
            if audioChanged { try graph.setSource(newAudio, for: .audio) }
            for (output, bin) in branches {
                try graph.join(output, branch: bin, context: makeContext(for: graph))
                attachedNow.append(output)
            }
        } catch {
            for output in attachedNow { graph.leave(output) }
            if audioChanged, graph.audioSource?.key != oldAudio?.key { try? graph.setSource(oldAudio, for: .audio) }
            if videoChanged, graph.videoSource?.key != oldVideo?.key { try? graph.setSource(oldVideo, for: .video) }
            // "The previous one keeps running" only when it really does.
            if graph.videoSource?.key != oldVideo?.key || graph.audioSource?.key != oldAudio?.key {
                throw error
            }
            throw .configurationFailed(reason: error.description, underlying: nil)
        }
        for output in removed { graph.leave(output) }
        if videoChanged, oldVideo?.device != newVideo?.device {
            // Outputs kept running across the switch: what follows the camera (automatic mirroring) hears of it.
            let device = newVideo?.device
            for output in graph.members { output.videoDeviceDidChange(device) }
        }
        interruptions.inputsDidChange(video: videoChanged, audio: audioChanged, in: graph)
        state.withLock { $0.batch.committed = configuration }
    }

    /// Builds the whole graph for a configuration, in NULL: elements made and linked, no device opened.
    /// `videoFiller`: black frames stand in for the camera (which another program holds).
    private func buildGraph(_ configuration: Configuration, _ resolved: ResolvedConfiguration,
                            videoFiller: Bool = false) throws(CaptureError) -> SessionGraph {
        let graph = try SessionGraph(name: name) { [weak self] graph, event in
            guard let self else { return }
            self.queue.async { self.handle(event, from: graph) }
        }
        do {
            if let video = resolved.video {
                let name = graph.makeSourceName(.video)
                try graph.setSource(videoFiller ? SourceBuilder.filler(for: video.device, selection: video.selection, name: name)
                                    : SourceBuilder.videoSource(for: video.device, selection: video.selection, name: name,
                                                                stallTimeout: resolved.videoStallTimeout), for: .video)
            }
            if let audio = resolved.audio {
                try graph.setSource(SourceBuilder.audioSource(for: audio, name: graph.makeSourceName(.audio)), for: .audio)
            }
            for output in configuration.outputs {
                try graph.join(output, branch: graph.buildBranch(for: output), context: makeContext(for: graph))
            }
        } catch {
            graph.discard()
            throw error
        }
        return graph
    }

    private func startOnQueue() throws(CaptureError) {
        guard !state.withLock({ $0.isRunning }) else { return }
        let (configuration, prepared) = state.withLock { state in
            defer { state.prepared = nil }
            return (state.batch.committed, state.prepared)
        }
        // Devices may have come or gone since the graph was prepared: check again, cheaply.
        var graph: SessionGraph
        let resolved: ResolvedConfiguration
        do throws(CaptureError) {
            resolved = try configuration.resolve()
            // A graph prepared for a first available camera that has since come or gone is built again.
            if let prepared, prepared.videoSource?.device == resolved.video?.device { graph = prepared } else {
                prepared?.discard()
                graph = try buildGraph(configuration, resolved)
            }
        } catch {
            prepared?.discard()
            throw error
        }
        var heldElsewhere: CaptureDevice?
        if let (failure, device) = graph.startPlaying() {
            // A camera another program streams from: AVFoundation starts the session interrupted and
            // resumes when it is let go. Black frames keep the outputs running meanwhile.
            guard let device, device.mediaType == .video, resolved.video != nil,
                  InterruptionClassifier.reason(for: failure, from: device) == .videoDeviceInUseByAnotherClient else {
                graph.shutDown()
                throw SessionGraph.startFailure(failure, device: device)
            }
            // Its outputs are not told they stopped (a frame stream would end): they rejoin the next graph.
            graph.discard()
            heldElsewhere = device
            graph = try buildGraph(configuration, resolved, videoFiller: true)
            do { try graph.play() } catch { graph.shutDown(); throw error }
        }
        state.withLock { $0.graph = graph; $0.isRunning = true }
        for output in graph.members { output.sessionDidStartRunning(graph) }
        post(.didStartRunning)
        interruptions.sessionDidStart(graph, cameraHeldElsewhere: heldElsewhere, selection: resolved.video?.selection)
    }

    /// The running graph, if any (read on the session queue for changes).
    var runningGraph: SessionGraph? { state.withLock { $0.graph } }

    func stopOnQueue() {
        interruptions.sessionWillStop()
        guard let graph = state.withLock({ state -> SessionGraph? in
            defer { state.graph = nil; state.isRunning = false }
            return state.graph
        }) else { return }
        graph.shutDown()
        prepareForNextStart()
        post(.didStopRunning)
    }

    /// Builds the graph the next start will play, off the start's critical path.
    private func prepareForNextStart() {
        let configuration = state.withLock { $0.batch.committed }
        guard let resolved = try? configuration.resolve(), let graph = try? buildGraph(configuration, resolved) else { return }
        state.withLock { $0.prepared = graph }
    }

    /// Every event of the running graph comes here, on the session queue. What happens to a source (failed,
    /// silent, under pressure) is the InterruptionCoordinator's to decide; an output's failure detaches its
    /// branch.
    private func handle(_ event: GraphEvent, from source: SessionGraph) {
        // Events of a graph that has since stopped concern nobody.
        guard let graph = state.withLock({ $0.graph }), graph === source else { return }
        switch event {
        case .outputFailed(let output, let error):
            graph.detachBranch(of: output)
            output.didFail(error)
            if !output.recoversFromBranchFailures {
                publish(RuntimeError(error: .outputFailed(output: output.displayName, underlying: error), output: output, isFatal: false))
            }
        case .sourceFailed, .sourceStalled, .sourceResumed, .systemPressureChanged:
            interruptions.handle(event, in: graph)
        }
    }

    private func makeContext(for graph: SessionGraph) -> OutputContext {
        let pipeline = graph.pipeline
        return OutputContext(
            runningTime: { [weak pipeline] in pipeline?.currentRunningTime.map(UInt64.init) },
            videoDevice: { [weak graph] in graph?.currentVideoDevice },
            onSessionQueue: { [weak self, weak graph] body in
                guard let self else { return body(nil) }
                let target = graph
                self.queue.async {
                    let running = self.state.withLock { $0.graph }
                    body(running != nil && running === target ? running : nil)
                }
            })
    }

    /// The session cannot go on: it stops, then says why.
    func fail(_ error: RuntimeError) {
        stopOnQueue()
        publish(error)
    }

    func publish(_ error: RuntimeError) {
        errors.yield(error)
        post(.runtimeError(error))
    }
}

extension CaptureSession {
    /// QoS figures of the running graph: how often elements reported late or dropped buffers.
    var qualityFigures: SessionGraph.QualityFigures? { state.withLock { $0.graph }?.quality }
}
