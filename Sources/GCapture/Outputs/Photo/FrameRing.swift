import Foundation
import GStreamerKit

/// One frame for a photo: the camera's buffer held by reference (no copy), or a copy of its own when the
/// camera's pool could not spare the buffer, with what describes it.
struct CapturedFrame: Sendable {
    let sample: Sample
    /// Session running time of the exposure, in nanoseconds.
    let presentationTime: UInt64
    let caps: Caps
    let info: VideoInfo

    var byteCount: Int { sample.byteCount }
}

/// The zero-shutter-lag ring: the most recent frames, so a photo can be the frame that was exposed when the
/// user pressed, not the next one. Frames are held by reference, not copied, when their pool can spare
/// them: a pool that grows on demand (videotestsrc's and decoders' behind the session's tee) always can; a
/// bounded one (a V4L2 camera's) only when the ring's depth fits in half of what it has beyond its own
/// minimum, and then a capture gets a copy, so that photos waiting for the encoder never hold the camera's
/// buffers. Otherwise each frame is copied as it arrives.
final class FrameRing: @unchecked Sendable {
    // @unchecked: every `var` below is read and written only with `condition` held.
    private struct Slot {
        var frame: CapturedFrame
        /// Lent by a bounded pool: captures get copies.
        var isBorrowed: Bool

        /// The frame as a capture may keep it.
        func handedOut() -> CapturedFrame? {
            guard isBorrowed else { return frame }
            return frame.sample.copy().map {
                CapturedFrame(sample: $0, presentationTime: frame.presentationTime, caps: frame.caps, info: frame.info)
            }
        }
    }

    private let condition = NSCondition()
    /// Frames kept; fixed for the ring's life.
    let depth: Int
    private var slots: [Slot?]
    private var next = 0
    /// Presentation times of the frames captures have taken as their own: no two photos are the same
    /// frame (a burst used to save one frame several times). A capture keeps the frames the ring held at its
    /// request (CapturePhotoOutput.Request), which may have left the ring since, so the times are kept for
    /// the last `takenMemory` photos, not only while their frames are in the ring.
    private var taken: [UInt64] = []
    /// Far more photos than can be pending at once (in flight and waiting).
    static let takenMemory = 64
    private let layoutCache = VideoInfoCache()

    /// A capture suspended until enough frames have arrived or its time is up. It holds no thread: a
    /// stalled camera would otherwise block a thread of Swift's cooperative pool for the whole timeout.
    private struct Waiter {
        let id: UInt64
        let after: UInt64?
        let limit: Int
        let continuation: CheckedContinuation<[Slot], Never>
    }
    private var waiters: [Waiter] = []
    private var nextWaiterID: UInt64 = 0
    /// While the camera is interrupted: frames are not kept (what reaches the ring is the session's filler)
    /// and no capture waits for one.
    private var suspended = false
    /// Frames exposed before this are not kept: filler still on its way when the camera came back.
    private var keepsFramesFrom: UInt64 = 0

    init(depth: Int) {
        self.depth = max(1, depth)
        slots = Array(repeating: nil, count: self.depth)
    }

    /// Bytes of the frames the ring keeps alive (held buffers and copies alike).
    var memoryBytes: Int { condition.withLock { slots.reduce(0) { $0 + ($1?.frame.byteCount ?? 0) } } }

    /// Whether the ring may hold `depth` buffers of a pool with these bounds.
    static func canBorrow(_ depth: Int, from pool: BufferPoolBounds) -> Bool {
        guard let maximum = pool.maximum else { return true }
        return depth <= (maximum - pool.minimum) / 2
    }

    /// Keeps a frame, replacing the oldest; returns whether it was kept. Filler (a frame marked as a gap, or
    /// one arriving while the ring is suspended) never is. Runs on the streaming thread.
    @discardableResult
    func store(_ sample: Sample) -> Bool {
        guard !sample.isGap, let pts = sample.presentationTime, let info = sample.videoInfo(cache: layoutCache),
              let caps = sample.caps else { return false }
        guard condition.withLock({ !suspended && UInt64(pts) >= keepsFramesFrom }) else { return false }
        var kept = sample, borrowed = false
        if let pool = sample.bufferPool, pool.maximum != nil {
            if Self.canBorrow(depth, from: pool) {
                borrowed = true
            } else {
                guard let copy = sample.copy() else { return false }
                kept = copy
            }
        }
        let slot = Slot(frame: CapturedFrame(sample: kept, presentationTime: UInt64(pts), caps: caps, info: info),
                        isBorrowed: borrowed)
        condition.lock()
        // Checked again: the ring may have been suspended while the frame was being copied.
        guard !suspended else {
            condition.unlock()
            return false
        }
        let evicted = slots[next]
        slots[next] = slot
        next = (next + 1) % depth
        var satisfied: [(CheckedContinuation<[Slot], Never>, [Slot])] = []
        waiters.removeAll { waiter in
            let later = self.slots(after: waiter.after)
            guard later.count >= waiter.limit else { return false }
            satisfied.append((waiter.continuation, later))
            return true
        }
        condition.unlock()
        // Captures resume, and the oldest frame goes back to its pool, outside the lock.
        for (continuation, later) in satisfied { continuation.resume(returning: later) }
        withExtendedLifetime(evicted) {}
        return true
    }

    /// The camera is interrupted: forgets its frames, keeps none until `resume`, and hands every capture
    /// waiting for a frame what it has (nothing), at once, rather than at its timeout.
    func suspend() {
        let (dropped, released) = condition.withLock { () -> ([Slot?], [Waiter]) in
            suspended = true
            defer { slots = Array(repeating: nil, count: depth); waiters = [] }
            return (slots, waiters)
        }
        for waiter in released { waiter.continuation.resume(returning: []) }
        withExtendedLifetime(dropped) {}
    }

    /// Another camera took over at `time`: the frames exposed before it go, and one still on its way is not
    /// kept, so a photo asked for from now on is the new camera's (its first frame, exposed a moment before
    /// the switch was done, included: a capture then waits for its next).
    func forgetFrames(exposedBefore time: UInt64) {
        let dropped = condition.withLock { () -> [Slot?] in
            keepsFramesFrom = max(keepsFramesFrom, time)
            defer { slots = slots.map { slot in slot.flatMap { $0.frame.presentationTime >= time ? $0 : nil } } }
            return slots
        }
        withExtendedLifetime(dropped) {}
    }

    /// The camera delivers again: frames exposed from `time` on are kept.
    func resume(keepingFramesFrom time: UInt64) {
        condition.withLock {
            suspended = false
            keepsFramesFrom = time
        }
    }

    /// Forgets the frames (the session stopped: they would be stale at the next start) and lets their
    /// buffers go.
    func reset() {
        let dropped = condition.withLock {
            defer { slots = Array(repeating: nil, count: depth); taken = [] }
            return slots
        }
        withExtendedLifetime(dropped) {}
    }

    /// Up to `limit` frames exposed at or before `time`, nearest first. Empty when the ring has none.
    func frames(atOrBefore time: UInt64, limit: Int) -> [CapturedFrame] {
        condition.withLock { Array(ordered().filter { $0.frame.presentationTime <= time }.prefix(limit)) }
            .compactMap { $0.handedOut() }
    }

    /// The newest frame, whenever it was exposed.
    func newest() -> CapturedFrame? {
        condition.withLock { ordered().first }?.handedOut()
    }

    /// Takes `frame` as a photo's own; false when an earlier capture took it already. Checking and
    /// marking are one step, so of captures running at once only one gets a frame.
    func take(_ frame: CapturedFrame) -> Bool {
        condition.withLock {
            guard !taken.contains(frame.presentationTime) else { return false }
            markTaken(frame.presentationTime)
            return true
        }
    }

    /// Waits for up to `limit` frames exposed after `time`, or any frames when it is nil (oldest first),
    /// returning what arrived in time. Suspends: the frame's arrival or a timer resumes it.
    func frames(after time: UInt64?, limit: Int, timeout: TimeInterval) async -> [CapturedFrame] {
        let later: [Slot] = await withCheckedContinuation { continuation in
            condition.lock()
            let now = slots(after: time)
            guard now.count < limit, timeout > 0, !suspended else {
                condition.unlock()
                return continuation.resume(returning: now)
            }
            let id = nextWaiterID
            nextWaiterID += 1
            waiters.append(Waiter(id: id, after: time, limit: limit, continuation: continuation))
            condition.unlock()
            // Holds the ring until then, so that every waiter is resumed exactly once.
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { self.expire(id) }
        }
        return later.reversed().prefix(limit).compactMap { $0.handedOut() }
    }

    /// Call with the lock held.
    private func markTaken(_ time: UInt64) {
        taken.append(time)
        if taken.count > Self.takenMemory { taken.removeFirst(taken.count - Self.takenMemory) }
    }

    /// A waiter's time is up: it gets what has arrived, unless a frame resumed it first.
    private func expire(_ id: UInt64) {
        condition.lock()
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return condition.unlock() }
        let waiter = waiters.remove(at: index)
        let later = slots(after: waiter.after)
        condition.unlock()
        waiter.continuation.resume(returning: later)
    }

    /// Filled slots exposed after `time` (all when it is nil), newest first. Call with the lock held.
    private func slots(after time: UInt64?) -> [Slot] {
        ordered().filter { slot in time.map { slot.frame.presentationTime > $0 } ?? true }
    }

    /// Filled slots, newest first. Call with the lock held.
    private func ordered() -> [Slot] {
        (1...depth).compactMap { slots[(next - $0 + depth) % depth] }
    }
}
