import Foundation

/// This process's own handles on a device node. GStreamer's v4l2src, stopped while some of its frames are
/// still downstream (in a recording's queue, in an encoder), keeps the device open until the last of them
/// comes back: v4l2 drains its buffers rather than orphan them (Sources/CGstShim/v4l2_drain.c says why).
/// Until then the driver answers "busy" to a new source of the same camera, the session's own included: a
/// camera switched away from and back within a second, or reopened with another format, would fail. So the
/// session waits for the handles it left behind, and only for those.
enum DeviceHandles {
    /// The node a path leads to (a /dev/v4l/by-path or udev link resolves to its /dev/videoN).
    static func resolvedNode(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }

    /// Whether any file descriptor of this process is open on `node` (resolved). Straight readdir and readlinkat
    /// on /proc/self/fd: through FileManager (an array of names, a String per link) one look took 4-100 ms in
    /// the VM, and a camera switched back to pays for one.
    static func areOpen(on node: String) -> Bool {
        guard let directory = opendir("/proc/self/fd") else { return false }
        defer { closedir(directory) }
        let directoryDescriptor = dirfd(directory)
        var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        return node.withCString { wanted in
            let wantedLength = strlen(wanted)
            while let entry = readdir(directory) {
                let length = withUnsafePointer(to: &entry.pointee.d_name) { name in
                    name.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { name in
                        readlinkat(directoryDescriptor, name, &target, target.count - 1)
                    }
                }
                if length == wantedLength, memcmp(target, wanted, wantedLength) == 0 { return true }
            }
            return false
        }
    }

    /// Blocks until no handle of this process is open on `node`, or `limit` passes; returns how long it
    /// waited, or nil when the handles are still open.
    static func waitUntilClosed(on node: String, within limit: Duration) -> Duration? {
        let start = ContinuousClock.now
        while areOpen(on: node) {
            if ContinuousClock.now - start >= limit { return nil }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return ContinuousClock.now - start
    }
}

/// Camera nodes one graph stopped using, and when: v4l2 may hold a node a moment longer, so before the graph
/// opens one of them again it waits for the handles it left. On the session queue.
struct CamerasLeftBehind {
    private var since: [String: ContinuousClock.Instant] = [:]

    /// A source the graph stopped using.
    mutating func note(_ unit: SourceUnit) {
        guard !unit.isFiller, let node = unit.device.nodePath else { return }
        since[DeviceHandles.resolvedNode(node)] = .now
    }

    /// Before a camera let go of in the last few seconds is opened again: its old handles gone.
    mutating func waitForHandles(on device: CaptureDevice, graphName: String) {
        guard let path = device.nodePath else { return }
        let node = DeviceHandles.resolvedNode(path)
        guard let leftAt = since.removeValue(forKey: node), ContinuousClock.now - leftAt < .seconds(10) else { return }
        if let waited = DeviceHandles.waitUntilClosed(on: node, within: .seconds(3)) {
            if waited > .milliseconds(20) { Log.session.debug("\(graphName): waited \(waited) for the session's old handle on \(node) to close") }
        } else {
            Log.session.notice("\(graphName): the session's old handle on \(node) is still open after 3 s")
        }
    }
}
