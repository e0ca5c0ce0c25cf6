import Foundation
import Synchronization

/// The session's interrupted inputs: why, since when, what is awaited and how many tries were made. Read from
/// any thread (isInterrupted); changed only on the session's queue, by the InterruptionCoordinator.
final class InterruptedInputs: Sendable {
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
}
