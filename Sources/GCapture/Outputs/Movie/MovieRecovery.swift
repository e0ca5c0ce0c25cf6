import Foundation
import GStreamerKit

/// Recordings interrupted by a crash or power cut: their movie lacks at most its last fragment and plays as
/// it is; the Matroska sidecar written beside it holds the same encoded frames up to the last few
/// milliseconds, and remuxing it recovers them.
enum MovieRecovery {
    static func sidecarURL(for movie: URL) -> URL {
        movie.deletingLastPathComponent().appendingPathComponent(".\(movie.lastPathComponent).gcapture-recovery.mkv")
    }

    /// Movies in `directory` whose recording did not finish: a sidecar is still there and no live
    /// recording, in this process or another, holds its lock.
    static func interruptedRecordings(in directory: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        let interrupted = names.compactMap { name -> URL? in
            guard name.hasPrefix("."), name.hasSuffix(".gcapture-recovery.mkv") else { return nil }
            let movie = directory.appendingPathComponent(String(name.dropFirst().dropLast(".gcapture-recovery.mkv".count)))
            return SidecarLock.isHeld(on: sidecarURL(for: movie)) ? nil : movie
        }.sorted { $0.path < $1.path }
        // A copy a crash interrupted is worthless (its source is still there and is copied again); one whose
        // recording is still settling is left alone.
        for name in names where name.hasPrefix(".") && name.hasSuffix(MovieRemux.temporarySuffix) {
            let movie = directory.appendingPathComponent(String(name.dropFirst().dropLast(MovieRemux.temporarySuffix.count)))
            if !SidecarLock.isHeld(on: sidecarURL(for: movie)) {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            }
        }
        return interrupted
    }

    /// Remuxes the sidecar into a plain MP4 that replaces the movie atomically, with the display matrix the
    /// interrupted movie's header carries (the sidecar has none), then removes the sidecar. The new movie is
    /// durable before its sidecar goes (see DurableFile). Returns the recovered movie's duration, seconds.
    @discardableResult
    static func recover(_ movie: URL, includeAudio: Bool = true) throws(CaptureError) -> Double {
        let sidecar = sidecarURL(for: movie)
        try MovieRemux.remux(sidecar, as: .matroska, replacing: movie, includeAudio: includeAudio,
                             rotation: MP4DisplayMatrix.rotation(ofMovieAt: movie))
        DurableFile.remove(sidecar.path)
        let duration = (try? MediaInfo.discover(movie, timeout: 10 * .second))?.duration
        return duration.map { Double($0) / 1e9 } ?? 0
    }

    /// What became of an interrupted recording found at a start.
    enum Outcome: Sendable {
        case recovered(URL, duration: Double)
        /// Its sidecar could not be remuxed and was set aside under `setAside` (nil: it could not be moved
        /// either), so that it is reported once and never tried again.
        case failed(URL, setAside: URL?, CaptureError)
    }

    static let failedSidecarSuffix = ".gcapture-recovery.failed.mkv"

    /// Where a sidecar that cannot be recovered is kept for the user (a tool may still read some of it);
    /// its name no longer looks like a sidecar's, so no later start retries it.
    static func failedSidecarURL(for movie: URL) -> URL {
        movie.deletingLastPathComponent().appendingPathComponent(".\(movie.lastPathComponent)\(failedSidecarSuffix)")
    }

    /// Recovers every interrupted recording in `directory` (and closes the record of an event's clip among
    /// them); blocks while remuxing. A sidecar without a single frame (killed before the first one) is removed without a word: there was nothing to lose.
    static func recoverAll(in directory: URL) -> [Outcome] {
        interruptedRecordings(in: directory).compactMap { movie -> Outcome? in
            do throws(CaptureError) {
                let duration = try recover(movie)
                // An event's clip: its record, left open by the crash, says what was rebuilt.
                EventClipRecord.closeAfterRecovery(ofClip: movie, duration: duration)
                return .recovered(movie, duration: duration)
            } catch {
                let sidecar = sidecarURL(for: movie)
                guard MovieFiles.holdsFrames(sidecar) else {
                    DurableFile.remove(sidecar.path)
                    return nil
                }
                let aside = failedSidecarURL(for: movie)
                if let failure = DurableFile.rename(sidecar.path, to: aside.path) {
                    Log.movie.error("cannot set aside \(sidecar.path): \(failure)")
                    return .failed(movie, setAside: nil, error)
                }
                return .failed(movie, setAside: aside, error)
            }
        }
    }
}

/// Marks a sidecar as its recording's while that recording runs and settles: an advisory lock (flock) that
/// the kernel drops when the process dies, so a crash's sidecar is free for recovery and a live one in
/// another process or session is never mistaken for it. Released when the last reference goes.
final class SidecarLock: Sendable {
    private let descriptor: Int32

    enum Failure: Error, Equatable {
        /// Another live recording holds it.
        case held
        /// It cannot be created there (errno).
        case cannotCreate(Int32)
    }

    /// Creates the sidecar if needed and locks it.
    init(on sidecar: URL) throws(Failure) {
        let descriptor = open(sidecar.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .cannotCreate(errno) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw .held
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    static func isHeld(on sidecar: URL) -> Bool {
        let descriptor = open(sidecar.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_EX | LOCK_NB) != 0
    }
}
