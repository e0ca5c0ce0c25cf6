// webrtcbin's action signals answer through GstPromise, and its descriptions are GstWebRTCSessionDescription
// boxes around GstSDPMessage: neither crosses into Swift well, so a peer is driven from here in plain
// strings. Every call that waits on a promise blocks the calling thread (never a streaming thread).
// (libgstwebrtc's API is marked unstable; 1.22's is what this is written against.)
#define GST_USE_UNSTABLE_API 1
#include "CGstShim.h"
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <string.h>

static void set_error(char **error, const char *text) {
    if (error != NULL && *error == NULL) *error = g_strdup(text);
}

/// Waits for the promise's reply: FALSE when there is none or it carries an error (webrtcbin puts a GError in
/// "error"), whose text goes to `error`. `reply` (may be NULL: some replies are empty) belongs to the promise.
static gboolean wait_reply(GstPromise *promise, const GstStructure **reply, char **error) {
    if (gst_promise_wait(promise) != GST_PROMISE_RESULT_REPLIED) {
        set_error(error, "webrtcbin did not answer");
        return FALSE;
    }
    const GstStructure *structure = gst_promise_get_reply(promise);
    if (structure != NULL && gst_structure_has_field(structure, "error")) {
        GError *failure = NULL;
        gst_structure_get(structure, "error", G_TYPE_ERROR, &failure, NULL);
        set_error(error, failure != NULL ? failure->message : "webrtcbin refused");
        g_clear_error(&failure);
        return FALSE;
    }
    if (reply != NULL) *reply = structure;
    return TRUE;
}

gboolean CGstShim_webrtc_add_sender(GstElement *webrtc, GstElement *upstream, const char *caps_text, char **error) {
    GstCaps *caps = gst_caps_from_string(caps_text);
    if (caps == NULL) { set_error(error, "the sender's caps do not parse"); return FALSE; }
    GstPadTemplate *template = gst_element_get_pad_template(webrtc, "sink_%u");
    GstPad *sink = template != NULL ? gst_element_request_pad(webrtc, template, NULL, caps) : NULL;
    if (sink == NULL) { gst_caps_unref(caps); set_error(error, "webrtcbin gave no sink pad"); return FALSE; }
    GstWebRTCRTPTransceiver *transceiver = NULL;
    g_object_get(sink, "transceiver", &transceiver, NULL);
    if (transceiver != NULL) {
        g_object_set(transceiver, "direction", GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDONLY,
                     "codec-preferences", caps, NULL);
        gst_object_unref(transceiver);
    }
    gst_caps_unref(caps);
    GstPad *source = gst_element_get_static_pad(upstream, "src");
    gboolean linked = source != NULL && GST_PAD_LINK_SUCCESSFUL(gst_pad_link(source, sink));
    if (source != NULL) gst_object_unref(source);
    gst_object_unref(sink);
    if (!linked) set_error(error, "the sender does not link to webrtcbin");
    return linked;
}

gboolean CGstShim_webrtc_set_remote_description(GstElement *webrtc, const char *sdp_text, gboolean is_offer, char **error) {
    GstSDPMessage *sdp = NULL;
    if (gst_sdp_message_new_from_text(sdp_text, &sdp) != GST_SDP_OK || sdp == NULL) {
        set_error(error, "the session description does not parse");
        return FALSE;
    }
    GstWebRTCSessionDescription *description =
        gst_webrtc_session_description_new(is_offer ? GST_WEBRTC_SDP_TYPE_OFFER : GST_WEBRTC_SDP_TYPE_ANSWER, sdp);
    GstPromise *promise = gst_promise_new();
    g_signal_emit_by_name(webrtc, "set-remote-description", description, promise);
    gboolean done = wait_reply(promise, NULL, error);
    gst_promise_unref(promise);
    gst_webrtc_session_description_free(description);
    return done;
}

char *CGstShim_webrtc_create_local_description(GstElement *webrtc, gboolean offer, char **error) {
    const char *field = offer ? "offer" : "answer";
    GstPromise *promise = gst_promise_new();
    g_signal_emit_by_name(webrtc, offer ? "create-offer" : "create-answer", NULL, promise);
    const GstStructure *reply = NULL;
    GstWebRTCSessionDescription *description = NULL;
    if (wait_reply(promise, &reply, error) && reply != NULL) gst_structure_get(reply, field, GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &description, NULL);
    gst_promise_unref(promise);
    if (description == NULL) { set_error(error, offer ? "webrtcbin made no offer" : "webrtcbin made no answer"); return NULL; }
    promise = gst_promise_new();
    g_signal_emit_by_name(webrtc, "set-local-description", description, promise);
    gboolean set = wait_reply(promise, NULL, error);
    gst_promise_unref(promise);
    char *text = set ? gst_sdp_message_as_text(description->sdp) : NULL;
    gst_webrtc_session_description_free(description);
    return text;
}

char *CGstShim_webrtc_local_description_text(GstElement *webrtc) {
    GstWebRTCSessionDescription *description = NULL;
    g_object_get(webrtc, "local-description", &description, NULL);
    if (description == NULL) return NULL;
    char *text = gst_sdp_message_as_text(description->sdp);
    gst_webrtc_session_description_free(description);
    return text;
}
