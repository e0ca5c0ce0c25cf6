import Foundation
import GCaptureSupport

/// `record --pre-roll`: the recording starts at a trigger, a line on stdin (Enter) or SIGUSR2, and begins the
/// pre-roll before it. A stop signal while waiting ends the wait with nothing recorded.
final class TriggerWait: Sendable {
    enum Outcome: Equatable { case triggered(String), stopped }

    private let outcome = Locked<Outcome?>(nil)

    /// The signal action to install (StopSignals.install runs first thing in a command).
    var signalAction: @Sendable () -> Void { { [weak self] in self?.settle(.triggered("SIGUSR2")) } }

    /// Waits for the first of: a line on stdin, SIGUSR2, a stop signal. stdin at its end (nothing piped, or
    /// /dev/null) leaves SIGUSR2 and the stop signals.
    func wait() async -> Outcome {
        StopSignals.shared.onStop { [weak self] _ in self?.settle(.stopped) }
        let lines = StandardInputLines.stream()
        let reader = Task { [weak self] in
            for await _ in lines { self?.settle(.triggered("stdin")); return }
        }
        defer { reader.cancel() }
        while true {
            if let outcome = outcome.withLock({ $0 }) { return outcome }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private func settle(_ value: Outcome) {
        outcome.withLock { if $0 == nil { $0 = value } }
    }
}
