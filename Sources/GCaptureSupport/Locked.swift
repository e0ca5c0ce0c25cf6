/// A value behind a lock, with Synchronization.Mutex's `withLock`. Used instead of Mutex because Mutex on
/// Linux takes a contended lock inside the kernel (FUTEX_LOCK_PI, in the uninstrumented
/// libswiftSynchronization), which ThreadSanitizer cannot see: it then reports what the new owner reads as
/// racing with the previous owner, and CI runs the suite under ThreadSanitizer. `Lock` is a pthread mutex,
/// which ThreadSanitizer intercepts.
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: the value is only reached inside `withLock`, under the mutex.
    @usableFromInline let lock = Lock()
    @usableFromInline var value: Value

    public init(_ value: Value) { self.value = value }

    @inlinable  // as Lock.withLock
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try lock.withLock { () throws(Failure) -> Result in try body(&value) }
    }
}
