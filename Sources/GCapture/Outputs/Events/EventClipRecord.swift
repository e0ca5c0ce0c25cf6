import Foundation

/// What an event's clip holds, written beside it as JSON (`clip.json` for `clip.mp4`): for a gallery, a
/// search, or a person wondering why the camera recorded at 3 a.m. It is written `open` when the clip's
/// first frame is in the file and again at each trigger, so that a clip a crash cuts keeps its record;
/// the recovery that rebuilds such a clip closes it (`recovered`).
public struct EventClipRecord: Sendable, Codable, Equatable {
    /// The clip's file name (in the same folder as the record).
    public var file: String
    /// When its first frame was captured (the pre-roll before the first trigger) and its last (nil while open).
    public var start: Date
    public var end: Date?
    /// Seconds of movie, pauses (the quiet part of a gap) excluded; nil while open.
    public var duration: Double?
    public var preRoll: Double
    public var postRoll: Double
    public var triggers: [CaptureEventRecorder.Trigger]
    /// Whether the file is complete (a failure leaves it playable up to the failure).
    public var complete: Bool
    /// The clip is being recorded; still true after the process ended, a crash cut it.
    public var open: Bool
    /// The clip was cut by a crash and rebuilt from its sidecar at a later start: `end` and `duration` are
    /// the rebuilt file's.
    public var recovered: Bool
    public var error: String?

    /// The record of a clip whose first frame is in its file.
    init(clip: CaptureEventRecorder.Clip, preRoll: Double, postRoll: Double) {
        file = clip.url.lastPathComponent
        start = (clip.triggers.first?.date ?? Date()).addingTimeInterval(-preRoll)
        self.preRoll = preRoll
        self.postRoll = postRoll
        triggers = clip.triggers
        complete = false
        open = true
        recovered = false
    }

    /// The record of a finished clip.
    init(clip: CaptureEventRecorder.Clip, statistics: CaptureMovieFileOutput.Statistics, fileEnd: Date, postRoll: Double,
         complete: Bool, error: String?) {
        self.init(clip: clip, preRoll: statistics.preRollDuration, postRoll: postRoll)
        end = fileEnd
        duration = statistics.duration
        self.complete = complete
        open = false
        self.error = error
    }

    // Decoded by hand only so that a record written before `open` and `recovered` existed still reads.
    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        file = try values.decode(String.self, forKey: .file)
        start = try values.decode(Date.self, forKey: .start)
        end = try values.decodeIfPresent(Date.self, forKey: .end)
        duration = try values.decodeIfPresent(Double.self, forKey: .duration)
        preRoll = try values.decode(Double.self, forKey: .preRoll)
        postRoll = try values.decode(Double.self, forKey: .postRoll)
        triggers = try values.decode([CaptureEventRecorder.Trigger].self, forKey: .triggers)
        complete = try values.decode(Bool.self, forKey: .complete)
        open = try values.decodeIfPresent(Bool.self, forKey: .open) ?? false
        recovered = try values.decodeIfPresent(Bool.self, forKey: .recovered) ?? false
        error = try values.decodeIfPresent(String.self, forKey: .error)
    }

    /// After `MovieRecovery` rebuilt the clip at `url` (`duration` seconds): an open record beside it is
    /// closed. No pause is known after a crash, so its end is counted from its start.
    static func closeAfterRecovery(ofClip url: URL, duration: Double) {
        guard var record = try? read(forClip: url), record.open else { return }
        record.end = record.start.addingTimeInterval(duration)
        record.duration = duration
        record.open = false
        record.recovered = true
        record.error = "the recording was cut short (the process ended); rebuilt from its recovery sidecar"
        record.write(beside: url)
    }

    /// Where the record of the clip at `url` is.
    public static func url(forClip url: URL) -> URL { url.deletingPathExtension().appendingPathExtension("json") }

    /// Reads the record beside a clip.
    public static func read(forClip url: URL) throws -> EventClipRecord {
        try decoder.decode(EventClipRecord.self, from: Data(contentsOf: Self.url(forClip: url)))
    }

    /// Writes the record beside the clip, whole or not at all.
    func write(beside url: URL) {
        do {
            try Self.encoder.encode(self).write(to: Self.url(forClip: url), options: .atomic)
        } catch {
            Log.session.error("cannot write the event record beside \(url.path): \(error)")
        }
    }

    /// 2026-11-27T15:20:00.123Z: ISO 8601 in UTC, to the millisecond.
    private static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Self.timeStyle))
        }
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = try? Self.timeStyle.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 time: \(text)"))
            }
            return date
        }
        return decoder
    }
}
