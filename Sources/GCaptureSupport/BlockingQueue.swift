import Dispatch

/// Blocking work (decoding a picture, reading a file, reconfiguring a pipeline) awaited on a dispatch queue of
/// its own instead of Swift's cooperative pool. That pool has one thread per core, shared by every task of
/// the process: on a two-core kiosk two slow decodes would stall every web request and command behind them.
/// Serial: what it runs takes its turn, so a burst of work costs one core at most.
public struct BlockingQueue: Sendable {
    private let queue: DispatchQueue

    public init(label: String, qos: DispatchQoS = .utility) {
        queue = DispatchQueue(label: label, qos: qos)
    }

    public func run<Value: Sendable>(_ work: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: work()) }
        }
    }

    public func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
