import Dispatch
import GStreamerKit
import Synchronization

/// What the graph reports from its bus, already attributed to a part of the session.
enum GraphEvent: Sendable {
    /// An output's branch failed; it has been cut off from the tee and must be detached.
    case outputFailed(CaptureOutput, GStreamerError)
    /// A source (or the shared part of the graph) failed: frames have stopped.
    case sourceFailed(device: CaptureDevice?, GStreamerError)
    /// The camera delivered nothing for its frame-stall timeout (FrameStallWatchdog); the graph is intact
    /// and the source keeps waiting for frames.
    case sourceStalled(device: CaptureDevice)
    /// A stalled camera delivers again.
    case sourceResumed(device: CaptureDevice)
    /// The camera's system pressure changed, and with it what the session does about it (SessionPressure).
    case systemPressureChanged(device: CaptureDevice, CaptureDevice.SystemPressureState, CaptureSession.PressureResponse,
                               previous: CaptureSession.PressureResponse)
}

/// The session's GStreamer graph while it runs:
///
///     video source bin ─▶ tee ─┬─▶ queue ▶ output branch (one bin per output)
///                              ├─▶ queue ▶ output branch
///                              └─▶ H.264 encoder ─▶ tee ─┬─▶ output branch (a recording, a stream)
///     audio source bin ─▶ tee ─┬─▶ ...                    └─▶ output branch
///
/// Every change is local: an output attaches to or detaches from a tee pad, a source is swapped in front of
/// its tee; nothing else stops. Methods run on the session's queue; only the bus handler runs elsewhere.
final class SessionGraph: @unchecked Sendable {
    // @unchecked Sendable: its vars (sources, counters, `pressure`, `emit`) change only on the session's queue, as
    // AVFoundation's session queue confines a session's graph; what the bus handler reads from streaming threads
    // is in `busState` (Locked) or Sendable lets.
    let pipeline: Pipeline
    private let videoTee: Element
    private let audioTee: Element
    /// The sources in front of the tees, and their part of the bus bookkeeping. Set once in init, as soon as
    /// `pressure` and `emit` exist (the camera watches need both), before the bus handler is.
    private var slots: SourceSlots!

    private struct Attached {
        let output: CaptureOutput
        let branch: TeeBranch
        let path: String
        /// The shared encoder the branch takes its video from, if it does.
        let encoder: SharedVideoEncoder?
    }

    /// The outputs' part of the bus bookkeeping (the sources' is SourceSlots').
    private struct BusState {
        /// Every output of the graph, with or without a branch.
        var members: [ObjectIdentifier: CaptureOutput] = [:]
        var branches: [ObjectIdentifier: Attached] = [:]
        /// The H.264 encoders outputs share, while one uses them.
        var encoders: [SharedVideoEncoder] = []
        /// Branches that belong to no output (a pre-roll ring's audio encoder), by their bins' paths.
        var taps: [String: TeeBranch] = [:]
    }

    private let busState = Locked(BusState())
    private let qualityCounter = QualityCounter()
    /// System pressure while the graph plays: measures, and degrades the graph in steps.
    private(set) var pressure: SessionPressure!
    private var emit: (@Sendable (GraphEvent) -> Void)!
    private var branchCounter = 0
    /// Every video buffer that entered the tee (a filler's too): the proof that frames flow at all.
    let videoFramesIn = FrameCounter()

    init(name: String, onEvent: @escaping @Sendable (SessionGraph, GraphEvent) -> Void) throws(CaptureError) {
        pipeline = Pipeline(name: name)
        do {
            videoTee = try Element.make("tee", name: "video-tee")
            audioTee = try Element.make("tee", name: "audio-tee")
            for tee in [videoTee, audioTee] {
                try tee.set("allow-not-linked", true)
                try pipeline.add(tee)
            }
        } catch {
            throw .missingPlugin("tee")
        }
        // The counter, not the graph: a probe holding the graph would keep its pipeline alive.
        let framesIn = videoFramesIn
        _ = videoTee.staticPad("sink")?.addProbe(.buffer) { _ in
            framesIn.count.add(1, ordering: .relaxed)
            return .ok
        }
        // One clock for every source, outliving any device (pulsesrc's clock dies with its server).
        pipeline.useClock(.system)
        emit = { [weak self] event in if let self { onEvent(self, event) } }
        pressure = SessionPressure(graph: self, emit: emit)
        slots = SourceSlots(pipeline: pipeline, videoTee: videoTee, audioTee: audioTee, withheld: pressure.withheld, emit: emit)
        pipeline.bus.setHandler(for: [.error, .warning, .qos]) { [weak self] message in
            guard let self else { return }
            switch message.kind {
            case .error(let error):
                // Every error reaches the caller (thrown, or as a runtime error): the log line is the detail
                // behind it, so it stays below the default warning level (the CLI's error is one sentence).
                Log.session.notice("\(name): \(error.message)", metadata: error.logMetadata)
                for event in self.attribute(error, from: message) { onEvent(self, event) }
            case .warning(let warning):
                Log.session.warning("\(name): \(warning.message)", metadata: warning.logMetadata)
            case .qos(let qos):
                self.qualityCounter.count(qos, from: message.sourcePath ?? "?")
            default:
                break
            }
        }
    }

    /// QoS messages so far, and the buffers the elements that posted them say they dropped.
    var quality: QualityFigures { qualityCounter.figures }

    /// How full the fullest encoder's raw video input queue is (0...1): an encoder falling behind.
    func recordingQueueFill() -> Double {
        let (bins, encoders) = busState.withLock { state in
            (state.branches.values.filter { $0.encoder == nil }.map(\.branch.bin), state.encoders)
        }
        let ownEncoders = bins.compactMap { $0.element(named: "video_in")?.queueTimeFill }
        return (ownEncoders + encoders.compactMap(\.inputQueueFill)).max() ?? 0
    }

    /// Runs on the posting (streaming) thread: only flags and bookkeeping here.
    private func attribute(_ error: GStreamerError, from message: Message) -> [GraphEvent] {
        // A shared encoder that fails fails every output taking from it; nothing else.
        let failedEncoder = busState.withLock { $0.encoders.first { message.isFrom(inside: $0.path) } }
        if let failedEncoder {
            failedEncoder.branch.markFailed()
            return busState.withLock { state in
                state.branches.values.filter { $0.encoder === failedEncoder && !$0.branch.hasFailed }.map { attached in
                    attached.branch.markFailed()
                    return .outputFailed(attached.output, error)
                }
            }
        }
        // A tap that fails is cut off, and only it: whoever reads it sees nothing more.
        if let tap = busState.withLock({ $0.taps.first { message.isFrom(inside: $0.key) }?.value }) {
            if !tap.hasFailed { Log.session.warning("\(tap.bin.name) failed: \(error.message)") }
            tap.markFailed()
            return []
        }
        return attributeOutsideEncoders(error, from: message).map { [$0] } ?? []
    }

    private func attributeOutsideEncoders(_ error: GStreamerError, from message: Message) -> GraphEvent? {
        if case .settled(let event) = slots.attribute(error, from: message) { return event }
        return busState.withLock { state -> GraphEvent? in
            for attached in state.branches.values where message.isFrom(inside: attached.path) {
                let first = !attached.branch.hasFailed
                attached.branch.markFailed()
                return first ? .outputFailed(attached.output, error) : nil
            }
            return .sourceFailed(device: nil, error)
        }
    }

    // MARK: Running

    /// Starts the graph and returns once the first buffer has left every source: a microphone that cannot
    /// be opened (a source the audio server does not have, or no server) fails the start as surely as a
    /// camera, before anything is recorded. Errors name the device they came from.
    func play(timeout: Duration = .seconds(5)) throws(CaptureError) {
        guard let (failure, device) = startPlaying(timeout: timeout) else { return }
        throw Self.startFailure(failure, device: device)
    }

    static func startFailure(_ failure: GStreamerError, device: CaptureDevice?) -> CaptureError {
        if let device {
            return .startFailed(reason: SourceBuilder.openFailure(of: device, failure), underlying: nil)
        }
        return .startFailed(reason: "the pipeline failed", underlying: failure)
    }

    /// play() that hands back the failure as GStreamer said it, and the device it is due to, for a caller
    /// that classifies it (a camera held by another program starts the session interrupted).
    func startPlaying(timeout: Duration = .seconds(5)) -> (GStreamerError, CaptureDevice?)? {
        let sources = [videoSource, audioSource].compactMap { $0 }
        // The tick is joined while the camera makes its first frame: not before PLAYING, where its 0.02-0.03 ms
        // (measured) would delay the camera's start, and not after the first buffer, the start's busiest moment
        // (the first frame's way to the outputs, the caller's wake-up), where making the timer would wake one
        // more thread. Nothing is checked before the first frame (a stall needs a last frame; pressure waits out
        // a grace second). A start that fails leaves it with the graph's shutDown or discard.
        let failure = slots.onTrial(pipeline.path, waitingForFirstBufferFrom: sources, timeout: timeout) {
            try pipeline.setState(.playing)
            pressure.start()
        }
        if failure == nil {
            Log.session.debug("\(pipeline.name) playing: first buffer from \(sources.map(\.device.description).joined(separator: ", "))")
        }
        return failure
    }

    func shutDown() {
        pressure.stop()
        sourceWatches.removeAll()
        let quality = quality
        if quality.messages > 0 {
            Log.session.notice("\(pipeline.name) stopped after \(quality.messages) QoS messages; elements dropped \(quality.droppedBuffers) buffers")
        }
        let (members, attached) = busState.withLock { (Array($0.members.values), Array($0.branches.values)) }
        // Each drain's outcome goes to its output: one that timed out left a file that was never finalized.
        var drained: [ObjectIdentifier: Bool] = [:]
        for item in attached where item.output.drainsOnDetach {
            drained[ObjectIdentifier(item.output)] = detachBranch(of: item.output)
        }
        pipeline.shutDown()
        for output in members { output.didDetach(drained: drained[ObjectIdentifier(output)] ?? true) }
        busState.withLock { $0.branches.removeAll(); $0.members.removeAll(); $0.encoders.removeAll(); $0.taps.removeAll() }
    }

    /// Releases a graph that never played (a prepared graph replaced by a newer configuration): its outputs
    /// were never running, so they are not told they stopped.
    func discard() {
        pressure.stop()
        sourceWatches.removeAll()
        pipeline.shutDown()
        busState.withLock { $0.branches.removeAll(); $0.members.removeAll(); $0.encoders.removeAll(); $0.taps.removeAll() }
    }

    var isPlaying: Bool { pipeline.state().current == .playing }

    // MARK: Sources (SourceSlots)

    typealias Slot = SourceSlots.Slot

    var videoSource: SourceUnit? { slots.videoSource }
    var audioSource: SourceUnit? { slots.audioSource }
    func source(for slot: Slot) -> SourceUnit? { slots.source(for: slot) }
    /// The camera feeding the graph now (read from any thread).
    var currentVideoDevice: CaptureDevice? { slots.currentVideoDevice }
    /// What is watched on each running camera source (stalls, lateness).
    var sourceWatches: SourceWatches { slots.sourceWatches }

    /// Whether the session has a source for the media type now.
    func hasSource(_ mediaType: MediaType) -> Bool { mediaType == .video ? videoSource != nil : audioSource != nil }

    func makeSourceName(_ slot: Slot) -> String { slots.makeSourceName(slot) }

    /// Puts `unit` in front of the slot's tee, replacing what was there (SourceSlots.setSource).
    func setSource(_ unit: SourceUnit?, for slot: Slot, timeout: Duration = .seconds(4)) throws(CaptureError) {
        try slots.setSource(unit, for: slot, timeout: timeout)
    }

    // MARK: Outputs

    var members: [CaptureOutput] { busState.withLock { Array($0.members.values) } }

    /// Builds the output's permanent branch behind a guard queue, if it has one. Nothing is added yet.
    func buildBranch(for output: CaptureOutput) throws(CaptureError) -> Bin? {
        guard let fragment = try output.branchDescription() else { return nil }
        let description = "queue name=guard leaky=downstream max-size-buffers=\(output.queueDepth) "
            + "max-size-bytes=0 max-size-time=0 ! " + fragment
        let bin = try makeBin(description, for: output)
        if output.mediaType == .video { pressure.thinFrames(enteringBranch: bin, of: output) }
        return bin
    }

    /// Parses a branch bin with a name unique in this graph.
    func makeBin(_ description: String, for output: CaptureOutput, ghostUnlinkedPads: Bool = true) throws(CaptureError) -> Bin {
        branchCounter += 1
        do {
            let bin = try Bin.parse(description, ghostUnlinkedPads: ghostUnlinkedPads)
            try bin.set("name", "output-\(branchCounter)")
            return bin
        } catch let error as GStreamerError {
            throw .configurationFailed(reason: "cannot build the branch of \(output.displayName)", underlying: error)
        } catch {
            throw .configurationFailed(reason: "cannot build the branch of \(output.displayName): \(error)", underlying: nil)
        }
    }

    /// Makes the output part of the graph, with its permanent branch if it has one.
    func join(_ output: CaptureOutput, branch bin: Bin?, context: OutputContext) throws(CaptureError) {
        // Callbacks first, so no frame arrives before the output can take it.
        output.didJoin(context, branch: bin)
        if let bin {
            do throws(CaptureError) {
                try attachBranch(bin, of: output, inputs: [output.mediaType: "sink"])
            } catch {
                output.didDetach()
                throw error
            }
        }
        busState.withLock { $0.members[ObjectIdentifier(output)] = output }
    }

    /// Links a branch of `output` to the tees: each named sink pad of `bin` to its media's tee, the video
    /// one to `encodedVideo`'s tee when the branch takes H.264 from a shared encoder (which it then uses
    /// until it is detached).
    func attachBranch(_ bin: Bin, of output: CaptureOutput, inputs: [MediaType: String],
                      encodedVideo encoder: SharedVideoEncoder? = nil) throws(CaptureError) {
        let links = inputs.map { input in
            (tee: input.key == .audio ? audioTee : encoder?.tee ?? videoTee, sinkPad: input.value)
        }
        // Raw camera frames kept by the branch are its own (DeviceFrameCopy); added before any frame flows.
        if encoder == nil, output.keepsFrames, let video = inputs[.video], let pad = bin.staticPad(video) {
            DeviceFrameCopy.copyLentFrames(enteringThrough: pad)
        }
        do {
            let branch = try TeeBranch(attaching: bin, inputs: links, in: pipeline)
            encoder?.users += 1
            busState.withLock {
                $0.branches[ObjectIdentifier(output)] = Attached(output: output, branch: branch, path: bin.path, encoder: encoder)
            }
        } catch {
            release(encoder)
            throw .configurationFailed(reason: "cannot attach \(output.displayName)", underlying: error as? GStreamerError)
        }
    }

    // MARK: Shared encoders

    /// An H.264 encode of the camera that gives `request` what it asks: a running one where one does
    /// (not failed), else a new one. Unused until a branch is attached to it; then it stays while one is.
    func sharedVideoEncoder(for request: VideoEncodeRequest) throws(CaptureError) -> SharedVideoEncoder {
        let running = busState.withLock { $0.encoders }
        if let match = running.first(where: { !$0.branch.hasFailed && $0.encode.satisfies(request) }) { return match }
        branchCounter += 1
        let encoder = try SharedVideoEncoder(request, fedBy: videoTee, in: pipeline, name: "encoder-\(branchCounter)")
        busState.withLock { $0.encoders.append(encoder) }
        return encoder
    }

    func holdSharedEncoder(_ encoder: SharedVideoEncoder) { encoder.users += 1 }

    func releaseSharedEncoder(_ encoder: SharedVideoEncoder) {
        encoder.users -= 1
        release(encoder)
    }

    /// Links `bin`'s "sink" pad to the medium's tee, for no output: what it makes is read where it ends (a probe
    /// before a fakesink). Until `detachTap`.
    func attachTap(_ bin: Bin, to mediaType: MediaType) throws(CaptureError) -> TeeBranch {
        do {
            let tap = try TeeBranch(attaching: bin, to: mediaType == .audio ? audioTee : videoTee, in: pipeline)
            busState.withLock { $0.taps[bin.path] = tap }
            return tap
        } catch {
            throw .configurationFailed(reason: "cannot attach \(bin.name)", underlying: error as? GStreamerError)
        }
    }

    func detachTap(_ tap: TeeBranch) {
        busState.withLock { state in state.taps = state.taps.filter { $0.value !== tap } }
        tap.detach(drain: false)
    }

    /// The shared encoders running now (for tests that make one misbehave).
    var sharedEncoders: [SharedVideoEncoder] { busState.withLock { $0.encoders } }

    /// Removes a shared encoder no branch takes from any more.
    private func release(_ encoder: SharedVideoEncoder?) {
        guard let encoder, encoder.users == 0 else { return }
        busState.withLock { $0.encoders.removeAll { $0 === encoder } }
        encoder.remove(from: pipeline)
    }

    /// Removes the output's branch (draining it first when the output writes a file); it stays a member.
    @discardableResult
    func detachBranch(of output: CaptureOutput, drain: Bool? = nil) -> Bool {
        guard let attached = busState.withLock({ $0.branches.removeValue(forKey: ObjectIdentifier(output)) }) else { return true }
        let drained = attached.branch.detach(drain: drain ?? output.drainsOnDetach, limit: output.drainLimit,
                                             endingOwnInputs: output.branchWillDetach)
        if let encoder = attached.encoder {
            encoder.users -= 1
            release(encoder)
        }
        return drained
    }

    /// Takes the output out of the graph.
    func leave(_ output: CaptureOutput) {
        let drained = detachBranch(of: output)
        guard busState.withLock({ $0.members.removeValue(forKey: ObjectIdentifier(output)) }) != nil else { return }
        output.didDetach(drained: drained)
    }
}
