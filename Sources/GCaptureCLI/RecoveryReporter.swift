import Foundation
import GCapture

/// Says what the movie output recovered from a recording a crash or power cut interrupted (it does so before
/// the new recording starts): a line on stderr always — the user must learn that a take came back, and
/// where — and with --json also a `recovered` (or `recoveryFailed`) event on stdout.
final class RecoveryReporter {
    private let observers: [any NSObjectProtocol]

    init(_ movie: CaptureMovieFileOutput, json: Bool) {
        let center = NotificationCenter.default
        observers = [
            center.addObserver(forName: CaptureMovieFileOutput.didRecoverMovieNotification, object: movie, queue: nil) { note in
                let path = note.userInfo?[CaptureMovieFileOutput.recoveredMoviePathKey] as? String ?? "?"
                let duration = note.userInfo?[CaptureMovieFileOutput.recoveredMovieDurationKey] as? Double ?? 0
                Self.report(["event": "recovered", "path": path, "duration": duration], json: json,
                            line: "recovered \(path) (\(String(format: "%.2f", duration)) s) from an interrupted recording")
            },
            center.addObserver(forName: CaptureMovieFileOutput.didFailToRecoverMovieNotification, object: movie, queue: nil) { note in
                let path = note.userInfo?[CaptureMovieFileOutput.recoveredMoviePathKey] as? String ?? "?"
                let error = note.userInfo?[CaptureMovieFileOutput.recoveryErrorKey].map { "\($0)" } ?? "unknown error"
                let aside = note.userInfo?[CaptureMovieFileOutput.failedSidecarPathKey] as? String
                Self.report(["event": "recoveryFailed", "path": path, "error": error, "sidecar": aside ?? NSNull()], json: json,
                            line: "cannot recover \(path) from an interrupted recording: \(error)"
                                + (aside.map { "; what was left of it is kept as \($0)" } ?? ""))
            },
        ]
    }

    deinit { observers.forEach(NotificationCenter.default.removeObserver) }

    private static func report(_ event: [String: Any], json: Bool, line: String) {
        FileHandle.standardError.write(Data("gcapture: \(line)\n".utf8))
        if json { JSONLine.print(event) }
    }
}
