import GStreamerKit
import Foundation
import Synchronization

/// malloc'd blocks lent out as the bytes of a `Data` and taken back when that Data is freed, so that the
/// next JPEG is written into pages that are already mapped. A fresh block per photo is an mmap of the raw
/// frame's size whose written pages fault in one at a time (35 of them for a 1080p JPEG), then an munmap.
/// A Data kept by its caller keeps its whole block, but only the pages a JPEG was written to are resident.
final class MemoryBlockPool: Sendable {
    /// A block and the bytes it holds; nil and 0 for none yet. Whoever has the Block owns the memory: it
    /// passes between threads whole, never shared.
    struct Block: @unchecked Sendable { // for the raw pointer: the block has one owner at a time
        var bytes: UnsafeMutablePointer<UInt8>?
        var capacity: Int
    }

    private let idle = Locked<[Block]>([])
    /// Idle blocks kept at most; more are freed as they come back.
    let limit: Int

    init(keeping limit: Int) { self.limit = limit }

    deinit {
        idle.withLock { blocks in blocks.forEach { free($0.bytes) } }
    }

    /// An idle block, or none (the caller allocates).
    func take() -> Block {
        idle.withLock { $0.popLast() } ?? Block(bytes: nil, capacity: 0)
    }

    /// The first `count` bytes of `block` as Data, without a copy; the block comes back here when the Data
    /// (and every copy of it) is gone.
    func data(lending block: Block, count: Int) -> Data {
        guard let bytes = block.bytes else { return Data() }
        let capacity = block.capacity
        return Data(bytesNoCopy: bytes, count: count, deallocator: .custom { [self] pointer, _ in
            giveBack(Block(bytes: pointer.assumingMemoryBound(to: UInt8.self), capacity: capacity))
        })
    }

    /// Keeps `block` for the next taker, or frees it when enough are kept already.
    func giveBack(_ block: Block) {
        guard block.bytes != nil else { return }
        let kept = idle.withLock { blocks in
            guard blocks.count < limit else { return false }
            blocks.append(block)
            return true
        }
        if !kept { free(block.bytes) }
    }
}
