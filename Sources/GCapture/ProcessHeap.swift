import CProcessHeap

/// glibc's heap, tuned for a process that records for weeks: limited to two arenas when the program loads
/// (Sources/CProcessHeap/heap.c says why and what was measured), and trimmed after a recording.
enum ProcessHeap {
    /// Returns the free pages of every arena to the system.
    static func release() { gcapture_release_free_memory() }

    /// How many malloc arenas glibc was limited to when the program loaded: 2, or nil when the process
    /// set MALLOC_ARENA_MAX itself or the C library is not glibc.
    static var arenaLimit: Int? {
        let limit = Int(gcapture_arena_limit())
        return limit > 0 ? limit : nil
    }
}
