import Dispatch
import Foundation
import GStreamerKit
import Synchronization

/// The session's interrupted inputs and when to try each again. Read from any thread (isInterrupted);
/// changed only on the session's queue.
final class SourceRecovery: Sendable {
    typealias Reason = CaptureSession.InterruptionReason

    struct Interruption: Sendable {
        let reason: Reason
        /// The device to find again, by its stable uniqueID (it may come back under another /dev/videoN), or
        /// the first available camera (any camera will do).
        var device: CaptureDevice
        var selection: FormatSelection?
        let since: ContinuousClock.Instant
        var attempts = 0
        /// Bumped by every attempt: a retry scheduled before it is stale and does nothing.
        var generation = 0
    }

    private struct State {
        var active: [SessionGraph.Slot: Interruption] = [:]
        var deviceEvents: Task<Void, Never>?
    }

    private let state = Locked(State())

    deinit { state.withLock { $0.deviceEvents }?.cancel() }

    /// Retry delays, from the interruption or the previous failed attempt. Fast at first, because the common
    /// interruptions end quickly: vivid (like a USB camera whose link reset) is back the moment the last
    /// handle closes, a program that borrowed the camera for a snapshot lets go within a second, an audio
    /// server restarted by systemd answers within one. Then every 2 s: each attempt opens the device and
    /// briefly swaps out the filler, so a camera that stays away should not be probed more often than
    /// that. CameraX retries every 0.7 s then 1–4 s; ours starts sooner because a replug announced by
    /// udev (wasConnected) is tried at once anyway, and the schedule only covers returns nobody announces
    /// (vivid's disconnect, a busy device being released, the audio server).
    static let retryDelays: [Duration] = [.milliseconds(250), .milliseconds(500), .seconds(1)]
    static let steadyRetryDelay: Duration = .seconds(2)

    static func delay(beforeAttempt attempt: Int) -> Duration {
        attempt < retryDelays.count ? retryDelays[attempt] : steadyRetryDelay
    }

    var reasons: [Reason] {
        state.withLock { state in
            [SessionGraph.Slot.video, .audio].compactMap { state.active[$0]?.reason }
        }
    }

    func interruption(of slot: SessionGraph.Slot) -> Interruption? { state.withLock { $0.active[slot] } }

    /// Records the interruption; false when the slot is interrupted already (its first reason stands).
    func begin(_ slot: SessionGraph.Slot, reason: Reason, device: CaptureDevice, selection: FormatSelection?) -> Bool {
        state.withLock { state in
            guard state.active[slot] == nil else { return false }
            state.active[slot] = Interruption(reason: reason, device: device, selection: selection, since: .now)
            return true
        }
    }

    /// Counts an attempt; returns its number and generation, or nil when the slot is no longer
    /// interrupted or `generation` (of a scheduled retry) is stale.
    func startAttempt(_ slot: SessionGraph.Slot, scheduledAs generation: Int?) -> (attempt: Int, generation: Int)? {
        state.withLock { state in
            guard var interruption = state.active[slot] else { return nil }
            if let generation, generation != interruption.generation { return nil }
            interruption.attempts += 1
            interruption.generation += 1
            state.active[slot] = interruption
            return (interruption.attempts, interruption.generation)
        }
    }

    /// Waits for another device from now on, the interruption's reason and time kept; false when the slot
    /// is not interrupted.
    func retarget(_ slot: SessionGraph.Slot, to device: CaptureDevice, selection: FormatSelection?) -> Bool {
        state.withLock { state in
            guard state.active[slot] != nil else { return false }
            state.active[slot]?.device = device
            state.active[slot]?.selection = selection
            return true
        }
    }

    func end(_ slot: SessionGraph.Slot) -> Interruption? {
        state.withLock { $0.active.removeValue(forKey: slot) }
    }

    /// The slots interrupted for this device (a camera's too when any camera will do).
    func slots(waitingFor device: CaptureDevice) -> [SessionGraph.Slot] {
        let anyCamera = device.mediaType == .video && !device.deviceType.isTest
        return state.withLock { state in
            state.active.filter { $0.value.device.uniqueID == device.uniqueID || (anyCamera && $0.value.device.isFirstAvailableCamera) }
                .map(\.key)
        }
    }

    func watchDevices(_ task: Task<Void, Never>) {
        let previous = state.withLock { state in
            defer { state.deviceEvents = task }
            return state.deviceEvents
        }
        previous?.cancel()
    }

    /// Forgets every interruption and stops watching devices (the session stopped).
    func cancelAll() {
        let task = state.withLock { state in
            defer { state.active.removeAll(); state.deviceEvents = nil }
            return state.deviceEvents
        }
        task?.cancel()
    }

    /// The interrupted device as it is now, if it looks back: listed again under its stable id (perhaps
    /// at another node), and for a camera, its node opens (vivid and unplugged drivers answer ENODEV).
    static func findAgain(_ device: CaptureDevice) -> CaptureDevice? {
        switch device.backend {
        case .testCamera, .testMicrophone:
            return device
        case .firstAvailableCamera(let position):
            return CaptureDevice.firstCameraPresent(preferring: position).flatMap(findAgain)
        case .pulse:
            return CaptureDevice.device(withUniqueID: device.uniqueID) ?? device
        case .provided:
            return DeviceRegistry.shared.device(withUniqueID: device.uniqueID)
        case .v4l2:
            let registry = DeviceRegistry.shared
            // Without a device monitor nobody would list it again: the node it had is all there is.
            let current = registry.devices.first { $0.uniqueID == device.uniqueID }
                ?? (registry.discoveryError != nil ? device : nil)
            guard let current, let node = current.nodePath else { return nil }
            let fd = open(node, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            close(fd)
            return current
        }
    }
}

extension SourceBuilder {
    /// A live source standing in for an interrupted one, delivering what it delivered (black frames in its
    /// caps, silence in the session's audio format) on the same clock, so outputs and a recording keep one
    /// timeline through the gap. Its device is the interrupted one: the slot still belongs to that device
    /// (a commit of the same configuration changes nothing), and frames in flight keep their metadata.
    static func filler(for device: CaptureDevice, selection: FormatSelection?, name: String) throws(CaptureError) -> SourceUnit {
        let description: String
        if let selection {
            // A compressed camera's source decodes (jpegdec gives I420): the filler gives what leaves the bin.
            let caps = selection.format.isCompressed
                ? "video/x-raw,format=I420,width=\(selection.format.width),height=\(selection.format.height),framerate=\(selection.frameRate)"
                : selection.caps
            description = "videotestsrc is-live=true pattern=black ! capsfilter caps=\"\(caps)\""
        } else {
            description = "audiotestsrc is-live=true wave=silence ! audioconvert ! audioresample ! capsfilter caps=\"\(audioCaps)\""
        }
        do {
            let bin = try Bin.parse(description)
            try bin.set("name", name)
            // Marked as GStreamer marks filler (GST_BUFFER_FLAG_GAP): a photo must not be of it, and a
            // recording that ends at the interruption must not take it in.
            bin.staticPad("src")?.addProbe(.buffer) { info in
                info.markBufferAsGap()
                return .ok
            }
            return SourceUnit(device: device, selection: selection, bin: bin, isFiller: true)
        } catch {
            throw .missingPlugin("videotestsrc/audiotestsrc (gst-plugins-base) to fill the gap of an interrupted device: \(error)")
        }
    }
}

extension CaptureSession {
    /// When an interrupted device is tried again: after each of these delays in turn, then every
    /// `recoveryRetryInterval` (and at once when udev announces it again).
    public static var recoveryRetryDelays: [Duration] { SourceRecovery.retryDelays }
    public static var recoveryRetryInterval: Duration { SourceRecovery.steadyRetryDelay }

    /// Whether an input is interrupted now: its device has gone (or is held elsewhere) and the session, still
    /// running, fills the gap and is trying to get it back.
    public var isInterrupted: Bool { !recovery.reasons.isEmpty }

    /// Why, for each interrupted input (camera first).
    public var interruptionReasons: [InterruptionReason] { recovery.reasons }

    /// The one way an input gets interrupted, whoever noticed (a source's error, udev, a stall watchdog,
    /// system pressure): on the session queue. The outputs hear it first, then the app; the failed source is
    /// stopped (closing the device, which a driver needs before it can come back) and a filler takes its
    /// place in front of the tee; retries start. Does nothing when the slot is interrupted already.
    func interrupt(_ slot: SessionGraph.Slot, reason: InterruptionReason) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let graph = runningGraph, let source = graph.source(for: slot), !source.isFiller else { return }
        endInterruptionSupersededByFailure(of: slot, in: graph)
        let awaited = awaitedDevice(after: source.device)
        guard announceInterruption(of: slot, reason: reason, device: awaited, selection: source.selection, in: graph) else { return }
        Log.session.notice("\(name): interrupted, \(reason) (\(source.device))")
        let swapStarted = ContinuousClock.now
        do {
            try graph.setSource(SourceBuilder.filler(for: awaited, selection: source.selection, name: graph.makeSourceName(slot)), for: slot)
            Log.session.debug("\(name): filler in place after \(ContinuousClock.now - swapStarted)")
        } catch {
            // Nothing can keep the timeline going: the session cannot wait this out.
            _ = recovery.end(slot)
            failWithoutRecovery(slot, device: source.device, error: error)
            return
        }
        // The first retry's delay counts from the interruption, not from the filler's first frame (which can
        // take a while on a loaded machine): the device may be back by then.
        scheduleRecovery(of: slot, attempt: 0, generation: 0, waited: ContinuousClock.now - swapStarted)
    }

    /// What an interruption of `device` waits for: the device, or any camera when the camera input is the
    /// first available camera (which stands for whichever camera it took).
    private func awaitedDevice(after device: CaptureDevice) -> CaptureDevice {
        guard device.mediaType == .video else { return device }
        return inputs.lazy.compactMap { ($0 as? CaptureDeviceInput)?.device }.first(where: \.isFirstAvailableCamera) ?? device
    }

    /// The camera input is the first available camera and there is none (its source is black frames, at
    /// start or after a commit): the session is interrupted until a camera appears. An interruption for
    /// another camera goes on, now ended by any camera.
    func awaitFirstAvailableCamera(in graph: SessionGraph) {
        guard let source = graph.videoSource, source.device.isFirstAvailableCamera, let selection = source.selection,
              !recovery.retarget(.video, to: source.device, selection: selection) else { return }
        beginInterrupted(.video, reason: .videoDeviceUnplugged, device: source.device, selection: selection, graph: graph)
    }

    /// A stalled camera (or one held through system pressure) is left in place, waiting for the frame (or the
    /// cooler machine) that ends its interruption. When it then fails outright (unplugged while silent, as a
    /// loaded machine's first seconds often leave it), that frame never comes: the interruption ends here so
    /// that the failure is handled as any other (filler, device closed, retries) instead of being refused as
    /// "interrupted already", which left a dead camera and a recording that stopped growing without a word.
    private func endInterruptionSupersededByFailure(of slot: SessionGraph.Slot, in graph: SessionGraph) {
        guard let held = recovery.interruption(of: slot), held.reason.keepsTheDeviceInPlace else { return }
        Log.session.notice("\(name): \(held.device), interrupted (\(held.reason)), failed; that interruption ends for the failure's")
        announceInterruptionEnded(of: slot, in: graph)
    }

    /// Starts the interruption with the filler already in place (a camera held elsewhere at start).
    func beginInterrupted(_ slot: SessionGraph.Slot, reason: InterruptionReason, device: CaptureDevice,
                          selection: FormatSelection?, graph: SessionGraph) {
        guard announceInterruption(of: slot, reason: reason, device: device, selection: selection, in: graph) else { return }
        Log.session.notice("\(name): started interrupted, \(reason) (\(device))")
        scheduleRecovery(of: slot, attempt: 0, generation: 0)
    }

    private func scheduleRecovery(of slot: SessionGraph.Slot, attempt: Int, generation: Int, waited: Duration = .zero) {
        let delay = max(.zero, SourceRecovery.delay(beforeAttempt: attempt) - waited)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.components.seconds) * 1_000_000_000
                                                          + Int(delay.components.attoseconds / 1_000_000_000))) { [weak self] in
            self?.attemptRecovery(of: slot, scheduledAs: generation)
        }
    }

    /// One try at getting the device back: find it, build its source, swap it in for the filler (which stays
    /// if the device does not deliver). `generation` nil: an immediate try (the device was announced).
    func attemptRecovery(of slot: SessionGraph.Slot, scheduledAs generation: Int?) {
        dispatchPrecondition(condition: .onQueue(queue))
        // Reopening the camera does not cool the machine: a pressure interruption ends with the pressure.
        guard let graph = runningGraph, let interruption = recovery.interruption(of: slot),
              interruption.reason != .videoDeviceNotAvailableDueToSystemPressure,
              let (attempt, current) = recovery.startAttempt(slot, scheduledAs: generation) else { return }
        guard let device = SourceRecovery.findAgain(interruption.device) else {
            // Waiting for a first camera while the device monitor lists none: its announcement of one brings
            // the next attempt (watchDevices), so nothing is polled meanwhile.
            if interruption.device.isFirstAvailableCamera, CaptureDevice.firstCameraPresent() == nil { return }
            return scheduleRecovery(of: slot, attempt: attempt, generation: current)
        }
        do throws(CaptureError) {
            let unit: SourceUnit
            if slot == .video {
                let selection: FormatSelection
                if let previous = interruption.selection, device.formats.isEmpty || device.formats.contains(previous.format) {
                    selection = previous
                } else {
                    selection = try FormatSelector.select(sessionPreset, from: device.formats, deviceName: device.description)
                }
                // The app's frame-stall timeout holds for the camera it gets back too.
                unit = try SourceBuilder.videoSource(for: device, selection: selection, name: graph.makeSourceName(.video),
                                                     stallTimeout: CaptureDeviceInput.frameStallTimeout(of: device, among: inputs))
            } else {
                unit = try SourceBuilder.audioSource(for: device, name: graph.makeSourceName(.audio))
            }
            try graph.setSource(unit, for: slot)
        } catch {
            Log.session.info("\(name): \(interruption.device) not back yet (attempt \(attempt)): \(error)")
            if graph.source(for: slot) == nil {
                // The swap could not even restore the filler: one more try at a fresh one.
                do throws(CaptureError) {
                    try graph.setSource(SourceBuilder.filler(for: interruption.device, selection: interruption.selection,
                                                             name: graph.makeSourceName(slot)), for: slot)
                } catch {
                    _ = recovery.end(slot)
                    return failWithoutRecovery(slot, device: interruption.device, error: error)
                }
            }
            return scheduleRecovery(of: slot, attempt: attempt, generation: current)
        }
        guard let ending = recovery.interruption(of: slot) else { return }
        if ending.device.isFirstAvailableCamera {
            // The first available camera became a real one: what follows the camera (mirroring) hears of it.
            for output in graph.members { output.videoDeviceDidChange(device) }
        }
        let gap = ContinuousClock.now - ending.since
        Log.session.notice("\(name): interruption ended, \(device) back after \(gap) (attempt \(attempt))")
        announceInterruptionEnded(of: slot, in: graph)
    }

    /// The app replaced or removed an interrupted input (a commit): what it was waiting for is moot. Not
    /// system pressure, which is the machine's, whatever the camera.
    func endInterruptionIfReplaced(_ slot: SessionGraph.Slot, in graph: SessionGraph) {
        guard graph.source(for: slot)?.isFiller != true,
              recovery.interruption(of: slot)?.reason != .videoDeviceNotAvailableDueToSystemPressure else { return }
        announceInterruptionEnded(of: slot, in: graph)
    }

    /// Follows udev: a device announced again is tried at once; the session's device removed interrupts it
    /// (a camera not streaming, or a driver that says nothing on the stream, is noticed that way).
    func watchDevices(of graph: SessionGraph) {
        let real = [graph.videoSource, graph.audioSource].compactMap { $0?.device }.filter { !$0.deviceType.isTest }
        guard real.contains(where: { if case .pulse = $0.backend { false } else { true } }) else { return }
        let events = DeviceRegistry.shared.makeEventStream()
        recovery.watchDevices(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.queue.async {
                    switch event {
                    case .connected(let device):
                        for slot in self.recovery.slots(waitingFor: device) { self.attemptRecovery(of: slot, scheduledAs: nil) }
                    case .disconnected(let device):
                        guard let graph = self.runningGraph else { return }
                        for slot in [SessionGraph.Slot.video, .audio] where graph.source(for: slot)?.device.uniqueID == device.uniqueID {
                            self.interrupt(slot, reason: InterruptionClassifier.reasonForRemoval(of: device))
                        }
                    }
                }
            }
        })
    }
}
