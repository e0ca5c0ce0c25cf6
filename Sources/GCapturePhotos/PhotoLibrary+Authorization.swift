import Foundation

/// PhotoKit's PHAccessLevel.
public enum AccessLevel: Int, Sendable {
    /// Adding photos and movies, without seeing the library.
    case addOnly = 1
    /// Seeing the library and changing it.
    case readWrite = 2
}

extension PhotoLibrary {
    /// PhotoKit's PHAuthorizationStatus. Nested here because AVFoundation's AVAuthorizationStatus already
    /// ported to `CaptureDevice.AuthorizationStatus`. On Linux it comes from the folder's real permissions,
    /// as a camera's comes from its device node: there is no prompt.
    public enum AuthorizationStatus: Int, Sendable, Codable {
        /// The folder does not exist yet, and can be made: `requestAuthorization` makes it.
        case notDetermined = 0
        /// The library can be read but not written (a read-only mount, a folder another user owns and lets
        /// others read): nothing this program can change.
        case restricted = 1
        /// The folder cannot be used for this access level, or cannot be made.
        case denied = 2
        case authorized = 3
        /// PhotoKit's partial access to chosen photos; a folder has no such state, so it is never returned.
        case limited = 4
    }

    /// The shared library's status (PhotoKit's class method).
    public static func authorizationStatus(for accessLevel: AccessLevel) -> AuthorizationStatus {
        shared().authorizationStatus(for: accessLevel)
    }

    /// The shared library's status, making its folder first when it does not exist.
    public static func requestAuthorization(for accessLevel: AccessLevel) async -> AuthorizationStatus {
        await shared().requestAuthorization(for: accessLevel)
    }

    /// What this process may do with the folder, right now.
    public func authorizationStatus(for accessLevel: AccessLevel) -> AuthorizationStatus {
        var info = stat()
        guard stat(folder.path, &info) == 0 else {
            // Missing: it can be made when its nearest existing ancestor is writable.
            var parent = folder.deletingLastPathComponent()
            while parent.path != "/" && !FileManager.default.fileExists(atPath: parent.path) { parent = parent.deletingLastPathComponent() }
            return access(parent.path, W_OK | X_OK) == 0 ? .notDetermined : .denied
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return .denied }
        let canWrite = access(folder.path, W_OK | X_OK) == 0
        let canRead = access(folder.path, R_OK | X_OK) == 0
        switch accessLevel {
        case .addOnly: return canWrite ? .authorized : .denied
        case .readWrite:
            if canRead && canWrite { return .authorized }
            return canRead ? .restricted : .denied
        }
    }

    /// Resolves at once (no prompt on Linux): makes the folder when it does not exist and can be made,
    /// then answers the status.
    public func requestAuthorization(for accessLevel: AccessLevel) async -> AuthorizationStatus {
        if authorizationStatus(for: accessLevel) == .notDetermined {
            let folder = self.folder
            await work.run { try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        }
        return authorizationStatus(for: accessLevel)
    }

    /// When the status is not `.authorized`: what to do about it, naming the folder, its owner and mode.
    public func authorizationAdvice(for accessLevel: AccessLevel) -> String? {
        let status = authorizationStatus(for: accessLevel)
        switch status {
        case .authorized, .limited: return nil
        case .notDetermined: return "\(folder.path) does not exist yet: requestAuthorization (or the first change) makes it"
        case .restricted, .denied:
            var info = stat()
            guard stat(folder.path, &info) == 0 else {
                return "\(folder.path) does not exist and cannot be made: its parent folder is not writable by this user"
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else { return "\(folder.path) is not a folder" }
            let owner = getpwuid(info.st_uid).flatMap { String(validatingCString: $0.pointee.pw_name) } ?? "uid \(info.st_uid)"
            let mode = String(info.st_mode & 0o777, radix: 8)
            let wanted = accessLevel == .readWrite ? "read and write" : "write"
            return "\(folder.path) belongs to \(owner) with mode \(mode): this user cannot \(wanted) it; "
                + "run as \(owner) or give this user access (chmod, chown or a group)"
        }
    }
}
