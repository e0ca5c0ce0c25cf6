import Foundation

/// A camera's /dev/video node, asked directly whether it is still there: opened and closed at once, as
/// v4l2src opens it (read-write, not waiting for a frame).
enum V4L2Node {
    /// nil when the node opens; otherwise the errno that refused it (ENODEV: the driver let go of a camera
    /// whose node is still listed, as vivid's disconnect does; ENOENT: the node is gone, as a USB camera's is;
    /// EBUSY or EACCES: present but not ours now).
    static func openError(_ path: String) -> Int32? {
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd < 0 else {
            close(fd)
            return nil
        }
        return errno
    }
}
