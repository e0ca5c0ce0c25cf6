import Synchronization

/// A boolean that streaming threads and the caller can share without locks (Atomic itself cannot be
/// captured by closures).
final class AtomicFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
    /// Sets the flag; true only for the call that changed it.
    func setFirstTime() -> Bool { !value.exchange(true, ordering: .acquiringAndReleasing) }
}
