import Dispatch
import Foundation
import GStreamerKit

/// How an interrupted device is got back: when to try again, and how to tell it is back.
enum SourceRecovery {
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

    /// The interrupted device as it is now, if it looks back: listed again under its stable id (perhaps
    /// at another node), and for a camera, its node opens (vivid and unplugged drivers answer ENODEV).
    static func findAgain(_ device: CaptureDevice) -> CaptureDevice? {
        switch device.backend {
        case .testCamera, .testMicrophone, .composite:
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
            guard let current, let node = current.nodePath, V4L2Node.openError(node) == nil else { return nil }
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

extension InterruptionCoordinator {
    /// The one way an input gets interrupted, whoever noticed (a source's error, udev, a stall watchdog,
    /// system pressure): on the session queue. The outputs hear it first, then the app; the failed source is
    /// stopped (closing the device, which a driver needs before it can come back) and a filler takes its
    /// place in front of the tee; retries start. Does nothing when the slot is interrupted already.
    func interrupt(_ slot: Slot, reason: Reason) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let graph = runningGraph, let source = graph.source(for: slot), !source.isFiller else { return }
        endInterruptionSupersededByFailure(of: slot, in: graph)
        let awaited = awaitedDevice(after: source.device)
        guard announce(slot, interruptedFor: reason, device: awaited, selection: source.selection, in: graph) else { return }
        Log.session.notice("\(sessionName): interrupted, \(reason) (\(source.device))")
        let swapStarted = ContinuousClock.now
        do {
            try graph.setSource(SourceBuilder.filler(for: awaited, selection: source.selection, name: graph.makeSourceName(slot)), for: slot)
            Log.session.debug("\(sessionName): filler in place after \(ContinuousClock.now - swapStarted)")
        } catch {
            // Nothing can keep the timeline going: the session cannot wait this out.
            _ = interrupted.end(slot)
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
        let inputs = session?.inputs ?? []
        return inputs.lazy.compactMap { ($0 as? CaptureDeviceInput)?.device }.first(where: \.isFirstAvailableCamera) ?? device
    }

    /// The camera input is the first available camera and there is none (its source is black frames, at
    /// start or after a commit): the session is interrupted until a camera appears. An interruption for
    /// another camera goes on, now ended by any camera.
    func awaitFirstAvailableCamera(in graph: SessionGraph) {
        guard let source = graph.videoSource, source.device.isFirstAvailableCamera, let selection = source.selection,
              !interrupted.retarget(.video, to: source.device, selection: selection) else { return }
        beginInterrupted(.video, reason: .videoDeviceUnplugged, device: source.device, selection: selection, graph: graph)
    }

    /// A stalled camera (or one held through system pressure) is left in place, waiting for the frame (or the
    /// cooler machine) that ends its interruption. When it then fails outright (unplugged while silent, as a
    /// loaded machine's first seconds often leave it), that frame never comes: the interruption ends here so
    /// that the failure is handled as any other (filler, device closed, retries) instead of being refused as
    /// "interrupted already", which left a dead camera and a recording that stopped growing without a word.
    private func endInterruptionSupersededByFailure(of slot: Slot, in graph: SessionGraph) {
        guard let held = interrupted.interruption(of: slot), held.reason.keepsTheDeviceInPlace else { return }
        Log.session.notice("\(sessionName): \(held.device), interrupted (\(held.reason)), failed; that interruption ends for the failure's")
        announceEnd(of: slot, in: graph)
    }

    /// Starts the interruption with the filler already in place (a camera held elsewhere at start).
    func beginInterrupted(_ slot: Slot, reason: Reason, device: CaptureDevice,
                          selection: FormatSelection?, graph: SessionGraph) {
        guard announce(slot, interruptedFor: reason, device: device, selection: selection, in: graph) else { return }
        Log.session.notice("\(sessionName): started interrupted, \(reason) (\(device))")
        scheduleRecovery(of: slot, attempt: 0, generation: 0)
    }

    private func scheduleRecovery(of slot: Slot, attempt: Int, generation: Int, waited: Duration = .zero) {
        let delay = max(.zero, SourceRecovery.delay(beforeAttempt: attempt) - waited)
        queue.asyncAfter(deadline: .now() + delay.dispatchInterval) { [weak self] in
            self?.attemptRecovery(of: slot, scheduledAs: generation)
        }
    }

    /// One try at getting the device back: find it, build its source, swap it in for the filler (which stays
    /// if the device does not deliver). `generation` nil: an immediate try (the device was announced).
    func attemptRecovery(of slot: Slot, scheduledAs generation: Int?) {
        dispatchPrecondition(condition: .onQueue(queue))
        // Reopening the camera does not cool the machine: a pressure interruption ends with the pressure.
        guard let session, let graph = session.runningGraph, let interruption = interrupted.interruption(of: slot),
              interruption.reason != .videoDeviceNotAvailableDueToSystemPressure,
              let (attempt, current) = interrupted.startAttempt(slot, scheduledAs: generation) else { return }
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
                    selection = try FormatSelector.select(session.sessionPreset, from: device.formats, deviceName: device.description)
                }
                // The app's frame-stall timeout holds for the camera it gets back too.
                unit = try SourceBuilder.videoSource(for: device, selection: selection, name: graph.makeSourceName(.video),
                                                     stallTimeout: CaptureDeviceInput.frameStallTimeout(of: device, among: session.inputs))
            } else {
                unit = try SourceBuilder.audioSource(for: device, name: graph.makeSourceName(.audio))
            }
            try graph.setSource(unit, for: slot)
        } catch {
            Log.session.info("\(sessionName): \(interruption.device) not back yet (attempt \(attempt)): \(error)")
            if graph.source(for: slot) == nil {
                // The swap could not even restore the filler: one more try at a fresh one.
                do throws(CaptureError) {
                    try graph.setSource(SourceBuilder.filler(for: interruption.device, selection: interruption.selection,
                                                             name: graph.makeSourceName(slot)), for: slot)
                } catch {
                    _ = interrupted.end(slot)
                    return failWithoutRecovery(slot, device: interruption.device, error: error)
                }
            }
            return scheduleRecovery(of: slot, attempt: attempt, generation: current)
        }
        guard let ending = interrupted.interruption(of: slot) else { return }
        if ending.device.isFirstAvailableCamera {
            // The first available camera became a real one: what follows the camera (mirroring) hears of it.
            for output in graph.members { output.videoDeviceDidChange(device) }
        }
        let gap = ContinuousClock.now - ending.since
        Log.session.notice("\(sessionName): interruption ended, \(device) back after \(gap) (attempt \(attempt))")
        announceEnd(of: slot, in: graph)
    }

    /// The app replaced or removed an interrupted input (a commit): what it was waiting for is moot. Not
    /// system pressure, which is the machine's, whatever the camera.
    func endInterruptionIfReplaced(_ slot: Slot, in graph: SessionGraph) {
        guard graph.source(for: slot)?.isFiller != true,
              interrupted.interruption(of: slot)?.reason != .videoDeviceNotAvailableDueToSystemPressure else { return }
        announceEnd(of: slot, in: graph)
    }

    /// Follows udev: a device announced again is tried at once; the session's device removed interrupts it
    /// (a camera not streaming, or a driver that says nothing on the stream, is noticed that way).
    func watchDevices(of graph: SessionGraph) {
        let real = [graph.videoSource, graph.audioSource].compactMap { $0?.device }.filter { !$0.deviceType.isTest }
        guard real.contains(where: { if case .pulse = $0.backend { false } else { true } }) else { return }
        let events = DeviceRegistry.shared.makeEventStream()
        interrupted.watchDevices(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                self.queue.async {
                    switch event {
                    case .connected(let device):
                        for slot in self.interrupted.slots(waitingFor: device) { self.attemptRecovery(of: slot, scheduledAs: nil) }
                    case .disconnected(let device):
                        guard let graph = self.runningGraph else { return }
                        for slot in [Slot.video, .audio] where graph.source(for: slot)?.device.uniqueID == device.uniqueID {
                            self.interrupt(slot, reason: InterruptionClassifier.reasonForRemoval(of: device))
                        }
                    }
                }
            }
        })
    }
}
