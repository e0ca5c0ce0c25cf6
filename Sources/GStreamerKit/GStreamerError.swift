import CGst

/// A failure reported by GStreamer or by this layer, carrying what GStreamer said: the error domain
/// (e.g. "gst-resource-error-quark"), its code, the message, the debug text and the element that posted it.
public struct GStreamerError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// An error message (GError) posted by an element or returned by a GStreamer call.
        case gError
        /// An element factory is not installed.
        case missingElement
        /// A pipeline description could not be parsed.
        case parse
        /// Two pads or elements could not be linked.
        case link
        /// An element refused a state change.
        case stateChange
        /// An operation did not complete in time.
        case timeout
        /// Caps text could not be parsed.
        case caps
        /// A property does not exist or has another type.
        case property
        /// A WebRTC peer's offer or answer was refused.
        case negotiation
    }

    public var kind: Kind
    /// The GError domain as a string ("gst-resource-error-quark"), empty when not a GError.
    public var domain: String
    public var code: Int
    public var message: String
    public var debug: String?
    /// Path of the element that reported it ("/GstPipeline:p/GstV4l2Src:v4l2src0"), when known.
    public var sourcePath: String?

    public init(kind: Kind, domain: String = "", code: Int = 0, message: String, debug: String? = nil,
                sourcePath: String? = nil) {
        self.kind = kind
        self.domain = domain
        self.code = code
        self.message = message
        self.debug = debug
        self.sourcePath = sourcePath
    }

    /// Takes ownership of `error` (frees it).
    init(consuming error: UnsafeMutablePointer<GError>, kind: Kind = .gError, debug: String? = nil,
         sourcePath: String? = nil) {
        self.init(kind: kind,
                  domain: g_quark_to_string(error.pointee.domain).map { String(cString: $0) } ?? "",
                  code: Int(error.pointee.code),
                  message: error.pointee.message.map { String(cString: $0) } ?? "unknown error",
                  debug: debug, sourcePath: sourcePath)
        g_error_free(error)
    }

    public var isResourceError: Bool { domain == "gst-resource-error-quark" }

    /// GST_RESOURCE_ERROR codes worth naming.
    public enum ResourceCode: Int, Sendable {
        case failed = 1, tooLazy, notFound, busy, openRead, openWrite, openReadWrite, close, read, write,
             seek, sync, settings, noSpaceLeft, notAuthorized
    }

    public var resourceCode: ResourceCode? { isResourceError ? ResourceCode(rawValue: code) : nil }

    public var description: String {
        var text = message
        if let sourcePath { text += " (from \(sourcePath))" }
        if !domain.isEmpty { text += " [\(domain) \(code)]" }
        return text
    }
}
