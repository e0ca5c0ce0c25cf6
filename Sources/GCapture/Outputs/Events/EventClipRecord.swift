import Foundation

/// What an event's clip holds, written beside it as JSON (`clip.json` for `clip.mp4`) when it is finished:
/// for a gallery, a search, or a person wondering why the camera recorded at 3 a.m.
public struct EventClipRecord: Sendable, Codable, Equatable {
    /// The clip's file name (in the same folder as the record).
    public var file: String
    /// When its first frame was captured (the pre-roll before the first trigger) and its last.
    public var start: Date
    public var end: Date
    /// Seconds of movie, pauses (the quiet part of a gap) excluded.
    public var duration: Double
    public var preRoll: Double
    public var postRoll: Double
    public var triggers: [CaptureEventRecorder.Trigger]
    /// Whether the file is complete (a failure leaves it playable up to the failure).
    public var complete: Bool
    public var error: String?

    init(clip: CaptureEventRecorder.Clip, statistics: CaptureMovieFileOutput.Statistics, fileEnd: Date, postRoll: Double,
         complete: Bool, error: String?) {
        file = clip.url.lastPathComponent
        let first = clip.triggers.first?.date ?? fileEnd
        start = first.addingTimeInterval(-statistics.preRollDuration)
        end = fileEnd
        duration = statistics.duration
        preRoll = statistics.preRollDuration
        self.postRoll = postRoll
        triggers = clip.triggers
        self.complete = complete
        self.error = error
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
