import CGst
import Dispatch
import Synchronization

/// A bin fed by one request pad of a tee that keeps running: attached and detached without stopping the
/// tee's other branches, and contained when it fails, so its error cannot travel upstream.
public final class TeeBranch: @unchecked Sendable {
    public let bin: Bin
    private let tee: Element
    private let container: Bin
    private let teePad: Pad
    private let sinkPad: Pad
    private let failed = AtomicFlag()
    private let detached = Mutex<Bool>(false)

    /// Adds `bin` (which must expose a "sink" pad, e.g. a ghost pad) to `container`, brings it to the
    /// container's state and links it to a new request pad of `tee`. On failure nothing is left behind.
    public init(attaching bin: Bin, to tee: Element, in container: Bin) throws {
        guard let sinkPad = bin.staticPad("sink") else {
            throw GStreamerError(kind: .link, message: "branch \(bin) has no 'sink' pad")
        }
        self.bin = bin
        self.tee = tee
        self.container = container
        self.sinkPad = sinkPad
        try container.add(bin)
        do {
            teePad = try tee.requestPad("src_%u")
        } catch {
            container.remove(bin)
            throw error
        }
        // After a failure the tee drops this branch's buffers itself: upstream keeps seeing success.
        let failed = self.failed
        teePad.addProbe(.buffer) { _ in failed.isSet ? .drop : .ok }
        do {
            try bin.syncStateWithParent()
            try teePad.link(to: sinkPad)
        } catch {
            _ = try? bin.setState(.null)
            container.remove(bin)
            tee.releaseRequestPad(teePad)
            throw error
        }
    }

    /// Stops feeding the branch. Safe from any thread, including the bus sync handler on the very thread
    /// that reported the branch's error: it is only a flag the tee pad's probe reads.
    public func markFailed() { failed.set() }
    public var hasFailed: Bool { failed.isSet }

    /// Unlinks the branch when the tee pad is idle, optionally drains it (EOS through the branch, waiting up
    /// to `timeout` for it to reach every sink, so muxers finalize their files), then stops and removes it.
    /// Blocks; must not be called on a streaming thread. Returns whether the drain completed.
    @discardableResult
    public func detach(drain: Bool, timeout: Duration = .seconds(3)) -> Bool {
        let alreadyDetached = detached.withLock { value in
            defer { value = true }
            return value
        }
        guard !alreadyDetached else { return true }

        let sinks = drain && !hasFailed ? bin.sinkElements : []
        let drained = DispatchGroup()
        var eosProbes: [(Pad, UInt)] = []
        for sink in sinks {
            guard let pad = sink.staticPad("sink") else { continue }
            drained.enter()
            let once = AtomicFlag()
            let id = pad.addProbe(.downstreamEvent) { info in
                if info.eventType == .endOfStream, once.setFirstTime() { drained.leave() }
                return .ok
            }
            eosProbes.append((pad, id))
        }

        let unlinked = DispatchSemaphore(value: 0)
        let teePad = self.teePad, sinkPad = self.sinkPad
        let sendEOS = !sinks.isEmpty
        teePad.addProbe(.idle) { _ in
            teePad.unlink(from: sinkPad)
            if sendEOS { sinkPad.send(.endOfStream()) }
            unlinked.signal()
            return .remove
        }
        let start = DispatchTime.now()
        let deadline = start + .nanoseconds(Int(timeout.components.seconds) * 1_000_000_000
                                            + Int(timeout.components.attoseconds / 1_000_000_000))
        var completed = unlinked.wait(timeout: deadline) == .success
        if !completed {
            // The tee is stuck pushing into this branch (it blocks downstream): force the unlink.
            teePad.unlink(from: sinkPad)
        } else if sendEOS {
            completed = drained.wait(timeout: deadline) == .success
        }
        for (pad, id) in eosProbes { pad.removeProbe(id) }

        _ = try? bin.setState(.null)
        container.remove(bin)
        tee.releaseRequestPad(teePad)
        return completed
    }
}
