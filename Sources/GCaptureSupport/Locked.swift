#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a lock, with Synchronization.Mutex's `withLock`. Used instead of Mutex because Mutex on
/// Linux takes a contended lock inside the kernel (FUTEX_LOCK_PI, in the uninstrumented
/// libswiftSynchronization), which ThreadSanitizer cannot see: it then reports what the new owner reads as
/// racing with the previous owner, and CI runs the suite under ThreadSanitizer. A pthread mutex is what
/// ThreadSanitizer intercepts; it is taken directly rather than through NSLock (which wraps one) so this
/// module needs no Foundation and the lock is exactly what the sanitizer sees.
public final class Locked<Value>: @unchecked Sendable {
    /// Heap-allocated: a pthread mutex must not move, and a stored property of a class may be moved by
    /// Swift's accessors (inout access copies it out and back).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
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

    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
