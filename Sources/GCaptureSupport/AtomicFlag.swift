import Synchronization

/// A boolean that streaming threads and the caller can share without locks (Atomic itself cannot be
/// captured by closures).
public final class AtomicFlag: Sendable {
    private let value = Atomic<Bool>(false)
    public init() {}
    public var isSet: Bool { value.load(ordering: .acquiring) }
    public func set() { value.store(true, ordering: .releasing) }
    /// Sets the flag; true only for the call that changed it.
    public func setFirstTime() -> Bool { !value.exchange(true, ordering: .acquiringAndReleasing) }
}
