import CGst
import Dispatch
import GCaptureSupport
import Synchronization

/// A bin fed by request pads of tees that keep running (one tee per input: video, audio): attached and
/// detached without stopping the tees' other branches, and contained when it fails, so its error cannot
/// travel upstream.
public final class TeeBranch: @unchecked Sendable {
    // @unchecked Sendable: `links` is written once in init, read by `detach` (once, as `detached` guards);
    // failure is an atomic flag, read from streaming threads.
    public let bin: Bin
    private let container: Bin
    private struct Link { let tee: Element; let teePad: Pad; let sinkPad: Pad }
    private var links: [Link] = []
    private let failed = AtomicFlag()
    private let detached = Locked<Bool>(false)

    /// Adds `bin` (which must expose a "sink" pad, e.g. a ghost pad) to `container`, brings it to the
    /// container's state and links it to a new request pad of `tee`. On failure nothing is left behind.
    public convenience init(attaching bin: Bin, to tee: Element, in container: Bin) throws {
        try self.init(attaching: bin, inputs: [(tee, "sink")], in: container)
    }

    /// The same for a bin with several inputs: each named sink pad of `bin` is fed by its own tee.
    /// `linkingOutputs` links what the bin feeds (if it feeds anything in `container`), before any data flows.
    public init(attaching bin: Bin, inputs: [(tee: Element, sinkPad: String)], in container: Bin,
                linkingOutputs: (Bin) throws -> Void = { _ in }) throws {
        self.bin = bin
        self.container = container
        let sinkPads = try inputs.map { input in
            guard let pad = bin.staticPad(input.sinkPad) else {
                throw GStreamerError(kind: .link, message: "branch \(bin) has no '\(input.sinkPad)' pad")
            }
            return pad
        }
        try container.add(bin)
        do {
            try linkingOutputs(bin)
            try bin.syncStateWithParent()
            for (input, sinkPad) in zip(inputs, sinkPads) {
                let teePad = try input.tee.requestPad("src_%u")
                links.append(Link(tee: input.tee, teePad: teePad, sinkPad: sinkPad))
                // After a failure the tee drops this branch's buffers itself: upstream keeps seeing success.
                let failed = self.failed
                teePad.addProbe(.buffer) { _ in failed.isSet ? .drop : .ok }
                try teePad.link(to: sinkPad)
            }
        } catch {
            for link in links {
                link.teePad.unlink(from: link.sinkPad)
                link.tee.releaseRequestPad(link.teePad)
            }
            _ = try? bin.setState(.null)
            container.remove(bin)
            throw error
        }
    }

    /// Stops feeding the branch. Safe from any thread, including the bus sync handler on the very thread
    /// that reported the branch's error: it is only a flag the tee pads' probes read.
    public func markFailed() { failed.set() }
    public var hasFailed: Bool { failed.isSet }

    /// Unlinks the branch when the tee pads are idle (waiting up to `timeout` for that), optionally drains it
    /// (EOS through every input, waiting for every sink to finish with it, so muxers finalize their files),
    /// then stops and removes it. The drain goes on while buffers move inside the branch, as an encoder
    /// works through frames queued before it on a loaded machine, and fails after `timeout` without any
    /// moving, or after `limit` in all. Blocks; must not be called on a streaming thread. Returns whether
    /// the drain completed: false for a branch that failed (it cannot be drained, its files were not
    /// finalized) or whose sinks did not see end-of-stream in time. `endingOwnInputs` ends the inputs the
    /// bin has besides its tee links (appsrcs): it is called once the drain can see their end-of-stream
    /// reach the sinks (a sink's end seen before then is lost: the bin forgets its sinks' ends once all of
    /// them have posted one).
    @discardableResult
    public func detach(drain: Bool, timeout: Duration = .seconds(3), limit: Duration = .seconds(30),
                       endingOwnInputs: () -> Void = {}) -> Bool {
        let alreadyDetached = detached.withLock { value in
            defer { value = true }
            return value
        }
        guard !alreadyDetached else { return true }

        let failedBefore = hasFailed
        let sinks = drain && !failedBefore ? bin.sinkElements : []
        // A bin keeps its sinks' end-of-stream messages (how each is seen to be done) only until all of
        // them have posted one; a sink that never will keeps them there.
        if !sinks.isEmpty, let sentinel = try? Element.make("fakesink", name: "drain-sentinel") {
            try? sentinel.set("async", false)
            if (try? bin.add(sentinel)) != nil { try? sentinel.syncStateWithParent() }
        }
        let sendEOS = !sinks.isEmpty
        let progress = sendEOS ? DrainProgress(watching: bin) : nil
        defer { progress?.stop() }
        endingOwnInputs()
        let unlinked = DispatchGroup()
        for link in links {
            unlinked.enter()
            let teePad = link.teePad, sinkPad = link.sinkPad
            teePad.addProbe(.idle) { _ in
                teePad.unlink(from: sinkPad)
                if sendEOS { sinkPad.send(.endOfStream()) }
                unlinked.leave()
                return .remove
            }
        }
        let began = ContinuousClock.now
        var completed = unlinked.wait(timeout: .now() + .nanoseconds(Int(timeout / .nanoseconds(1)))) == .success
        if !completed {
            // A tee is stuck pushing into this branch (it blocks downstream): force the unlinks.
            for link in links { link.teePad.unlink(from: link.sinkPad) }
        } else if let progress {
            // Drained once every sink has handled the end completely (posted EOS), not merely received it:
            // a sink bin like hlssink2 lists its last segment only then.
            while !sinks.allSatisfy(bin.hasEndOfStream) {
                guard progress.idleTime < timeout, ContinuousClock.now - began < limit else {
                    completed = false
                    break
                }
                g_usleep(5_000)
            }
        }

        _ = try? bin.setState(.null)
        container.remove(bin)
        for link in links { link.tee.releaseRequestPad(link.teePad) }
        return completed && !(drain && failedBefore)
    }
}
