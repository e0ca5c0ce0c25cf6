/// The size a recording's finished file will have: its encoded samples and what the container adds to
/// them. It is an upper bound, so that a recording stopped at its size limit never passes it, and a tight
/// one, so that it stops within about a frame of it.
///
/// An MP4 recording takes two forms: the fragmented file mp4mux writes while recording (and which stays
/// when defragmenting fails or the process dies), and the file defragmented from it at the stop. The
/// estimate is the larger of the two. The terms were measured on GStreamer 1.22 with this engine's streams
/// (H.264 without B-frames, AAC), from files' boxes:
///
/// - fragmented: ftyp and the initial moov, about 940 bytes with video alone and 1,510 with audio too;
///   per fragment a moof and an mdat header (92 bytes) and an index entry in the mfra (11); per sample a
///   trun entry of 12 bytes, 16 when the sample durations vary (a real camera's timestamps jitter);
/// - defragmented: ftyp, free, an XMP uuid box and the moov, about 1,770 bytes with video alone and 2,290
///   with audio too; per sample 4 bytes in stsz and, when durations vary, 8 in stts; 4 per key frame in
///   stss; and per track a chunk entry (stco, stsc) each time mp4mux's 250 ms of interleave have gathered.
///
/// Each term below is the measured one with a margin. Matroska adds less than this MP4 (measured: 8 to 12
/// bytes a sample, 1 KB of headers and cues), so the same bound keeps a Matroska file within the limit too.
struct MovieSizeEstimate: Sendable {
    /// One encoded sample on its way to the muxer.
    struct Sample: Sendable {
        var bytes: Int
        /// Nanoseconds; nil when the buffer does not say, then the track's last duration counts.
        var duration: UInt64?
        var isKeyFrame = true
    }

    /// A track's samples counted the way mp4mux cuts fragments (qtmux's fragment_add_buffer): a new one at
    /// the track's first sample, at each key frame of a track that has delta frames (video), and when a
    /// sample no longer fits in what is left of the fragment's duration.
    private struct Track: Sendable {
        let cutsAtKeyFrames: Bool
        var samples: Int64 = 0
        var keyFrames: Int64 = 0
        var fragments: Int64 = 0
        /// Nanoseconds of the track's samples.
        var duration: UInt64 = 0
        var lastSampleDuration: UInt64 = 0
        var fragmentTimeLeft: UInt64 = 0

        mutating func add(_ sample: Sample, fragmentDuration: UInt64) {
            let sampleDuration = sample.duration.flatMap { $0 > 0 ? $0 : nil } ?? lastSampleDuration
            lastSampleDuration = sampleDuration
            if samples == 0 || (cutsAtKeyFrames && sample.isKeyFrame) || fragmentTimeLeft < sampleDuration {
                fragments += 1
                fragmentTimeLeft = fragmentDuration
            }
            fragmentTimeLeft -= min(fragmentTimeLeft, sampleDuration)
            samples += 1
            if sample.isKeyFrame { keyFrames += 1 }
            duration += sampleDuration
        }

        /// Chunk entries of the defragmented file: one each 250 ms of the track (mp4mux's interleave time),
        /// up to 16 bytes each (an stco offset, and an stsc entry when the chunk's sample count changes).
        var chunkBytes: Int64 { samples == 0 ? 0 : (Int64(duration / 250_000_000) + 1) * 16 }
    }

    private static let fragmentedHeaderBytes: (videoOnly: Int64, withAudio: Int64) = (1_024, 1_600)
    private static let defragmentedHeaderBytes: (videoOnly: Int64, withAudio: Int64) = (1_840, 2_400)
    private static let bytesPerFragment: Int64 = 104
    private static let fragmentedBytesPerSample: Int64 = 16
    private static let defragmentedBytesPerSample: Int64 = 12
    private static let defragmentedBytesPerKeyFrame: Int64 = 4

    /// mp4mux's fragment-duration, nanoseconds.
    let fragmentDuration: UInt64
    /// Whether the file has an audio track, whose headers count from the start.
    let withAudio: Bool
    private var sampleBytes: Int64 = 0
    private var video: Track
    private var audio: Track

    init(fragmentDuration: UInt64, withAudio: Bool) {
        self.fragmentDuration = max(1, fragmentDuration)
        self.withAudio = withAudio
        video = Track(cutsAtKeyFrames: true)
        audio = Track(cutsAtKeyFrames: false)
    }

    /// The estimate with one more sample in the video track, or the audio one.
    func adding(_ sample: Sample, toVideo: Bool) -> MovieSizeEstimate {
        var next = self
        next.sampleBytes += Int64(sample.bytes)
        if toVideo {
            next.video.add(sample, fragmentDuration: fragmentDuration)
        } else {
            next.audio.add(sample, fragmentDuration: fragmentDuration)
        }
        return next
    }

    /// The finished file's size in bytes, the larger of its two forms.
    var bytes: Int64 { sampleBytes + max(fragmentedOverhead, defragmentedOverhead) }

    private var fragmentedOverhead: Int64 {
        let header = withAudio ? Self.fragmentedHeaderBytes.withAudio : Self.fragmentedHeaderBytes.videoOnly
        return header + (video.fragments + audio.fragments) * Self.bytesPerFragment
            + (video.samples + audio.samples) * Self.fragmentedBytesPerSample
    }

    private var defragmentedOverhead: Int64 {
        let header = withAudio ? Self.defragmentedHeaderBytes.withAudio : Self.defragmentedHeaderBytes.videoOnly
        return header + (video.samples + audio.samples) * Self.defragmentedBytesPerSample
            + video.keyFrames * Self.defragmentedBytesPerKeyFrame + video.chunkBytes + audio.chunkBytes
    }
}
