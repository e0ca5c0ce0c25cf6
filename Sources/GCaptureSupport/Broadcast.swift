import Foundation
import Synchronization

/// Fans values out to any number of AsyncStreams, one per consumer; a stream leaves when its consumer
/// stops iterating. Hotplug events, runtime errors and frames all reach their listeners this way.
public final class Broadcast<Value: Sendable>: Sendable {
    public init() {}

    @usableFromInline let continuations = Locked<[UUID: AsyncStream<Value>.Continuation]>([:])

    public func makeStream(bufferingPolicy: AsyncStream<Value>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: bufferingPolicy)
        let key = UUID()
        continuations.withLock { $0[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: key) }
        }
        return stream
    }

    /// Hands `value` to every stream; one result per stream (a stream that keeps only the newest value
    /// reports `.dropped` for the one it let go).
    @discardableResult
    @inlinable  // called for every frame: specialized where it is called (see Lock.withLock)
    public func yield(_ value: Value) -> [AsyncStream<Value>.Continuation.YieldResult] {
        continuations.withLock { Array($0.values) }.map { $0.yield(value) }
    }

    /// Ends every stream; consumers' loops finish.
    public func finishAll() {
        let ended = continuations.withLock { state in
            defer { state.removeAll() }
            return Array(state.values)
        }
        for continuation in ended { continuation.finish() }
    }
}
