import CGst

// GObject "casts" are macros Swift cannot import; a GStreamer object pointer is reinterpreted instead.
@inline(__always)
func reinterpret<From, To>(_ pointer: UnsafeMutablePointer<From>, as _: To.Type = To.self) -> UnsafeMutablePointer<To> {
    UnsafeMutablePointer<To>(OpaquePointer(pointer))
}

@inline(__always)
func asObject<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<GstObject> {
    reinterpret(pointer)
}

@inline(__always)
func asGObject<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<GObject> {
    reinterpret(pointer)
}

/// The name path of a GstObject ("/GstPipeline:session/GstTee:tee"), used to tell which part of a graph
/// a message came from without holding a reference to it.
func objectPath(_ object: UnsafeMutablePointer<GstObject>?) -> String? {
    guard let object, let text = gst_object_get_path_string(object) else { return nil }
    defer { g_free(text) }
    return String(cString: text)
}

func takeString(_ text: UnsafeMutablePointer<gchar>?) -> String? {
    guard let text else { return nil }
    defer { g_free(text) }
    return String(cString: text)
}
