// A client of iio-sensor-proxy (net.hadess.SensorProxy on the system D-Bus) and a V4L2 control read: small
// system services that Swift cannot reach by itself (GDBus needs a GMainContext of its own for signals;
// ioctl is variadic). They know nothing of cameras' meaning: the engine maps what they report.
#ifndef CDEVICESERVICES_H
#define CDEVICESERVICES_H

#include <stdint.h>

/// Told the accelerometer's orientation ("normal", "bottom-up", "left-up", "right-up", "undefined"), or NULL
/// when there is no accelerometer (no service on the bus, no bus, or the service has none). Called on the
/// client's own thread, never after CDeviceServices_sensor_proxy_stop returns.
typedef void (*CDeviceServices_sensor_proxy_callback)(void *context, const char *orientation);

typedef struct CDeviceServices_sensor_proxy CDeviceServices_sensor_proxy;

/// Connects to the bus at `bus_address` (a D-Bus address such as "unix:path=/run/dbus/system_bus_socket") on
/// a thread of its own, follows the service as it appears and vanishes, claims the accelerometer while it is
/// there and reports each orientation. Never fails: a bus that cannot be reached is reported as NULL once.
CDeviceServices_sensor_proxy *CDeviceServices_sensor_proxy_start(const char *bus_address, CDeviceServices_sensor_proxy_callback callback,
                                                   void *context);

/// Releases the accelerometer, closes the connection and ends the thread. From another thread it waits for
/// that; from the client's own thread (inside the callback) it returns at once and the thread ends by itself.
void CDeviceServices_sensor_proxy_stop(CDeviceServices_sensor_proxy *proxy);

/// Reads control `control_id` of the V4L2 device node at `path` into `value`: 0 on success, else the errno
/// (EINVAL: the driver has no such control).
int CDeviceServices_v4l2_read_control(const char *path, uint32_t control_id, int32_t *value);

#endif
