/// What a device captures.
public enum MediaType: String, Sendable, Codable, CaseIterable {
    case video, audio
}
