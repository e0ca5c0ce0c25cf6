import Foundation
import GCaptureDescription

/// Where the PATH of `photo PATH` and `record start PATH` goes: relative to the current folder; under
/// --safe relative to the root, and never outside it (no absolute path elsewhere, no '..' out of it, no
/// symbolic link that leads out), as the description's own folders.
public struct CommandPaths: Sendable {
    /// Under --safe: the folder every path stays inside.
    public var root: SafeRoot?

    public init(root: SafeRoot? = nil) { self.root = root }

    /// A photo is a JPEG, and its name must say so.
    func photo(_ path: String) throws(ControlFailure) -> URL {
        let url = try resolve(path)
        guard ["jpg", "jpeg"].contains(url.pathExtension.lowercased()) else {
            throw ControlFailure("\(path): \(NamingRules.photo)")
        }
        return url
    }

    /// A movie's type is checked where every movie's name is, given or made (CaptureController).
    func movie(_ path: String) throws(ControlFailure) -> URL { try resolve(path) }

    private func resolve(_ path: String) throws(ControlFailure) -> URL {
        guard let root else { return URL(fileURLWithPath: path).standardizedFileURL }
        let url = root.url(for: path)
        if root.contains(url) { return url }
        let folder = root.folder.path
        if url.path.hasPrefix(folder.hasSuffix("/") ? folder : folder + "/") {
            throw ControlFailure("\(path) leads outside the root \(folder) through a symbolic link, which --safe forbids")
        }
        throw ControlFailure("\(path) is outside the root \(folder), which --safe forbids")
    }
}
