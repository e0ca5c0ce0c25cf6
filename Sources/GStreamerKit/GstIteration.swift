import CGst

/// The objects a GstIterator walks, each made into a `T` by `take` (which may take its own reference), the
/// iterator freed. When the underlying list changes under the walk (RESYNC), what was taken so far is handed
/// to `discard` and the walk starts over, as GStreamer asks.
func collectObjects<T>(_ iterator: UnsafeMutablePointer<GstIterator>?, discard: (T) -> Void = { _ in },
                       _ take: (UnsafeMutablePointer<GObject>) -> T?) -> [T] {
    guard let iterator else { return [] }
    defer { gst_iterator_free(iterator) }
    var result: [T] = []
    var value = GValue()
    iterate: while true {
        switch gst_iterator_next(iterator, &value) {
        case GST_ITERATOR_OK:
            if let object = g_value_get_object(&value), let item = take(object.assumingMemoryBound(to: GObject.self)) {
                result.append(item)
            }
            g_value_reset(&value)
        case GST_ITERATOR_RESYNC:
            result.forEach(discard)
            result.removeAll()
            gst_iterator_resync(iterator)
        default:
            break iterate
        }
    }
    g_value_unset(&value)
    return result
}
