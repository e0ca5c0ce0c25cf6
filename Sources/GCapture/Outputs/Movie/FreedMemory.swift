import Glibc

/// Gives freed heap memory back to the system after a recording. Each recording runs its encoders on new
/// threads, which glibc spreads over up to 8 arenas per core; an arena keeps the pages its high-water mark
/// touched, so a minute of x264 and the copy on stop left a few MiB resident per recording in one more
/// arena, and a recording soak's memory climbed long after the recordings' objects were all freed.
enum FreedMemory {
    private typealias Trim = @convention(c) (Int) -> Int32
    /// glibc's malloc_trim, which Swift's Glibc module does not declare; absent from other C libraries.
    private static let trim: Trim? = dlsym(nil, "malloc_trim").map { unsafeBitCast($0, to: Trim.self) }

    /// Returns the free pages of every arena to the system (milliseconds for a few hundred MiB of heap).
    static func release() { _ = trim?(0) }
}
