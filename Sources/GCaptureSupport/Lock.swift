#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutex for state that lives outside it (stored properties a `weak` reference needs, or an output stream
/// that must not interleave): NSLock's role, on a pthread mutex that ThreadSanitizer sees (see `Locked`,
/// which is built on it and is the better choice whenever the state can live inside the lock). Not
/// `Locked<Void>`: TSan placed the exclusive access to its zero-sized value at the object's own address and
/// reported it racing with another thread entering `withLock` (a Swift access race, seen once in CI).
public final class Lock: @unchecked Sendable {
    // @unchecked Sendable: it holds a pthread mutex, which is made to be shared between threads.
    /// Heap-allocated: a pthread mutex must not move, and a stored property of a class may be moved by
    /// Swift's accessors (inout access copies it out and back).
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    // Inlinable, as swift-nio's locks are: taken on every frame in places, and across the module boundary an
    // unspecialized generic call looked up metadata and witness tables each time (perf: getCache,
    // swift_getWitnessTable on the frames' threads).
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
