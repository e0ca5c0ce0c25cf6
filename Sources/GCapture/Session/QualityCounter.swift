import GStreamerKit

extension SessionGraph {
    /// QoS messages so far, and the buffers the elements that posted them say they dropped.
    struct QualityFigures: Sendable, Equatable {
        var messages = 0
        var droppedBuffers: UInt64 = 0
    }
}

/// The graph's QoS messages, counted on the streaming threads that post them: what system pressure reads as
/// lateness, and what a stopped graph reports.
final class QualityCounter: Sendable {
    private struct Counts {
        var messages = 0
        /// Each element's own counter is cumulative: its latest, by element path.
        var dropped: [String: UInt64] = [:]
    }

    private let counts = Locked(Counts())

    var figures: SessionGraph.QualityFigures {
        counts.withLock { .init(messages: $0.messages, droppedBuffers: $0.dropped.values.reduce(0, +)) }
    }

    /// Runs on a streaming thread: a counter, and a debug line (an element behind the clock posts one per
    /// late buffer, so anything louder would flood the log).
    func count(_ qos: QualityOfService, from element: String) {
        counts.withLock { counts in
            counts.messages += 1
            counts.dropped[element] = max(counts.dropped[element] ?? 0, qos.dropped)
        }
        Log.session.debug("QoS: a buffer \(qos.jitter / 1_000_000) ms late", metadata: [
            "element": .string(element), "processed": .stringConvertible(qos.processed),
            "dropped": .stringConvertible(qos.dropped),
        ])
    }
}
