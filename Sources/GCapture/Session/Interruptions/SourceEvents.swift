import GStreamerKit

extension CaptureSession {
    /// Where a source's trouble becomes an interruption, or ends the session: one hop from the graph's event.
    /// On the session queue, for the running graph.
    /// - A device's error the classifier recognizes (unplugged, busy, the audio server gone) interrupts its
    ///   input: a filler stands in, and retries begin (SourceRecovery.swift).
    /// - A silent camera (FrameStallWatchdog.swift) and system pressure at its last level (SessionPressure.swift)
    ///   interrupt it in place.
    /// - Any other microphone failure drops the audio and video goes on; any other failure ends the session.
    func handleSourceEvent(_ event: GraphEvent, in graph: SessionGraph) {
        switch event {
        case .sourceFailed(let device?, let error):
            if let reason = InterruptionClassifier.reason(for: error, from: device) {
                let slot: SessionGraph.Slot = device.mediaType == .video ? .video : .audio
                if graph.source(for: slot)?.device == device {
                    // A filler's own trouble is not the device's: the device is being waited for already.
                    if graph.source(for: slot)?.isFiller != true { interrupt(slot, reason: reason) }
                    return
                }
            }
            failWithoutRecovery(device.mediaType == .video ? .video : .audio, device: device, error: error)
        case .sourceFailed(nil, let error):
            stopOnQueue()
            publish(RuntimeError(error: .startFailed(reason: "the capture graph failed", underlying: error), output: nil, isFatal: true))
        case .sourceStalled(let device):
            videoSourceDidStall(device)
        case .sourceResumed(let device):
            videoSourceDidResume(device)
        case .systemPressureChanged(let device, let pressure, let response, let previous):
            systemPressureDidChange(device, pressure, response, previous: previous)
        case .outputFailed:
            break
        }
    }

    /// An input that cannot be interrupted (its trouble is not one that ends by itself) or filled in for: a
    /// microphone is dropped and video goes on; otherwise the session fails as it did before interruptions
    /// existed.
    func failWithoutRecovery(_ slot: SessionGraph.Slot, device: CaptureDevice, error: CaptureError) {
        failWithoutRecovery(slot, device: device, error: GStreamerError(kind: .stateChange, message: "\(error)"))
    }

    private func failWithoutRecovery(_ slot: SessionGraph.Slot, device: CaptureDevice, error: GStreamerError) {
        if slot == .audio, let graph = runningGraph, graph.hasSource(.video) {
            // A microphone (or the audio server) went away for good: recordings end cleanly, video goes on.
            try? graph.setSource(nil, for: .audio)
            for output in graph.members { output.audioSourceDidFail(device, error: error) }
            publish(RuntimeError(error: .audioDeviceFailed(device: device.description, underlying: error), output: nil, isFatal: false))
            return
        }
        stopOnQueue()
        publish(RuntimeError(error: .deviceFailed(device: device.description, underlying: error), output: nil, isFatal: true))
    }
}
