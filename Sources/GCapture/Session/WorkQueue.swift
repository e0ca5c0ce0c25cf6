import Dispatch

/// The serial queue a session's blocking and async calls both run on, one after another. A call made from the
/// queue itself (a notification observer that changes the session) runs at once instead of deadlocking.
final class WorkQueue: Sendable {
    let queue: DispatchQueue
    private let key = DispatchSpecificKey<Bool>()

    init(label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: key, value: true)
    }

    /// Runs `body` on the queue and waits for it.
    func sync<T>(_ body: () throws(CaptureError) -> T) throws(CaptureError) -> T {
        if DispatchQueue.getSpecific(key: key) == true { return try body() }
        let result: Result<T, CaptureError> = queue.sync { () -> Result<T, CaptureError> in
            do throws(CaptureError) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    func sync<T>(_ body: () -> T) -> T {
        if DispatchQueue.getSpecific(key: key) == true { return body() }
        return queue.sync(execute: body)
    }

    /// Runs `body` on the queue without blocking the caller.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws(CaptureError) -> T) async throws(CaptureError) -> T {
        let result: Result<T, CaptureError> = await withCheckedContinuation { continuation in
            queue.async {
                do throws(CaptureError) { continuation.resume(returning: .success(try body())) }
                catch { continuation.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }

    func run(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { body(); continuation.resume() }
        }
    }
}
