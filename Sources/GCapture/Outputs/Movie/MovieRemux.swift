import Foundation
import GStreamerKit

/// Copies a movie's encoded streams (no re-encoding) into a plain MP4 — one index, no fragments — that
/// atomically and durably replaces a destination: how a crash's sidecar is recovered and how a cleanly stopped
/// fragmented recording becomes the file every tool expects. Blocks while it copies.
enum MovieRemux {
    enum Source: String {
        case matroska = "matroskademux"
        case mp4 = "qtdemux"
    }

    /// Which tracks a source has, when the caller knows (its own recording); nil asks GStreamer's
    /// discoverer, which decodes a little of each stream and so costs memory for a frame's worth of buffers.
    struct Tracks: Sendable {
        var video: Bool
        var audio: Bool
    }

    /// `rotation` becomes the new movie's display matrix (see MP4DisplayMatrix); the destination is only
    /// replaced once the copy is complete, so a failure or crash midway leaves it as it was. `watch` sees
    /// the copying pipeline (elements "in", "demux", "mux", "out") before it starts, for tests.
    static func remux(_ source: URL, as kind: Source, tracks: Tracks? = nil, replacing destination: URL,
                      includeAudio: Bool = true, rotation: Int?, timeout: TimeInterval = 600,
                      watch: ((Pipeline) -> Void)? = nil) throws(CaptureError) {
        let temporary = temporaryURL(for: destination)
        defer { try? FileManager.default.removeItem(at: temporary) }
        do {
            try copyStreams(of: source, as: kind, tracks: tracks, to: temporary, includeAudio: includeAudio,
                            rotation: rotation, timeout: timeout, watch: watch)
        } catch {
            throw .recordingFailed(reason: "cannot rewrite \(source.lastPathComponent) as \(destination.path)", underlying: error as? GStreamerError)
        }
        // Durable before it replaces the destination, and the replacement durable before this returns: the
        // caller removes the sidecar next, and a power cut must leave one of the two.
        if let failure = DurableFile.publish(temporary.path, as: destination.path) {
            throw .recordingFailed(reason: "cannot replace \(destination.path): \(failure)", underlying: nil)
        }
    }

    static let temporarySuffix = ".remuxing.mp4"

    /// Where the copy is written before it replaces `destination`; a crash can leave it behind.
    static func temporaryURL(for destination: URL) -> URL {
        destination.deletingLastPathComponent().appendingPathComponent(".\(destination.lastPathComponent)\(temporarySuffix)")
    }

    /// Buffers of each stream read ahead of the muxer (about a second of video): multiqueue's only soft
    /// limit, the one it raises for a full queue while another is empty (its time and byte limits are hard).
    static let readAheadBuffers = 32

    private static func copyStreams(of source: URL, as kind: Source, tracks: Tracks?, to temporary: URL,
                                    includeAudio: Bool, rotation: Int?, timeout: TimeInterval,
                                    watch: ((Pipeline) -> Void)?) throws {
        // Each stream the source really has gets a path to the muxer: a path for a missing stream would
        // leave the muxer waiting for it forever.
        let streams = try tracks ?? {
            let info = try MediaInfo.discover(source)
            return Tracks(video: info.videoStreamCount > 0, audio: info.audioStreamCount > 0)
        }()
        // The demuxer reads far faster than the muxer writes: behind unbounded queues it read a whole
        // recording into memory (a minute at 1.2 Mbit/s: 1,800 buffers, 7.5 MiB) on every stop, and glibc
        // kept much of it resident. A multiqueue bounds what is read ahead, yet lets one stream's queue grow
        // while the other's is empty (a track that ends early, tracks interleaved a fragment of several
        // seconds apart), so the demuxer never stalls before the muxer has each track's next buffer.
        var description = "filesrc name=in ! \(kind.rawValue) name=demux  mp4mux name=mux ! filesink name=out  "
            + "multiqueue name=ahead max-size-buffers=\(readAheadBuffers) max-size-bytes=0 max-size-time=0"
        if streams.video { description += "  demux.video_0 ! ahead.sink_0  ahead.src_0 ! h264parse ! mux.video_0" }
        if includeAudio, streams.audio { description += "  demux.audio_0 ! ahead.sink_1  ahead.src_1 ! aacparse ! mux.audio_0" }
        let pipeline = try Pipeline.launch(description)
        defer { pipeline.shutDown() }
        try pipeline.element(named: "in")?.set("location", source.path)
        try pipeline.element(named: "out")?.set("location", temporary.path)
        // qtdemux starts a fragmented movie at its first fragment's decode time: when that fragment is the
        // audio's, which begins a few milliseconds after the video, the muxer clipped the first key frame
        // and the copy started with frames that cannot be decoded.
        // It also gives each fragment of a movie from a real camera the frame rate that fragment's jittery
        // frame durations make (106/3, 111/4...), and mp4mux wrote each new caps as one more sample
        // description, all with the same codec data: one per fragment. A track keeps its first caps unless
        // more than the frame rate changes.
        for track in ["video_0", "audio_0"] {
            let firstCaps = Locked<Caps?>(nil)
            pipeline.element(named: "mux")?.staticPad(track)?.addProbe(.downstreamEvent) { info in
                if let caps = info.eventCaps {
                    let keptCaps = firstCaps.withLock { first in
                        if first == nil { first = caps }
                        return first!
                    }
                    let onlyTheRateChanged = keptCaps !== caps && keptCaps.removingField("framerate") == caps.removingField("framerate")
                    return onlyTheRateChanged ? .drop : .ok
                }
                info.extendSegmentToZero()
                return .ok
            }
        }
        if let rotation, let pad = pipeline.element(named: "out")?.staticPad("sink") {
            MP4DisplayMatrix.apply(rotation: rotation, toMoviesPassing: pad)
        }
        watch?(pipeline)
        try pipeline.setState(.playing)
        let deadline = Date().addingTimeInterval(timeout)
        waiting: while true {
            guard Date() < deadline else {
                throw GStreamerError(kind: .timeout, message: "remuxing \(source.lastPathComponent) took over \(String(format: "%g", timeout)) s")
            }
            guard let message = pipeline.bus.pop(timeout: 100 * .millisecond) else { continue }
            switch message.kind {
            case .endOfStream: break waiting
            case .error(let error): throw error
            case .warning(let warning):
                Log.movie.warning("remuxing \(source.lastPathComponent): \(warning.message)", metadata: warning.logMetadata)
            default: continue
            }
        }
    }
}
