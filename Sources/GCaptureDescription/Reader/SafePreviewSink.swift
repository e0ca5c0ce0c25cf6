/// The preview sinks a description from untrusted hands may name (`--safe`): one display sink by name, with
/// only properties that change how frames are shown. A gst-launch fragment there could write files anywhere
/// (filesink, multifilesink) or send the camera onto the network (tcpserversink, udpsink), which --safe
/// forbids everywhere else (outputs.stream, folders outside the root).
enum SafePreviewSink {
    static let sinks = ["auto", "autovideosink", "fakesink", "glimagesink", "kmssink", "waylandsink", "ximagesink", "xvimagesink"]
    /// Properties that cannot name a place. Any other can, or may in a future plugin: location, host,
    /// port, device, display (an X display may be another machine's), fd, socket, bus-id...
    static let properties = ["async", "force-aspect-ratio", "max-lateness", "qos", "sync"]

    /// Why `value` is refused under --safe, as the rest of a sentence that starts with the key's name; nil
    /// when it is allowed.
    static func refusal(of value: String) -> String? {
        if value.contains("!") {
            return " is a chain of GStreamer elements ('!'), which --safe does not allow: it names one display sink (\(sinks.joined(separator: ", ")))"
        }
        let words = value.split(whereSeparator: \.isWhitespace).map(String.init)
        let element = words.first ?? ""
        guard sinks.contains(element) else {
            return " '\(shortened(element))' is not a display sink; under --safe it is one of: \(sinks.joined(separator: ", "))"
        }
        if element == "auto", words.count > 1 { return ": 'auto' takes no properties; name the sink to give it some" }
        for word in words.dropFirst() {
            let parts = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let plain = ": '\(shortened(word))' is not a plain property=value (letters, digits and . _ + -), which --safe requires"
            guard parts.count == 2, isPlain(parts[0]) else { return plain }
            guard properties.contains(parts[0]) else {
                return ": the property '\(shortened(parts[0]))' is not allowed under --safe (it could name a file, host, port, device or socket); allowed: \(properties.joined(separator: ", "))"
            }
            guard isPlain(parts[1]) else { return plain }
        }
        return nil
    }

    private static let plainCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-")

    private static func isPlain(_ text: String) -> Bool { !text.isEmpty && text.allSatisfy(plainCharacters.contains) }

    private static func shortened(_ text: String) -> String { text.count > 40 ? String(text.prefix(37)) + "..." : text }
}
