import Foundation
import GStreamerKit

/// Recordings interrupted by a crash or power cut: their movie lacks at most its last fragment and plays as
/// it is; the Matroska sidecar written beside it holds the same encoded frames up to the last few
/// milliseconds, and remuxing it recovers them.
enum MovieRecovery {
    static func sidecarURL(for movie: URL) -> URL {
        movie.deletingLastPathComponent().appendingPathComponent(".\(movie.lastPathComponent).gcapture-recovery.mkv")
    }

    /// Movies in `directory` whose recording did not finish (a sidecar is still there).
    static func interruptedRecordings(in directory: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap { name -> URL? in
            guard name.hasPrefix("."), name.hasSuffix(".gcapture-recovery.mkv") else { return nil }
            let movie = String(name.dropFirst().dropLast(".gcapture-recovery.mkv".count))
            return directory.appendingPathComponent(movie)
        }.sorted { $0.path < $1.path }
    }

    /// Remuxes the sidecar into a plain MP4 that replaces the movie atomically, with the display matrix the
    /// interrupted movie's header carries (the sidecar has none), then removes the sidecar.
    static func recover(_ movie: URL, includeAudio: Bool = true) throws(CaptureError) {
        let sidecar = sidecarURL(for: movie)
        try MovieRemux.remux(sidecar, as: .matroska, replacing: movie, includeAudio: includeAudio,
                             rotation: MP4DisplayMatrix.rotation(ofMovieAt: movie))
        try? FileManager.default.removeItem(at: sidecar)
    }
}
