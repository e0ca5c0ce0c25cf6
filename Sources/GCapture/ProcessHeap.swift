import Glibc

/// glibc's heap, tuned for a process that records for weeks. Each recording runs its encoders on new
/// threads, which glibc spreads over up to 8 arenas per core; an arena keeps the pages its high-water mark
/// touched, so every recording left a few hundred KiB more resident in one arena or another and a soak of
/// back-to-back minute-long recordings climbed 0.38 MiB a minute (+11.4 MiB in 30 minutes) long after the
/// recordings' objects were all freed. With MALLOC_ARENA_MAX=2 set before the program started, side by side
/// in one run: 0.09 MiB a minute. Set here, at the first session (after Swift's own threads may have made
/// arenas of their own), a 25-minute soak measured 0.16 MiB a minute: better, not yet flat. The CPU cost of
/// fewer arenas was not measured.
enum ProcessHeap {
    private typealias Trim = @convention(c) (Int) -> Int32
    private typealias Option = @convention(c) (Int32, Int32) -> Int32
    // Swift's Glibc module declares neither; both are absent from other C libraries (nothing is tuned there).
    private static let trim: Trim? = dlsym(nil, "malloc_trim").map { unsafeBitCast($0, to: Trim.self) }
    private static let option: Option? = dlsym(nil, "mallopt").map { unsafeBitCast($0, to: Option.self) }
    /// M_ARENA_MAX in glibc's malloc.h.
    private static let arenaMaximum: Int32 = -8

    /// Returns the free pages of every arena to the system (milliseconds for a few hundred MiB of heap).
    static func release() { _ = trim?(0) }

    /// Limits glibc to two arenas, once, when the first session is made: before its streaming threads
    /// exist. A process that set MALLOC_ARENA_MAX itself keeps its own choice.
    static let limitArenas: Void = {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        _ = option?(arenaMaximum, 2)
    }()
}
