#include "CGstShim.h"
#include <gst/video/videooverlay.h>

GType CGstShim_type_string(void) { return G_TYPE_STRING; }
GType CGstShim_type_int(void) { return G_TYPE_INT; }
GType CGstShim_type_uint(void) { return G_TYPE_UINT; }
GType CGstShim_type_int64(void) { return G_TYPE_INT64; }
GType CGstShim_type_uint64(void) { return G_TYPE_UINT64; }
GType CGstShim_type_boolean(void) { return G_TYPE_BOOLEAN; }
GType CGstShim_type_double(void) { return G_TYPE_DOUBLE; }
GType CGstShim_type_enum(void) { return G_TYPE_ENUM; }

GType CGstShim_value_type(const GValue *value) { return G_VALUE_TYPE(value); }

gboolean CGstShim_object_is_a(gpointer object, GType type) {
    return object != NULL && G_TYPE_CHECK_INSTANCE_TYPE(object, type);
}

GType CGstShim_object_type(gpointer object) { return G_OBJECT_TYPE(object); }

GstBuffer *CGstShim_probe_info_writable_buffer(GstPadProbeInfo *info) {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (buffer == NULL) return NULL;
    buffer = gst_buffer_make_writable(buffer);
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
    // Whoever held this buffer, or the memory GSlice reused for it, let go before (see Sample's deinit).
    CGstShim_tsan_received(buffer);
    return buffer;
}

gboolean CGstShim_buffer_pool_bounds(GstBuffer *buffer, guint *minimum, guint *maximum) {
    if (buffer == NULL || buffer->pool == NULL) return FALSE;
    // The pool stays alive while `buffer` refers to it.
    GstStructure *config = gst_buffer_pool_get_config(buffer->pool);
    if (config == NULL) return FALSE;
    gboolean known = gst_buffer_pool_config_get_params(config, NULL, NULL, minimum, maximum);
    gst_structure_free(config);
    return known;
}

gboolean CGstShim_probe_info_copy_if_lent_by_bounded_pool(GstPadProbeInfo *info) {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    // An unbounded pool (videotestsrc's, a decoder's) allocates more when its buffers are held: nothing to
    // give back early.
    guint maximum = 0;
    if (!CGstShim_buffer_pool_bounds(buffer, NULL, &maximum) || maximum == 0) return FALSE;
    GstBuffer *copy = gst_buffer_copy_deep(buffer);
    if (copy == NULL) return FALSE;
    gst_buffer_unref(buffer);
    GST_PAD_PROBE_INFO_DATA(info) = copy;
    return TRUE;
}

gboolean CGstShim_probe_info_retimed_copy(GstPadProbeInfo *info, GstClockTime pts, GstClockTime duration) {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (buffer == NULL) return FALSE;
    // Memory of its own: nothing another thread read in the pooled buffer (or its reused struct) is written.
    GstBuffer *copy = gst_buffer_copy_deep(buffer);
    if (copy == NULL) return FALSE;
    GST_BUFFER_PTS(copy) = pts;
    if (GST_BUFFER_DTS_IS_VALID(copy)) GST_BUFFER_DTS(copy) = pts;
    GST_BUFFER_DURATION(copy) = duration;
    gst_buffer_unref(buffer);
    GST_PAD_PROBE_INFO_DATA(info) = copy;
    return TRUE;
}

gboolean CGstShim_bin_child_posted_eos(GstBin *bin, GstElement *child) {
    gboolean found = FALSE;
    GST_OBJECT_LOCK(bin);
    for (GList *walk = bin->messages; walk != NULL; walk = walk->next) {
        GstMessage *message = walk->data;
        if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_EOS && GST_MESSAGE_SRC(message) == GST_OBJECT_CAST(child)) {
            found = TRUE;
            break;
        }
    }
    GST_OBJECT_UNLOCK(bin);
    return found;
}

void CGstShim_add_noise(uint8_t *plane, size_t width, size_t height, size_t stride, int amplitude,
                        uint32_t *state) {
    if (amplitude <= 0) return;
    uint32_t x = *state ? *state : 0x9E3779B9u;
    const uint32_t span = (uint32_t)(2 * amplitude + 1);
    for (size_t row = 0; row < height; row++) {
        uint8_t *p = plane + row * stride;
        for (size_t col = 0; col < width; col++) {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5;
            int v = (int)p[col] + (int)((x >> 8) % span) - amplitude;
            p[col] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
    *state = x;
}

static CGstShim_log_sink log_sink;

/* Runs on any GStreamer thread, often inside the element's own locks: nothing here takes a lock or an
 * object's name under its lock; the message text is formatted once by GStreamer itself. */
static void log_bridge(GstDebugCategory *category, GstDebugLevel level, const gchar *file,
                       const gchar *function, gint line, GObject *object, GstDebugMessage *message,
                       gpointer user_data) {
    (void)function; (void)object; (void)user_data;
    CGstShim_log_sink sink = __atomic_load_n(&log_sink, __ATOMIC_ACQUIRE);
    if (sink == NULL || level > gst_debug_category_get_threshold(category)) return;
    const gchar *text = gst_debug_message_get(message);
    if (text == NULL) return;
    sink((int)level, gst_debug_category_get_name(category), file, line, gst_debug_message_get_id(message), text);
}

void CGstShim_log_bridge_install(CGstShim_log_sink sink) {
    __atomic_store_n(&log_sink, sink, __ATOMIC_RELEASE);
    gst_debug_add_log_function(log_bridge, NULL, NULL);
    gst_debug_remove_log_function(gst_debug_log_default);
}
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CGSTSHIM_TSAN 1
#endif
#endif

#ifdef CGSTSHIM_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void CGstShim_tsan_published(const void *token) { __tsan_release((void *)token); }
void CGstShim_tsan_received(const void *token) { __tsan_acquire((void *)token); }
#else
void CGstShim_tsan_published(const void *token) { (void)token; }
void CGstShim_tsan_received(const void *token) { (void)token; }
#endif

GstElement *CGstShim_video_overlay_of(GstElement *element) {
    if (element == NULL) return NULL;
    if (GST_IS_VIDEO_OVERLAY(element)) return element;
    if (!GST_IS_BIN(element)) return NULL;
    GstElement *found = gst_bin_get_by_interface(GST_BIN(element), GST_TYPE_VIDEO_OVERLAY);
    if (found == NULL) return NULL;
    // The bin keeps its child alive; the caller only borrows it.
    gst_object_unref(found);
    return found;
}

gboolean CGstShim_video_overlay_set_window_handle(GstElement *element, guintptr handle) {
    GstElement *overlay = CGstShim_video_overlay_of(element);
    if (overlay == NULL) return FALSE;
    gst_video_overlay_set_window_handle(GST_VIDEO_OVERLAY(overlay), handle);
    return TRUE;
}

gboolean CGstShim_video_overlay_set_render_rectangle(GstElement *element, gint x, gint y, gint width, gint height) {
    GstElement *overlay = CGstShim_video_overlay_of(element);
    if (overlay == NULL) return FALSE;
    return gst_video_overlay_set_render_rectangle(GST_VIDEO_OVERLAY(overlay), x, y, width, height);
}
