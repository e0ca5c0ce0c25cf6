import CDeviceServices
import Foundation
import GStreamerKit

/// A client of iio-sensor-proxy, the service that reads a machine's accelerometer on Linux
/// (`net.hadess.SensorProxy` on the system D-Bus): it claims the accelerometer while the service and its
/// sensor are there and reports each orientation it gives, following the service as it comes and goes.
/// It knows nothing of cameras; what an orientation means for a picture is the engine's business.
final class SensorProxyClient: Sendable {
    /// The service's orientations, as it names them: which edge of the screen points up.
    enum Orientation: String, Sendable, CaseIterable {
        case normal
        case bottomUp = "bottom-up"
        case leftUp = "left-up"
        case rightUp = "right-up"
        /// The machine lies flat (face up or down): no edge is up.
        case undefined
    }

    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS` when set (as GIO and libdbus honour it), else the standard socket.
    static func systemBusAddress(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        environment["DBUS_SYSTEM_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 } ?? "unix:path=/run/dbus/system_bus_socket"
    }

    private final class Box: Sendable {
        let handler: @Sendable (Orientation?) -> Void
        init(_ handler: @escaping @Sendable (Orientation?) -> Void) { self.handler = handler }
    }

    private let client: Locked<OpaquePointer?>
    private let box: Unmanaged<Box>

    /// Starts following the service on the bus at `busAddress`. `onChange` is called on the client's own
    /// thread, in order: with an orientation, or with nil while there is no accelerometer (no bus, no
    /// service, or a service without a sensor), which is also the first report when there is none.
    init(busAddress: String, onChange: @escaping @Sendable (Orientation?) -> Void) {
        let box = Unmanaged.passRetained(Box(onChange))
        self.box = box
        let started = CDeviceServices_sensor_proxy_start(busAddress, { context, name in
            guard let context else { return }
            let box = Unmanaged<Box>.fromOpaque(context).takeUnretainedValue()
            // A name the service may add later reads as no usable orientation rather than a wrong one.
            box.handler(name.map { Orientation(rawValue: String(cString: $0)) ?? .undefined })
        }, box.toOpaque())
        client = Locked(started)
    }

    /// Releases the accelerometer and disconnects; no report comes after it returns (unless called from
    /// `onChange` itself, where it cannot wait). Safe to call more than once.
    func stop() {
        guard let client = client.withLock({ client in defer { client = nil }; return client }) else { return }
        CDeviceServices_sensor_proxy_stop(client)
    }

    deinit {
        stop()
        // After stop no callback can come, except where stop ran on the client's thread: it reports nothing
        // once stopping, so the box is no longer read either way.
        box.release()
    }
}
