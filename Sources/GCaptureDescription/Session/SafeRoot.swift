import Foundation

/// The folder a description from untrusted hands (`--safe --root`) and the commands of its run write inside,
/// checked on the real file system: a path is inside when it still is with every symbolic link on its way
/// followed, a dangling one too (a file written through it would land where it points).
public struct SafeRoot: Sendable {
    public let folder: URL

    public init(_ folder: URL) { self.folder = folder.standardizedFileURL }

    /// A path as a command gives it: absolute as it is, otherwise relative to the root; '..' taken away.
    public func url(for path: String) -> URL {
        (path.hasPrefix("/") ? URL(fileURLWithPath: path) : folder.appendingPathComponent(path)).standardizedFileURL
    }

    /// Whether `url` is the root or inside it once symbolic links are followed.
    public func contains(_ url: URL) -> Bool {
        let root = Self.resolved(folder.path)
        let path = Self.resolved(url.standardizedFileURL.path)
        return path == root || path.hasPrefix(root.hasSuffix("/") ? root : root + "/")
    }

    /// An absolute path with every symbolic link followed, as far as the path exists; the rest as written.
    /// Not realpath(3): that fails on a path that does not exist yet, or ends in a dangling link.
    static func resolved(_ path: String) -> String {
        var done = ""
        var rest = path.split(separator: "/").map(String.init)
        var followed = 0
        while !rest.isEmpty {
            let name = rest.removeFirst()
            if name == "." || name.isEmpty { continue }
            if name == ".." {
                done = String(done[..<(done.lastIndex(of: "/") ?? done.startIndex)])
                continue
            }
            let next = done + "/" + name
            var info = stat()
            guard lstat(next, &info) == 0, info.st_mode & S_IFMT == S_IFLNK,
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: next) else {
                done = next
                continue
            }
            // A loop of links resolves to nothing usable: leave it as written (the write then fails).
            followed += 1
            if followed > 40 { return path }
            rest = target.split(separator: "/").map(String.init) + rest
            if target.hasPrefix("/") { done = "" }
        }
        return done.isEmpty ? "/" : done
    }
}
