import Dispatch
import GStreamerKit

/// The graph's sources: one slot per medium in front of its tee, what each slot holds, and how a source is
/// plugged in, swapped out or switched over while the graph plays. Owns the sources' part of the bus
/// bookkeeping (which sources run, which failed, the source on trial); SessionGraph hands it the errors that
/// are not a shared encoder's (`attribute`) and keeps the outputs' part.
///
/// @unchecked Sendable: the slots, the name counter and the cameras left behind are touched only on the
/// session's queue; what the bus handler and the sources' probes read from streaming threads (`busState`,
/// `sourceWatches`) is behind locks.
final class SourceSlots: @unchecked Sendable {
    enum Slot { case video, audio }

    private let pipeline: Pipeline
    private let videoTee: Element
    private let audioTee: Element
    private(set) var videoSource: SourceUnit?
    private(set) var audioSource: SourceUnit?

    private struct BusState {
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
    /// What is watched on each running camera source (stalls, lateness).
    let sourceWatches = SourceWatches()
    /// Camera frames held back under pressure (SessionPressure), counted by each camera's watch.
    private let withheld: FrameCounter
    private let emit: @Sendable (GraphEvent) -> Void
    private var sourceCounter = 0
    /// Camera nodes this graph stopped using (DeviceHandles).
    private var camerasLeftBehind = CamerasLeftBehind()

    init(pipeline: Pipeline, videoTee: Element, audioTee: Element, withheld: FrameCounter,
         emit: @escaping @Sendable (GraphEvent) -> Void) {
        (self.pipeline, self.videoTee, self.audioTee, self.withheld, self.emit) = (pipeline, videoTee, audioTee, withheld, emit)
    }

    func source(for slot: Slot) -> SourceUnit? { slot == .video ? videoSource : audioSource }

    /// The camera feeding the graph now (read from any thread).
    var currentVideoDevice: CaptureDevice? {
        busState.withLock { state in state.sources.last { $0.device.mediaType == .video }?.device }
    }

    // MARK: The bus

    /// What the sources make of an error: `settled` with the event to report (nil: none, it was dealt
    /// with), or `elsewhere` when it did not come from a source (an output's branch, or the graph itself).
    enum Attribution {
        case settled(GraphEvent?)
        case elsewhere
    }

    /// Runs on the posting (streaming) thread: only flags and bookkeeping here. Branches and sources have
    /// paths of their own (output-N, video-source-N), so the caller asking its branches only when an error
    /// is `elsewhere` is the order the checks always had.
    func attribute(_ error: GStreamerError, from message: Message) -> Attribution {
        busState.withLock { state -> Attribution in
            if let trial = state.trialPath, message.isFrom(inside: trial) {
                // A source on trial is done with at its first error; the whole graph on trial (play) is not
                // marked, so a graph that is kept after all still reports its errors.
                if trial != pipeline.path { state.failedSources.insert(trial) }
                if state.trialError == nil {
                    state.trialError = error
                    state.trialDevice = state.sources.first { message.isFrom(inside: $0.path) }?.device
                }
                return .settled(nil)
            }
            // The rest of what a failed source says (a stream error after its read error), even once it
            // was removed from the graph: it was already dealt with.
            if state.failedSources.contains(where: { message.isFrom(inside: $0) }) { return .settled(nil) }
            guard let source = state.sources.first(where: { message.isFrom(inside: $0.path) }) else { return .elsewhere }
            // A camera that goes away posts three errors (read, allocation, stream): the first says why.
            guard state.failedSources.insert(source.path).inserted else { return .settled(nil) }
            return .settled(.sourceFailed(device: source.device, error))
        }
    }

    /// Runs `action`, treating errors from inside `path` as its own failure rather than the session's,
    /// until each of `sources` delivers its first buffer (or `timeout` passes). Returns the failure and the
    /// device it is due to, when known: the one whose element posted it, or the one that stayed silent.
    func onTrial(_ path: String, waitingForFirstBufferFrom sources: [SourceUnit], timeout: Duration,
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
        let deadline = DispatchTime.now() + timeout.dispatchInterval
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

    // MARK: Plugging

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
        // Time goes on from the old source's last frame (a filler's, a camera's before its new format), as across a
        // switch (SourceCut): a camera's first frames may be stamped before it. Only on a playing graph: a graph
        // started again counts its time from zero.
        let previousLastTime = playing ? previous.flatMap { sourceWatches.watch(at: $0.bin.path)?.lastDeliveredTime } : nil
        if let previous { unplug(previous, from: tee) }
        do {
            if let unit { try plug(unit, into: tee, confirmWithin: playing ? timeout : nil, after: previousLastTime) }
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

    /// `lastTime`: frames stamped at or before it stay out (the last frame the source before this one delivered).
    private func plug(_ unit: SourceUnit, into tee: Element, confirmWithin timeout: Duration?, after lastTime: ClockTime? = nil) throws(CaptureError) {
        do {
            try pipeline.add(unit.bin)
            try unit.bin.link(to: tee)
            if let lastTime, let output = unit.bin.staticPad("src") { SourceCut.dropFrames(on: output, notAfter: lastTime) }
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
        let previousWatch = sourceWatches.watch(at: previousPath)
        let cut = SourceCut(previous: previous.bin, next: unit.bin, tee: tee,
                            previousLastTime: { previousWatch?.lastDeliveredTime }) { [busState] path, silenced in
            busState.withLock { state in
                if silenced { state.failedSources.insert(path) } else { state.failedSources.remove(path) }
            }
        }
        let failure = onTrial(path, waitingForFirstBufferFrom: [unit], timeout: timeout) {
            // Blocking probes run before the trial's first-buffer probe: the buffer that confirms the new
            // source is the first that, once the tee is moved, reaches the outputs (SourceCut drops the ones
            // not `cutSpacing` newer than the old source's last, but retimes a first one only a little older).
            unit.bin.staticPad("src")?.addProbe(.blockBuffer) { info in cut.moveTee(info) }
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
        sourceWatches.add(SourceWatch(device: unit.device, frameRate: frameRate, stallTimeout: unit.stallTimeout, withheld: withheld,
                                      onEvent: emit), on: unit.bin)
    }

    private func unplug(_ unit: SourceUnit, from tee: Element) {
        let path = unit.bin.path
        sourceWatches.remove(at: path)
        _ = try? unit.bin.setState(.null)
        unit.bin.unlink(from: tee)
        pipeline.remove(unit.bin)
        busState.withLock { $0.sources.removeAll { $0.path == path } }
    }

    private var isPlaying: Bool { pipeline.state().current == .playing }
}
