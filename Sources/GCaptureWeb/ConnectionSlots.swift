import GCaptureSupport
import NIOCore

/// The connections the server keeps open, at most `limit` at once. A connection that is being answered, or
/// holds a live view or an event stream, keeps its slot; one that has not sent a whole request yet, or waits
/// between requests, gives its slot up to a newcomer when all are taken: the one that has waited longest is
/// closed. So sockets that trickle a header a byte at a time (a slow-loris) cannot lock a real browser out;
/// they only push each other out, and each is closed anyway once its request deadline passes. A newcomer is
/// refused only while every slot is answering.
final class ConnectionSlots: Sendable {
    enum Admission {
        /// Let in; `evicting` is the waiting connection whose slot it takes, to be closed.
        case admitted(evicting: (any Channel)?)
        case refused
    }

    private struct Slot {
        var channel: any Channel
        var busy: Bool
        /// When it began to wait for a request, in admissions and hand-backs: the smallest waited longest.
        var waitingSince: UInt64
    }

    private struct State {
        var slots: [ObjectIdentifier: Slot] = [:]
        var clock: UInt64 = 0
    }

    let limit: Int
    private let state = Locked(State())

    init(limit: Int) { self.limit = limit }

    func admit(_ channel: any Channel) -> Admission {
        state.withLock { state in
            var evicted: (any Channel)?
            if state.slots.count >= limit {
                guard let oldest = state.slots.filter({ !$0.value.busy }).min(by: { $0.value.waitingSince < $1.value.waitingSince })
                else { return .refused }
                evicted = state.slots.removeValue(forKey: oldest.key)?.channel
            }
            state.clock += 1
            state.slots[ObjectIdentifier(channel)] = Slot(channel: channel, busy: false, waitingSince: state.clock)
            return .admitted(evicting: evicted)
        }
    }

    /// Busy from a request's head to its answer's end (or the stream's close); waiting again after.
    func setBusy(_ busy: Bool, _ channel: any Channel) {
        state.withLock { state in
            let key = ObjectIdentifier(channel)
            guard state.slots[key] != nil else { return }
            state.clock += 1
            state.slots[key]!.busy = busy
            if !busy { state.slots[key]!.waitingSince = state.clock }
        }
    }

    func remove(_ channel: any Channel) {
        _ = state.withLock { $0.slots.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    var current: Int { state.withLock { $0.slots.count } }
}
