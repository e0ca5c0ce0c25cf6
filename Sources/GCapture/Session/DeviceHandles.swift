import Foundation

/// This process's own handles on a device node. GStreamer's v4l2src, stopped while some of its frames are
/// still downstream (in a recording's queue, in an encoder), keeps the device open until the last of them
/// comes back: v4l2 drains its buffers rather than orphan them (Sources/CGstShim/v4l2_drain.c says why).
/// Until then the driver answers "busy" to a new source of the same camera, the session's own included: a
/// camera switched away from and back within a second, or reopened with another format, would fail. So the
/// session waits for the handles it left behind, and only for those.
enum DeviceHandles {
    /// The node a path leads to (a /dev/v4l/by-path or udev link resolves to its /dev/videoN). realpath(3):
    /// through Foundation's URL it took 0.3-0.6 ms of a camera switch in the VM.
    static func resolvedNode(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The file descriptors of this process open on `node` (resolved). Straight readdir and readlinkat on
    /// /proc/self/fd: through FileManager (an array of names, a String per link) one look took 4-100 ms in
    /// the VM. Still a system call per descriptor (1.5-3.7 ms in the VM's emulated CPU), so a switch looks
    /// once, when it leaves a camera, and later checks only what it found (`areOpen`).
    static func descriptors(on node: String) -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        let directoryDescriptor = dirfd(directory)
        var found: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { name in
                name.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            guard let descriptor = Int32(name), descriptor != directoryDescriptor, isOpen(descriptor, on: node) else { continue }
            found.append(descriptor)
        }
        return found
    }

    /// Whether any of `descriptors` is still open on `node` (one it found, closed and reused since for something
    /// else, is not).
    static func areOpen(_ descriptors: [Int32], on node: String) -> Bool {
        descriptors.contains { isOpen($0, on: node) }
    }

    private static func isOpen(_ descriptor: Int32, on node: String) -> Bool {
        var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/fd/\(descriptor)", &target, target.count - 1)
        guard length > 0 else { return false }
        return String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == node
    }

    /// Blocks until none of `descriptors` is open on `node`, or `limit` passes; returns how long it waited, or
    /// nil when one is still open.
    static func waitUntilClosed(_ descriptors: [Int32], on node: String, within limit: Duration) -> Duration? {
        let start = ContinuousClock.now
        while areOpen(descriptors, on: node) {
            if ContinuousClock.now - start >= limit { return nil }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return ContinuousClock.now - start
    }
}

/// Camera nodes one graph stopped using, when, and the handles it still had on them then: v4l2 may hold a node
/// a moment longer, so before the graph opens one of them again it waits for those handles. On the session queue.
struct CamerasLeftBehind {
    private struct Left {
        var since: ContinuousClock.Instant
        var descriptors: [Int32]
    }

    private var left: [String: Left] = [:]

    /// A source the graph stopped using (already stopped: what is open on its node now is what it still holds).
    mutating func note(_ unit: SourceUnit) {
        guard !unit.isFiller, let node = unit.device.nodePath else { return }
        let resolved = DeviceHandles.resolvedNode(node)
        left[resolved] = Left(since: .now, descriptors: DeviceHandles.descriptors(on: resolved))
    }

    /// Before a camera let go of in the last few seconds is opened again: its old handles gone.
    mutating func waitForHandles(on device: CaptureDevice, graphName: String) {
        guard let path = device.nodePath else { return }
        let node = DeviceHandles.resolvedNode(path)
        guard let behind = left.removeValue(forKey: node), !behind.descriptors.isEmpty,
              ContinuousClock.now - behind.since < .seconds(10) else { return }
        if let waited = DeviceHandles.waitUntilClosed(behind.descriptors, on: node, within: .seconds(3)) {
            if waited > .milliseconds(20) { Log.session.debug("\(graphName): waited \(waited) for the session's old handle on \(node) to close") }
        } else {
            Log.session.notice("\(graphName): the session's old handle on \(node) is still open after 3 s")
        }
    }
}
