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
    private(set) var videoSource: SourceUnit?
    private(set) var audioSource: SourceUnit?

    private struct Attached {
        let output: CaptureOutput
        let branch: TeeBranch
        let path: String
        /// The shared encoder the branch takes its video from, if it does.
        let encoder: SharedVideoEncoder?
    }

    private struct BusState {
        /// Every output of the graph, with or without a branch.
        var members: [ObjectIdentifier: CaptureOutput] = [:]
        var branches: [ObjectIdentifier: Attached] = [:]
        /// The H.264 encoders outputs share, while one uses them.
        var encoders: [SharedVideoEncoder] = []
        /// A source on trial (being swapped in): its errors fail the swap instead of the session.
        var trialPath: String?
        var trialError: GStreamerError?
        /// The source the trial's error came from, if it came from one.
        var trialDevice: CaptureDevice?
        var sources: [(path: String, device: CaptureDevice)] = []
        /// Sources (or sources on trial) that posted an error: only their first error counts, and the EOS
        /// their element pushes after it must not reach the tee, or every output would end with them.
        var failedSources: Set<String> = []
    }

    private let busState = Locked(BusState())
    private let qualityCounter = QualityCounter()
    /// What is watched on each running camera source (stalls, lateness).
    let sourceWatches = SourceWatches()
    /// System pressure while the graph plays: measures, and degrades the graph in steps.
    private(set) var pressure: SessionPressure!
    private var emit: (@Sendable (GraphEvent) -> Void)!
    private var branchCounter = 0
    private var sourceCounter = 0
    /// Camera nodes this graph stopped using (DeviceHandles).
    private var camerasLeftBehind = CamerasLeftBehind()
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
        pipeline.bus.setHandler { [weak self] message in
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
        return attributeOutsideEncoders(error, from: message).map { [$0] } ?? []
    }

    private func attributeOutsideEncoders(_ error: GStreamerError, from message: Message) -> GraphEvent? {
        busState.withLock { state -> GraphEvent? in
            if FrameStallWatchdog.isStall(error) {
                // A camera slow to give its first frame (USB cameras can take a second or two) is judged by
                // the trial's own deadline, not the stall interval.
                if let trial = state.trialPath, message.isFrom(inside: trial) { return nil }
                if let watch = sourceWatches.watch(of: message) {
                    watch.markStalled()
                    return nil
                }
            }
            if let trial = state.trialPath, message.isFrom(inside: trial) {
                // A source on trial is done with at its first error; the whole graph on trial (play) is not
                // marked, so a graph that is kept after all still reports its errors.
                if trial != pipeline.path { state.failedSources.insert(trial) }
                if state.trialError == nil {
                    state.trialError = error
                    state.trialDevice = state.sources.first { message.isFrom(inside: $0.path) }?.device
                }
                return nil
            }
            // The rest of what a failed source says (a stream error after its read error), even once it
            // was removed from the graph: it was already dealt with.
            if state.failedSources.contains(where: { message.isFrom(inside: $0) }) { return nil }
            for attached in state.branches.values where message.isFrom(inside: attached.path) {
                let first = !attached.branch.hasFailed
                attached.branch.markFailed()
                return first ? .outputFailed(attached.output, error) : nil
            }
            guard let source = state.sources.first(where: { message.isFrom(inside: $0.path) }) else {
                return .sourceFailed(device: nil, error)
            }
            // A camera that goes away posts three errors (read, allocation, stream): the first says why.
            guard state.failedSources.insert(source.path).inserted else { return nil }
            return .sourceFailed(device: source.device, error)
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
        let failure = onTrial(pipeline.path, waitingForFirstBufferFrom: sources, timeout: timeout) {
            try pipeline.setState(.playing)
        }
        if failure == nil {
            Log.session.debug("\(pipeline.name) playing: first buffer from \(sources.map(\.device.description).joined(separator: ", "))")
            pressure.start()
        }
        return failure
    }

    /// Runs `action`, treating errors from inside `path` as its own failure rather than the session's,
    /// until each of `sources` delivers its first buffer (or `timeout` passes). Returns the failure and the
    /// device it is due to, when known: the one whose element posted it, or the one that stayed silent.
    private func onTrial(_ path: String, waitingForFirstBufferFrom sources: [SourceUnit], timeout: Duration,
                         _ action: () throws -> Void) -> (GStreamerError, CaptureDevice?)? {
        busState.withLock { $0.trialPath = path; $0.trialError = nil; $0.trialDevice = nil }
        defer { busState.withLock { $0.trialPath = nil; $0.trialError = nil; $0.trialDevice = nil } }
        let waiting = sources.map { source in
            let firstBuffer = DispatchSemaphore(value: 0)
            source.bin.staticPad("src")?.addProbe(.buffer) { _ in firstBuffer.signal(); return .remove }
            return (source, firstBuffer)
        }
        let busFailure = { self.busState.withLock { state in state.trialError.map { ($0, state.trialDevice) } } }
        do { try action() } catch {
            return busFailure() ?? ((error as? GStreamerError) ?? GStreamerError(kind: .stateChange, message: "\(error)"), nil)
        }
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        for (source, firstBuffer) in waiting {
            while firstBuffer.wait(timeout: .now() + .milliseconds(10)) != .success {
                if let failure = busFailure() { return failure }
                if DispatchTime.now() > deadline {
                    let what = source.device.mediaType == .audio ? "no audio" : "no frame"
                    return (GStreamerError(kind: .timeout, message: "\(what) within \(timeout)"), source.device)
                }
            }
        }
        return busFailure()
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
        busState.withLock { $0.branches.removeAll(); $0.members.removeAll(); $0.encoders.removeAll() }
    }

    /// Releases a graph that never played (a prepared graph replaced by a newer configuration): its outputs
    /// were never running, so they are not told they stopped.
    func discard() {
        pressure.stop()
        sourceWatches.removeAll()
        pipeline.shutDown()
        busState.withLock { $0.branches.removeAll(); $0.members.removeAll(); $0.encoders.removeAll() }
    }

    var isPlaying: Bool { pipeline.state().current == .playing }

    // MARK: Sources

    enum Slot { case video, audio }

    func makeSourceName(_ slot: Slot) -> String {
        sourceCounter += 1
        return "\(slot == .video ? "video" : "audio")-source-\(sourceCounter)"
    }

    /// Puts `unit` in front of the slot's tee, replacing what was there. When the graph plays, the new
    /// source must deliver its first buffer within `timeout`, or it is removed and the previous one restored.
    func setSource(_ unit: SourceUnit?, for slot: Slot, timeout: Duration = .seconds(4)) throws(CaptureError) {
        // A start still settling (a sink finishing its state change) goes on setting the graph's children to
        // PLAYING, a source stopped and removed here included, which is then disposed while it streams (seen:
        // a crash in 2 runs of 25 of CameraSwitchTests, switching 10 ms after the start). It finishes first.
        if pipeline.state().pending != .voidPending { _ = pipeline.state(timeout: 5 * ClockTime.second) }
        let tee = slot == .video ? videoTee : audioTee
        let previous = slot == .video ? videoSource : audioSource
        let playing = isPlaying
        defer { if let previous, (slot == .video ? videoSource : audioSource)?.bin !== previous.bin { camerasLeftBehind.note(previous) } }
        if let unit { camerasLeftBehind.waitForHandles(on: unit.device, graphName: pipeline.name) }
        if playing, let unit, let previous, !unit.isFiller, !previous.isFiller, unit.device.uniqueID != previous.device.uniqueID {
            try switchOver(from: previous, to: unit, tee: tee, timeout: timeout)
            if slot == .video { videoSource = unit } else { audioSource = unit }
            Log.session.debug("\(pipeline.name): \(slot == .video ? "camera" : "microphone") \(unit.device), switched over from \(previous.device)")
            return
        }
        if let previous { unplug(previous, from: tee) }
        do {
            if let unit { try plug(unit, into: tee, confirmWithin: playing ? timeout : nil) }
        } catch {
            guard let previous else { throw error }
            Log.session.notice("\(pipeline.name): \(error); restarting \(previous.device)")
            // The previous source was stopped (NULL) when it was unplugged: on a playing graph it must be
            // brought back to PLAYING and deliver again, or the session would sit there without frames.
            do {
                try plug(previous, into: tee, confirmWithin: playing ? timeout : nil)
            } catch let restartError {
                if slot == .video { videoSource = nil } else { audioSource = nil }
                throw .deviceFailed(device: unit?.device.description ?? previous.device.description,
                                    underlying: GStreamerError(kind: .stateChange, message: "\(error); and "
                                        + "\(previous.device) could not be restarted: \(restartError)"))
            }
            throw error
        }
        if slot == .video { videoSource = unit } else { audioSource = unit }
        Log.session.debug("""
            \(pipeline.name): \(slot == .video ? "camera" : "microphone") \(unit?.device.description ?? "none")\
            \(playing ? ", swapped in while running" : "")
            """)
    }

    private func plug(_ unit: SourceUnit, into tee: Element, confirmWithin timeout: Duration?) throws(CaptureError) {
        do {
            try pipeline.add(unit.bin)
            try unit.bin.link(to: tee)
            watch(unit)
        } catch {
            sourceWatches.remove(at: unit.bin.path)
            _ = try? unit.bin.setState(.null)
            pipeline.remove(unit.bin)
            throw .deviceFailed(device: unit.device.description, underlying: error as? GStreamerError
                                ?? GStreamerError(kind: .stateChange, message: "\(error)"))
        }
        // The bin's path as messages name it ("/GstPipeline:session/GstBin:video-source-1"), now it is in.
        let path = unit.bin.path
        busState.withLock { _ = $0.failedSources.remove(path) }
        // A live source that fails pushes EOS after its error; the session replaces it rather than ending.
        unit.bin.staticPad("src")?.addProbe(.downstreamEvent) { [busState] info in
            guard info.eventType == .endOfStream, busState.withLock({ $0.failedSources.contains(path) }) else { return .ok }
            return .drop
        }
        guard let timeout else {
            busState.withLock { $0.sources.append((path, unit.device)) }
            return
        }
        unit.bin.baseTime = pipeline.baseTime
        let failure = onTrial(path, waitingForFirstBufferFrom: [unit], timeout: timeout) {
            // Opening the device first (inside the graph, so its error message is heard): a busy or
            // missing device fails here, with its own words.
            try unit.bin.setState(.ready)
            try unit.bin.syncStateWithParent()
        }
        if let (failure, _) = failure {
            sourceWatches.remove(at: path)
            unit.bin.unlink(from: tee)
            _ = try? unit.bin.setState(.null)
            pipeline.remove(unit.bin)
            let reason = SourceBuilder.explanation(of: failure, from: unit.device)
            throw .deviceFailed(device: unit.device.description,
                                underlying: reason.map { GStreamerError(kind: failure.kind, message: $0) } ?? failure)
        }
        busState.withLock { $0.sources.append((path, unit.device)) }
    }

    /// Another device for a slot of a playing graph (a camera switch): the new source starts beside the old one,
    /// unlinked, until it delivers; its first buffer moves the tee from the old source to the new one, on the new
    /// source's streaming thread, and goes on into the outputs; only then is the old one stopped. So a device
    /// that cannot be opened, is busy or delivers nothing costs nothing (the old one never stopped), and the
    /// outputs see a gap of about one frame interval: a recording goes on, a preview keeps its last picture.
    /// Two sources of one device cannot run at once: a new format of the same device goes through unplug and
    /// plug instead.
    private func switchOver(from previous: SourceUnit, to unit: SourceUnit, tee: Element, timeout: Duration) throws(CaptureError) {
        do {
            try pipeline.add(unit.bin)
        } catch {
            throw .deviceFailed(device: unit.device.description, underlying: error as? GStreamerError
                                ?? GStreamerError(kind: .stateChange, message: "\(error)"))
        }
        let path = unit.bin.path, previousPath = previous.bin.path
        busState.withLock { _ = $0.failedSources.remove(path) }
        watch(unit)
        let cut = SourceCut(previous: previous.bin, next: unit.bin, tee: tee) { [busState] path, silenced in
            busState.withLock { state in
                if silenced { state.failedSources.insert(path) } else { state.failedSources.remove(path) }
            }
        }
        let failure = onTrial(path, waitingForFirstBufferFrom: [unit], timeout: timeout) {
            // Blocking probes run before the trial's first-buffer probe: the buffer that confirms the new
            // source is the one that, once the tee is moved, reaches the outputs first.
            unit.bin.staticPad("src")?.addProbe(.blockBuffer) { _ in cut.moveTee() }
            unit.bin.baseTime = pipeline.baseTime
            try unit.bin.setState(.ready)
            try unit.bin.syncStateWithParent()
        }
        if let failure = failure ?? cut.linkFailure.map({ ($0, unit.device) }) {
            // The tee goes back to the old source if the new one took it (it failed after its first buffer).
            cut.abandon()
            sourceWatches.remove(at: path)
            _ = try? unit.bin.setState(.null)
            pipeline.remove(unit.bin)
            let reason = SourceBuilder.explanation(of: failure.0, from: unit.device)
            throw .deviceFailed(device: unit.device.description,
                                underlying: reason.map { GStreamerError(kind: failure.0.kind, message: $0) } ?? failure.0)
        }
        unit.bin.staticPad("src")?.addProbe(.downstreamEvent) { [busState] info in
            guard info.eventType == .endOfStream, busState.withLock({ $0.failedSources.contains(path) }) else { return .ok }
            return .drop
        }
        busState.withLock { $0.sources.append((path, unit.device)) }
        sourceWatches.remove(at: previousPath)
        _ = try? previous.bin.setState(.null)
        pipeline.remove(previous.bin)
        busState.withLock { $0.sources.removeAll { $0.path == previousPath } }
    }

    /// Puts a watch on a camera source: its stalls, its lateness, its frame rate under pressure.
    private func watch(_ unit: SourceUnit) {
        guard unit.device.mediaType == .video, let frameRate = unit.selection?.frameRate else { return }
        sourceWatches.add(SourceWatch(device: unit.device, frameRate: frameRate, withheld: pressure.withheld, onEvent: emit), on: unit.bin)
    }

    private func unplug(_ unit: SourceUnit, from tee: Element) {
        let path = unit.bin.path
        sourceWatches.remove(at: path)
        _ = try? unit.bin.setState(.null)
        unit.bin.unlink(from: tee)
        pipeline.remove(unit.bin)
        busState.withLock { $0.sources.removeAll { $0.path == path } }
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

    /// The shared encoders running now (for tests that make one misbehave).
    var sharedEncoders: [SharedVideoEncoder] { busState.withLock { $0.encoders } }

    /// Removes a shared encoder no branch takes from any more.
    private func release(_ encoder: SharedVideoEncoder?) {
        guard let encoder, encoder.users == 0 else { return }
        busState.withLock { $0.encoders.removeAll { $0 === encoder } }
        encoder.remove(from: pipeline)
    }

    /// The camera feeding the graph now (read from any thread).
    var currentVideoDevice: CaptureDevice? {
        busState.withLock { state in state.sources.last { $0.device.mediaType == .video }?.device }
    }

    func source(for slot: Slot) -> SourceUnit? { slot == .video ? videoSource : audioSource }

    /// Whether the session has a source for the media type now.
    func hasSource(_ mediaType: MediaType) -> Bool { mediaType == .video ? videoSource != nil : audioSource != nil }

    /// Removes the output's branch (draining it first when the output writes a file); it stays a member.
    @discardableResult
    func detachBranch(of output: CaptureOutput, drain: Bool? = nil) -> Bool {
        guard let attached = busState.withLock({ $0.branches.removeValue(forKey: ObjectIdentifier(output)) }) else { return true }
        let drained = attached.branch.detach(drain: drain ?? output.drainsOnDetach)
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
