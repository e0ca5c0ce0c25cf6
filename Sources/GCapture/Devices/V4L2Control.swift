import CDeviceServices

/// Reads a V4L2 device's controls directly, for what GStreamer's device provider does not report.
enum V4L2Control {
    /// V4L2_CID_CAMERA_ORIENTATION (V4L2_CID_CAMERA_CLASS_BASE + 34): where the camera faces, as the driver
    /// (or the firmware's description of the board) knows it. The header's macro does not import into Swift.
    static let cameraOrientation: UInt32 = 0x009A_0900 + 34

    /// The control's value, or nil when the node cannot be opened or its driver has no such control.
    static func read(_ control: UInt32, of path: String) -> Int32? {
        var value: Int32 = 0
        return CDeviceServices_v4l2_read_control(path, control, &value) == 0 ? value : nil
    }
}
