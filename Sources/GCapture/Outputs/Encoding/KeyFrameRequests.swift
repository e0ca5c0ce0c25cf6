import GStreamerKit

/// Asks an encoder element for a key frame now, at most every 200 ms: whoever needs one (a branch joining, a
/// viewer that lost a picture) asks, and several asking at once need only one. Any thread.
final class KeyFrameRequests: Sendable {
    private let encoder: Element?
    private let lastRequest = Locked<ContinuousClock.Instant?>(nil)

    init(to encoder: Element?) { self.encoder = encoder }

    func request() {
        let now = ContinuousClock.now
        let due = lastRequest.withLock { last -> Bool in
            if let last, now - last < .milliseconds(200) { return false }
            last = now
            return true
        }
        if due { _ = encoder?.sendEvent(.keyFrameRequest()) }
    }
}
