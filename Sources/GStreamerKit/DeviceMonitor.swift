import CGst
import CGstShim

/// A device GStreamer's providers found (v4l2, pulse, pipewire...).
public final class Device: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: one reference to a GstDevice, immutable once its provider made it.
    let pointer: UnsafeMutablePointer<GstDevice>

    init(adopting pointer: UnsafeMutablePointer<GstDevice>) { self.pointer = pointer }
    deinit { gst_object_unref(UnsafeMutableRawPointer(pointer)) }

    public var displayName: String { takeString(gst_device_get_display_name(pointer)) ?? "" }
    /// "Video/Source", "Audio/Source"...
    public var deviceClass: String { takeString(gst_device_get_device_class(pointer)) ?? "" }
    public var caps: Caps? { gst_device_get_caps(pointer).map { Caps(adopting: $0) } }

    /// The provider's properties ("device.path", "v4l2.device.bus_info", "device.api"...), serialized.
    public var properties: [String: String] {
        guard let structure = gst_device_get_properties(pointer) else { return [:] }
        defer { gst_structure_free(structure) }
        var result: [String: String] = [:]
        for index in 0..<gst_structure_n_fields(structure) {
            guard let name = gst_structure_nth_field_name(structure, UInt32(index)),
                  let value = gst_structure_get_value(structure, name) else { continue }
            let key = String(cString: name)
            if CGstShim_value_type(value) == CGstShim_type_string() {
                result[key] = g_value_get_string(value).map { String(cString: $0) } ?? ""
            } else {
                result[key] = takeString(gst_value_serialize(value)) ?? ""
            }
        }
        return result
    }

    /// A source element already configured for this device.
    public func makeElement(name: String? = nil) throws -> Element {
        guard let raw = gst_device_create_element(pointer, name) else {
            throw GStreamerError(kind: .missingElement, message: "no element can open device '\(displayName)'")
        }
        return Element(adopting: raw)
    }

    public var description: String { "\(displayName) (\(deviceClass))" }
}

/// Watches the system's devices; hotplug arrives on `bus` as `.deviceAdded` / `.deviceRemoved`.
public final class DeviceMonitor: @unchecked Sendable {
    // @unchecked Sendable: one reference to a GstDeviceMonitor, whose API takes its own lock.
    let pointer: UnsafeMutablePointer<GstDeviceMonitor>

    /// `classes` are device-class filters such as "Video/Source" and "Audio/Source".
    public init(classes: [String]) {
        GStreamer.initialize()
        pointer = gst_device_monitor_new()
        for deviceClass in classes { gst_device_monitor_add_filter(pointer, deviceClass, nil) }
    }

    deinit {
        gst_device_monitor_stop(pointer)
        gst_object_unref(UnsafeMutableRawPointer(pointer))
    }

    public lazy var bus: Bus = Bus(adopting: gst_device_monitor_get_bus(pointer))

    public func start() throws {
        guard gst_device_monitor_start(pointer) != 0 else {
            throw GStreamerError(kind: .stateChange, message: "the device monitor could not start")
        }
    }

    public func stop() { gst_device_monitor_stop(pointer) }

    /// Devices present now.
    public var devices: [Device] {
        var result: [Device] = []
        var node = gst_device_monitor_get_devices(pointer)
        let head = node
        while let current = node {
            if let data = current.pointee.data {
                result.append(Device(adopting: UnsafeMutablePointer<GstDevice>(OpaquePointer(data))))
            }
            node = current.pointee.next
        }
        g_list_free(head)
        return result
    }
}
