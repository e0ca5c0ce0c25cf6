import Foundation
import GStreamerKit

/// One frame copied out of the camera's buffers: pixels of our own plus what describes them.
struct CapturedFrame: @unchecked Sendable {
    /// Session running time of the exposure, in nanoseconds.
    let presentationTime: UInt64
    let caps: Caps
    let info: VideoInfo
    let bytes: [UInt8]
}

/// The zero-shutter-lag ring: copies of the most recent frames, so a photo can be the frame that was
/// exposed when the user pressed, not the next one. Frames are copied (0.16 ms for 1080p) rather than
/// held, because holding a camera's buffers starves its small buffer pool.
final class FrameRing: @unchecked Sendable {
    private struct Slot {
        var presentationTime: UInt64 = 0
        var caps: Caps?
        var info: VideoInfo?
        var storage: UnsafeMutableRawBufferPointer?
        var length = 0
    }

    private let condition = NSCondition()
    private var slots: [Slot]
    private var next = 0
    private var count = 0
    private var newestTime: UInt64?
    private let layoutCache = VideoInfoCache()

    init(depth: Int) {
        slots = Array(repeating: Slot(), count: max(1, depth))
    }

    deinit {
        for slot in slots { slot.storage?.deallocate() }
    }

    var depth: Int { condition.withLock { slots.count } }

    /// Bytes held by the ring's frames.
    var memoryBytes: Int { condition.withLock { slots.reduce(0) { $0 + ($1.storage?.count ?? 0) } } }

    /// Copies a frame in, replacing the oldest. Runs on the streaming thread.
    func store(_ sample: Sample) {
        guard let pts = sample.presentationTime, let info = sample.videoInfo(cache: layoutCache),
              let caps = sample.caps else { return }
        condition.lock()
        defer { condition.unlock() }
        var slot = slots[next]
        let copied = sample.withBytes { bytes -> Bool in
            if (slot.storage?.count ?? 0) < bytes.count {
                slot.storage?.deallocate()
                slot.storage = .allocate(byteCount: bytes.count, alignment: 64)
            }
            guard let storage = slot.storage, let base = bytes.baseAddress else { return false }
            storage.baseAddress!.copyMemory(from: base, byteCount: bytes.count)
            slot.length = bytes.count
            return true
        } ?? false
        guard copied else { return }
        slot.presentationTime = UInt64(pts)
        slot.caps = caps
        slot.info = info
        slots[next] = slot
        next = (next + 1) % slots.count
        count = min(count + 1, slots.count)
        newestTime = UInt64(pts)
        condition.broadcast()
    }

    /// Forgets the frames (the session stopped: they would be stale at the next start).
    func reset() {
        condition.withLock {
            count = 0
            newestTime = nil
        }
    }

    /// Up to `limit` frames exposed at or before `time`, nearest first. Empty when the ring has none.
    func frames(atOrBefore time: UInt64, limit: Int) -> [CapturedFrame] {
        condition.withLock { ordered().filter { $0.presentationTime <= time }.prefix(limit).map(copy) }
    }

    /// The newest frame, whenever it was exposed.
    func newest() -> CapturedFrame? {
        condition.withLock { ordered().first.map(copy) }
    }

    /// Waits for up to `limit` frames exposed after `time` (oldest first), returning what arrived in time.
    func frames(after time: UInt64, limit: Int, timeout: TimeInterval) -> [CapturedFrame] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            let later = ordered().filter { $0.presentationTime > time }
            if later.count >= limit || !condition.wait(until: deadline) {
                return later.reversed().prefix(limit).map(copy)
            }
        }
    }

    /// Filled slots, newest first. Call with the lock held.
    private func ordered() -> [Slot] {
        (0..<count).map { slots[(next - 1 - $0 + slots.count * 2) % slots.count] }
    }

    private func copy(_ slot: Slot) -> CapturedFrame {
        let bytes = [UInt8](UnsafeRawBufferPointer(start: slot.storage!.baseAddress, count: slot.length))
        return CapturedFrame(presentationTime: slot.presentationTime, caps: slot.caps!, info: slot.info!, bytes: bytes)
    }
}
