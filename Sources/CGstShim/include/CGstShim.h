// CGstShim: the parts of GStreamer/GLib that Swift cannot import (macros, fundamental type ids, in-place
// buffer writes in probes) plus one hot loop that must stay fast in debug builds. Every name is prefixed
// CGstShim_ so a reader always knows where a C name comes from.
#ifndef CGSTSHIM_H
#define CGSTSHIM_H

#include <gst/gst.h>
#include <stdint.h>
#include <stddef.h>

GType CGstShim_type_string(void);
GType CGstShim_type_int(void);
GType CGstShim_type_uint(void);
GType CGstShim_type_int64(void);
GType CGstShim_type_uint64(void);
GType CGstShim_type_boolean(void);
GType CGstShim_type_double(void);
GType CGstShim_type_enum(void);

/// The type id of a GValue (G_VALUE_TYPE).
GType CGstShim_value_type(const GValue *value);

/// True when `object` is an instance of `type` or of a subtype (G_TYPE_CHECK_INSTANCE_TYPE).
gboolean CGstShim_object_is_a(gpointer object, GType type);

/// The GType of an instance (G_OBJECT_TYPE).
GType CGstShim_object_type(gpointer object);

/// The bounds of the pool that lent `buffer` (`maximum` 0: the pool allocates as many as are asked for).
/// FALSE when no pool lent it or its configuration cannot be read; NULL for a bound not wanted.
gboolean CGstShim_buffer_pool_bounds(GstBuffer *buffer, guint *minimum, guint *maximum);

/// When the buffer carried by a probe was lent by a bounded pool (a V4L2 camera's: its memory is the driver's),
/// replaces it with a deep copy in ordinary memory, letting go of the original (and of the pool and device
/// memory it came from) at once. Returns whether it copied.
gboolean CGstShim_probe_info_copy_if_lent_by_bounded_pool(GstPadProbeInfo *info);

/// Whether `child` has posted end-of-stream to `bin` (which keeps its children's EOS messages until it
/// changes state): the child handled the EOS completely, files closed and messages posted.
gboolean CGstShim_bin_child_posted_eos(GstBin *bin, GstElement *child);
/// Makes the buffer carried by a probe writable, storing the (possibly new) buffer back in the probe info.
GstBuffer *CGstShim_probe_info_writable_buffer(GstPadProbeInfo *info);
/// Replaces the passing buffer with a deep copy stamped `pts` and `duration`; FALSE when it could not.
gboolean CGstShim_probe_info_retimed_copy(GstPadProbeInfo *info, GstClockTime pts, GstClockTime duration);

/// Tell ThreadSanitizer of a hand-off that GLib makes but TSan cannot see (GLib is not instrumented, its
/// mutexes are futexes, its reference counts atomics of its own): `published` after preparing what another
/// thread will read (a callback's box, a buffer written in a probe) or when letting go of a buffer,
/// `received` where that thread takes it (the callback, an appsink's sample, a buffer made writable).
/// No-ops in other builds.
void CGstShim_tsan_published(const void *token);
void CGstShim_tsan_received(const void *token);

/// Adds uniform noise in [-amplitude, amplitude] to a plane of 8-bit samples, in place; `state` carries a
/// xorshift32 generator between calls so the noise differs frame to frame and is reproducible from a seed.
void CGstShim_add_noise(uint8_t *plane, size_t width, size_t height, size_t stride, int amplitude,
                        uint32_t *state);

/// Where bridged GStreamer debug lines go: level (GstDebugLevel), category name, source file and line,
/// the emitting object's name (or NULL) and the formatted message. Called on whatever thread logged.
typedef void (*CGstShim_log_sink)(int level, const char *category, const char *file, int line,
                                  const char *object, const char *message);

/// Sends GStreamer's debug log to `sink` instead of stderr: adds a log function that honours each
/// category's threshold (as the default one does) and removes the default stderr writer. Once per process.
void CGstShim_log_bridge_install(CGstShim_log_sink sink);

/// The video overlay (GstVideoOverlay) of `element`: the element itself, or the first one inside it when
/// it is a bin; NULL when there is none. Not a new reference: valid while `element` is.
GstElement *CGstShim_video_overlay_of(GstElement *element);

/// Draws into a window of the caller's (an X11 Window id, a wl_surface pointer) instead of the sink's
/// own; 0 goes back to the sink's own window. False when `element` has no video overlay.
gboolean CGstShim_video_overlay_set_window_handle(GstElement *element, guintptr handle);

/// Where in its window the video goes; width and height -1 mean the whole window. False when `element`
/// has no video overlay or the overlay refused the rectangle.
gboolean CGstShim_video_overlay_set_render_rectangle(GstElement *element, gint x, gint y, gint width, gint height);

// Asks v4l2 elements to drain their buffer pool when stopped rather than orphan it, unless the environment
// says otherwise (v4l2_drain.c says why); called before gst_init.
void CGstShim_v4l2_drain_on_stop(void);
// Whether they will.
int CGstShim_v4l2_drains_on_stop(void);

// webrtcbin (webrtc.c). Calls that wait on webrtcbin's promise block; `error`, when not NULL, gets a
// g_malloc'd reason on failure (free it with g_free), as do the returned descriptions.

/// Requests a send-only sink pad of `webrtc` for RTP with `caps` (its codec, payload type and parameters,
/// which the answer or offer then carries) and links `upstream`'s src pad to it.
gboolean CGstShim_webrtc_add_sender(GstElement *webrtc, GstElement *upstream, const char *caps, char **error);
/// Sets the remote peer's offer (or answer) from SDP text.
gboolean CGstShim_webrtc_set_remote_description(GstElement *webrtc, const char *sdp, gboolean is_offer, char **error);
/// Creates an offer (or the answer to the remote offer), sets it as the local description, returns its SDP.
char *CGstShim_webrtc_create_local_description(GstElement *webrtc, gboolean offer, char **error);
/// The local description's SDP now, with the ICE candidates gathered so far; NULL before there is one.
char *CGstShim_webrtc_local_description_text(GstElement *webrtc);

/// One HTTP/1.1 request (`body` and `content_type` may be NULL) over GIO, TLS for https://, within
/// `timeout_seconds` per read or write; blocks. On success, the status, the Location header (or NULL) and the
/// body, each g_malloc'd; on failure `error` says why. The answer's body is read to the server's close.
gboolean CGstShim_http_exchange(const char *method, const char *url, const char *content_type, const char *body,
                                guint timeout_seconds, int *status, char **location, char **answer, char **error);

#endif
