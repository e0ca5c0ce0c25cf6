// One HTTP/1.1 request and its answer over GIO (GLib's sockets, and TLS through glib-networking), which
// GStreamer links already: WHIP's two exchanges need no HTTP library of their own (Foundation's would pull
// libcurl and its dozen libraries into every start of the program).
#include "CGstShim.h"
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

static void set_error(char **error, const char *text) {
    if (error != NULL && *error == NULL) *error = g_strdup(text);
}

gboolean CGstShim_http_exchange(const char *method, const char *url, const char *content_type, const char *body,
                                guint timeout_seconds, int *status, char **location, char **answer, char **error) {
    GUri *uri = g_uri_parse(url, G_URI_FLAGS_NONE, NULL);
    if (uri == NULL || g_uri_get_host(uri) == NULL) {
        if (uri != NULL) g_uri_unref(uri);
        set_error(error, "not an http:// or https:// URL");
        return FALSE;
    }
    gboolean secure = g_ascii_strcasecmp(g_uri_get_scheme(uri), "https") == 0;
    int port = g_uri_get_port(uri) > 0 ? g_uri_get_port(uri) : (secure ? 443 : 80);
    GSocketClient *client = g_socket_client_new();
    g_socket_client_set_timeout(client, timeout_seconds);
    g_socket_client_set_tls(client, secure);
    GError *failure = NULL;
    GSocketConnection *connection = g_socket_client_connect_to_host(client, g_uri_get_host(uri), port, NULL, &failure);
    gboolean done = FALSE;
    GString *request = NULL, *received = NULL;
    if (connection == NULL) goto out;

    const char *path = g_uri_get_path(uri)[0] != '\0' ? g_uri_get_path(uri) : "/";
    const char *query = g_uri_get_query(uri);
    size_t length = body != NULL ? strlen(body) : 0;
    request = g_string_new(NULL);
    g_string_append_printf(request, "%s %s%s%s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\nUser-Agent: gcapture\r\n",
                           method, path, query != NULL ? "?" : "", query != NULL ? query : "", g_uri_get_host(uri), port);
    if (content_type != NULL) g_string_append_printf(request, "Content-Type: %s\r\n", content_type);
    g_string_append_printf(request, "Content-Length: %zu\r\n\r\n", length);
    if (body != NULL) g_string_append(request, body);
    GOutputStream *output = g_io_stream_get_output_stream(G_IO_STREAM(connection));
    if (!g_output_stream_write_all(output, request->str, request->len, NULL, NULL, &failure)) goto out;

    // The whole answer, to the server's close (Connection: close); answers here are a few KB.
    GInputStream *input = g_io_stream_get_input_stream(G_IO_STREAM(connection));
    received = g_string_new(NULL);
    char chunk[4096];
    for (;;) {
        gssize count = g_input_stream_read(input, chunk, sizeof chunk, NULL, &failure);
        if (count < 0) goto out;
        if (count == 0) break;
        g_string_append_len(received, chunk, count);
        if (received->len > 1 << 20) { set_error(error, "the server's answer is larger than 1 MB"); goto out; }
    }
    char *head_end = strstr(received->str, "\r\n\r\n");
    int code = 0;
    if (head_end == NULL || sscanf(received->str, "HTTP/1.%*d %d", &code) != 1) {
        set_error(error, "the server's answer is not HTTP");
        goto out;
    }
    *status = code;
    *head_end = '\0';
    char **lines = g_strsplit(received->str, "\r\n", -1);
    for (char **line = lines; *line != NULL; line++) {
        if (g_ascii_strncasecmp(*line, "location:", 9) == 0) *location = g_strdup(g_strstrip(*line + 9));
    }
    g_strfreev(lines);
    *answer = g_strdup(head_end + 4);
    done = TRUE;

out:
    if (failure != NULL) set_error(error, failure->message);
    g_clear_error(&failure);
    if (request != NULL) g_string_free(request, TRUE);
    if (received != NULL) g_string_free(received, TRUE);
    if (connection != NULL) {
        g_io_stream_close(G_IO_STREAM(connection), NULL, NULL);
        g_object_unref(connection);
    }
    g_object_unref(client);
    g_uri_unref(uri);
    return done;
}
