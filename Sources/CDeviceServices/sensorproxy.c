#include "CDeviceServices.h"
#include <gio/gio.h>

#define SERVICE "net.hadess.SensorProxy"
#define OBJECT_PATH "/net/hadess/SensorProxy"
#define CALL_TIMEOUT_MS 2000

struct CDeviceServices_sensor_proxy {
    char *address;
    CDeviceServices_sensor_proxy_callback callback;
    void *context;
    GMainContext *main_context;
    GMainLoop *loop;
    GCancellable *cancellable;
    GThread *thread;
    /// The client's thread as it sees itself (atomic: set there, read by stop on any thread).
    gpointer own_thread;
    GDBusConnection *connection;
    guint watch_id;
    guint signal_id;
    char *owner;
    gboolean claimed;
    /// Set by stop: no callback is made once it is (atomic: read on the client's thread).
    gint stopping;
    /// Stop was called on the client's own thread: the thread frees the client when it ends.
    gint frees_itself;
    /// What was last reported, so a repeat is not reported again ("" before the first report).
    char *reported;
};

static void report(CDeviceServices_sensor_proxy *proxy, const char *orientation) {
    if (g_atomic_int_get(&proxy->stopping)) return;
    const char *now = orientation ? orientation : "\x01none";
    if (proxy->reported && strcmp(proxy->reported, now) == 0) return;
    g_free(proxy->reported);
    proxy->reported = g_strdup(now);
    proxy->callback(proxy->context, orientation);
}

static GVariant *get_property(CDeviceServices_sensor_proxy *proxy, const char *name) {
    GVariant *reply = g_dbus_connection_call_sync(proxy->connection, proxy->owner, OBJECT_PATH,
                                                  "org.freedesktop.DBus.Properties", "Get",
                                                  g_variant_new("(ss)", SERVICE, name), G_VARIANT_TYPE("(v)"),
                                                  G_DBUS_CALL_FLAGS_NO_AUTO_START, CALL_TIMEOUT_MS, proxy->cancellable, NULL);
    if (!reply) return NULL;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    return value;
}

static gboolean call(CDeviceServices_sensor_proxy *proxy, const char *method) {
    GVariant *reply = g_dbus_connection_call_sync(proxy->connection, proxy->owner, OBJECT_PATH, SERVICE, method, NULL,
                                                  NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START, CALL_TIMEOUT_MS,
                                                  proxy->cancellable, NULL);
    if (!reply) return FALSE;
    g_variant_unref(reply);
    return TRUE;
}

/// Reads the orientation afresh: the service has an accelerometer (claimed, so it reports), or not.
static void refresh(CDeviceServices_sensor_proxy *proxy) {
    GVariant *has = get_property(proxy, "HasAccelerometer");
    gboolean present = has && g_variant_is_of_type(has, G_VARIANT_TYPE_BOOLEAN) && g_variant_get_boolean(has);
    if (has) g_variant_unref(has);
    if (!present) { report(proxy, NULL); return; }
    // iio-sensor-proxy updates AccelerometerOrientation only while some client holds a claim.
    if (!proxy->claimed) proxy->claimed = call(proxy, "ClaimAccelerometer");
    GVariant *orientation = get_property(proxy, "AccelerometerOrientation");
    if (orientation && g_variant_is_of_type(orientation, G_VARIANT_TYPE_STRING)) {
        report(proxy, g_variant_get_string(orientation, NULL));
    } else {
        report(proxy, NULL);
    }
    if (orientation) g_variant_unref(orientation);
}

static void properties_changed(GDBusConnection *connection, const char *sender, const char *path, const char *interface,
                               const char *signal, GVariant *parameters, gpointer data) {
    (void)connection; (void)sender; (void)path; (void)interface; (void)signal;
    CDeviceServices_sensor_proxy *proxy = data;
    if (!g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sa{sv}as)"))) return;
    const char *changed_interface = NULL;
    GVariant *changed = NULL;
    const char **invalidated = NULL;
    g_variant_get(parameters, "(&s@a{sv}^a&s)", &changed_interface, &changed, &invalidated);
    gboolean needs_refresh = invalidated && invalidated[0] != NULL;
    GVariant *has = g_variant_lookup_value(changed, "HasAccelerometer", G_VARIANT_TYPE_BOOLEAN);
    GVariant *orientation = g_variant_lookup_value(changed, "AccelerometerOrientation", G_VARIANT_TYPE_STRING);
    if (has) {
        // A sensor that comes or goes (hot-plugged, or the service's own start) needs a new claim.
        if (!g_variant_get_boolean(has)) { proxy->claimed = FALSE; report(proxy, NULL); }
        else needs_refresh = TRUE;
        g_variant_unref(has);
    }
    if (needs_refresh) refresh(proxy);
    else if (orientation) report(proxy, g_variant_get_string(orientation, NULL));
    if (orientation) g_variant_unref(orientation);
    g_variant_unref(changed);
    g_free(invalidated);
}

static void name_appeared(GDBusConnection *connection, const char *name, const char *owner, gpointer data) {
    (void)name;
    CDeviceServices_sensor_proxy *proxy = data;
    g_free(proxy->owner);
    proxy->owner = g_strdup(owner);
    proxy->claimed = FALSE;
    // Signals from this owner only (its unique name): another client cannot pose as the service.
    if (proxy->signal_id) g_dbus_connection_signal_unsubscribe(connection, proxy->signal_id);
    proxy->signal_id = g_dbus_connection_signal_subscribe(connection, owner, "org.freedesktop.DBus.Properties",
                                                          "PropertiesChanged", OBJECT_PATH, SERVICE,
                                                          G_DBUS_SIGNAL_FLAGS_NONE, properties_changed, proxy, NULL);
    refresh(proxy);
}

static void name_vanished(GDBusConnection *connection, const char *name, gpointer data) {
    (void)name;
    CDeviceServices_sensor_proxy *proxy = data;
    if (proxy->signal_id && connection) g_dbus_connection_signal_unsubscribe(connection, proxy->signal_id);
    proxy->signal_id = 0;
    g_clear_pointer(&proxy->owner, g_free);
    proxy->claimed = FALSE;
    report(proxy, NULL);
}

static gboolean quit_loop(gpointer data) {
    g_main_loop_quit(data);
    return G_SOURCE_REMOVE;
}

static void free_proxy(CDeviceServices_sensor_proxy *proxy) {
    g_main_loop_unref(proxy->loop);
    g_main_context_unref(proxy->main_context);
    g_object_unref(proxy->cancellable);
    g_free(proxy->address);
    g_free(proxy->owner);
    g_free(proxy->reported);
    g_free(proxy);
}

static gpointer run(gpointer data) {
    CDeviceServices_sensor_proxy *proxy = data;
    g_atomic_pointer_set(&proxy->own_thread, g_thread_self());
    g_main_context_push_thread_default(proxy->main_context);
    GError *error = NULL;
    proxy->connection = g_dbus_connection_new_for_address_sync(
        proxy->address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, proxy->cancellable, &error);
    if (proxy->connection) {
        g_dbus_connection_set_exit_on_close(proxy->connection, FALSE);
        proxy->watch_id = g_bus_watch_name_on_connection(proxy->connection, SERVICE, G_BUS_NAME_WATCHER_FLAGS_NONE,
                                                         name_appeared, name_vanished, proxy, NULL);
    } else {
        g_clear_error(&error);
        report(proxy, NULL);
    }
    // Waits for stop even without a bus, so that stop has one way to end the thread.
    g_main_loop_run(proxy->loop);
    if (proxy->connection) {
        if (proxy->claimed && proxy->owner) {
            // The service also drops a claim when its client's connection closes; releasing says so at once.
            g_dbus_connection_call_sync(proxy->connection, proxy->owner, OBJECT_PATH, SERVICE, "ReleaseAccelerometer",
                                        NULL, NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START, 500, NULL, NULL);
        }
        if (proxy->signal_id) g_dbus_connection_signal_unsubscribe(proxy->connection, proxy->signal_id);
        g_bus_unwatch_name(proxy->watch_id);
        g_dbus_connection_close_sync(proxy->connection, NULL, NULL);
        g_clear_object(&proxy->connection);
        // Dispatch what the unwatch and close left queued on this context (their destroy notifies).
        while (g_main_context_iteration(proxy->main_context, FALSE)) {}
    }
    g_main_context_pop_thread_default(proxy->main_context);
    if (g_atomic_int_get(&proxy->frees_itself)) {
        free_proxy(proxy);
        g_thread_unref(g_thread_self());  // the reference g_thread_new gave the starter, which will not join
    }
    return NULL;
}

CDeviceServices_sensor_proxy *CDeviceServices_sensor_proxy_start(const char *bus_address, CDeviceServices_sensor_proxy_callback callback,
                                                   void *context) {
    CDeviceServices_sensor_proxy *proxy = g_new0(CDeviceServices_sensor_proxy, 1);
    proxy->address = g_strdup(bus_address);
    proxy->callback = callback;
    proxy->context = context;
    proxy->main_context = g_main_context_new();
    proxy->loop = g_main_loop_new(proxy->main_context, FALSE);
    proxy->cancellable = g_cancellable_new();
    proxy->thread = g_thread_new("gcapture-sensors", run, proxy);
    return proxy;
}

void CDeviceServices_sensor_proxy_stop(CDeviceServices_sensor_proxy *proxy) {
    if (!proxy) return;
    g_atomic_int_set(&proxy->stopping, 1);
    gboolean on_own_thread = g_atomic_pointer_get(&proxy->own_thread) == (gpointer)g_thread_self();
    if (on_own_thread) g_atomic_int_set(&proxy->frees_itself, 1);
    g_cancellable_cancel(proxy->cancellable);
    // A source rather than g_main_loop_quit: a quit before the loop runs (a report made while connecting)
    // would be lost.
    GSource *source = g_idle_source_new();
    g_source_set_callback(source, quit_loop, proxy->loop, NULL);
    g_source_attach(source, proxy->main_context);
    g_source_unref(source);
    if (on_own_thread) return;
    g_thread_join(proxy->thread);
    free_proxy(proxy);
}
