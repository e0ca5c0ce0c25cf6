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

    /// Remuxes the sidecar into a normal MP4 that replaces the movie atomically, then removes the sidecar.
    /// Blocks while it copies (no re-encoding).
    static func recover(_ movie: URL, includeAudio: Bool = true, timeout: TimeInterval = 120) throws(CaptureError) {
        let sidecar = sidecarURL(for: movie)
        let temporary = movie.deletingLastPathComponent().appendingPathComponent(".\(movie.lastPathComponent).recovering.mp4")
        defer { try? FileManager.default.removeItem(at: temporary) }
        do {
            // Each stream the sidecar really has gets a path to the muxer: a path for a missing stream
            // would leave the muxer waiting for it forever.
            let streams = try MediaInfo.discover(sidecar)
            var description = "filesrc name=in ! matroskademux name=demux  mp4mux name=mux ! filesink name=out"
            if streams.videoStreamCount > 0 { description += "  demux.video_0 ! queue ! h264parse ! mux.video_0" }
            if includeAudio, streams.audioStreamCount > 0 { description += "  demux.audio_0 ! queue ! aacparse ! mux.audio_0" }
            let pipeline = try Pipeline.launch(description)
            try pipeline.element(named: "in")?.set("location", sidecar.path)
            try pipeline.element(named: "out")?.set("location", temporary.path)
            // The sidecar carries no orientation; the interrupted movie's header does.
            if let rotation = MP4DisplayMatrix.rotation(ofMovieAt: movie), let pad = pipeline.element(named: "out")?.staticPad("sink") {
                MP4DisplayMatrix.apply(rotation: rotation, toMoviesPassing: pad)
            }
            defer { pipeline.shutDown() }
            try pipeline.setState(.playing)
            let deadline = Date().addingTimeInterval(timeout)
            waiting: while Date() < deadline {
                guard let message = pipeline.bus.pop(timeout: 100 * .millisecond) else { continue }
                switch message.kind {
                case .endOfStream: break waiting
                case .error(let error): throw error
                default: continue
                }
            }
        } catch let error as GStreamerError {
            throw .recordingFailed(reason: "cannot recover \(movie.path) from its sidecar", underlying: error)
        } catch {
            throw .recordingFailed(reason: "cannot recover \(movie.path): \(error)", underlying: nil)
        }
        guard rename(temporary.path, movie.path) == 0 else {
            throw .recordingFailed(reason: "cannot replace \(movie.path) with its recovered version", underlying: nil)
        }
        try? FileManager.default.removeItem(at: sidecar)
    }
}
