import Dispatch

extension CaptureSession.InterruptionReason {
    /// The camera stays open through the interruption (it went silent, or the machine cannot keep up): no
    /// filler takes its place and nothing retries it; a failure of the camera meanwhile supersedes it.
    var keepsTheDeviceInPlace: Bool { self == .videoDeviceStalled || self == .videoDeviceNotAvailableDueToSystemPressure }
}

extension CaptureSession {
    /// The one way an interruption begins, whoever noticed it (a source's error, udev, the stall watchdog,
    /// system pressure): recorded first, so `isInterrupted` and `interruptionReasons` say so by the time anyone
    /// hears of it; then the outputs; then the app. On the session queue. False when the slot is interrupted
    /// already: its first reason stands, and nobody hears of a second.
    func announceInterruption(of slot: SessionGraph.Slot, reason: InterruptionReason, device: CaptureDevice,
                              selection: FormatSelection?, in graph: SessionGraph) -> Bool {
        dispatchPrecondition(condition: .onQueue(queue))
        guard recovery.begin(slot, reason: reason, device: device, selection: selection) else { return false }
        for output in graph.members { output.sessionWasInterrupted(reason) }
        post(.wasInterrupted(reason))
        return true
    }

    /// The one way an interruption ends: forgotten, then the outputs hear it, then the app. On the session
    /// queue. `reason`: only an interruption for that reason ends. Returns the interruption that ended.
    @discardableResult
    func announceInterruptionEnded(of slot: SessionGraph.Slot, onlyFor reason: InterruptionReason? = nil,
                                   in graph: SessionGraph) -> SourceRecovery.Interruption? {
        dispatchPrecondition(condition: .onQueue(queue))
        if let reason, recovery.interruption(of: slot)?.reason != reason { return nil }
        guard let ended = recovery.end(slot) else { return nil }
        for output in graph.members { output.sessionInterruptionEnded(ended.reason) }
        post(.interruptionEnded(ended.reason))
        return ended
    }
}
