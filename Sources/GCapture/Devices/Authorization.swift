import Foundation

extension CaptureDevice {
    public enum AuthorizationStatus: String, Sendable, Codable {
        case notDetermined, restricted, denied, authorized
    }

    /// Whether this process may open the media type's devices: decided by real access to the device nodes
    /// (there is no prompt on Linux). Built-in test devices are always authorized.
    public static func authorizationStatus(for mediaType: MediaType) -> AuthorizationStatus {
        let statuses = DiscoverySession(mediaType: mediaType).devices.map(\.authorizationStatus)
        if statuses.contains(.authorized) { return .authorized }
        return statuses.first ?? .authorized
    }

    /// Access to this device's node, right now.
    public var authorizationStatus: AuthorizationStatus {
        guard let nodePath else { return .authorized }
        return access(nodePath, R_OK | W_OK) == 0 ? .authorized : .denied
    }

    /// When access is denied: what to do about it, naming the node's group ("add your user to 'video'").
    public var authorizationAdvice: String? {
        guard let nodePath, authorizationStatus == .denied else { return nil }
        return Self.accessAdvice(for: nodePath)
    }

    static func accessAdvice(for nodePath: String) -> String {
        var info = stat()
        guard stat(nodePath, &info) == 0 else { return "\(nodePath) does not exist" }
        let group = getgrgid(info.st_gid).flatMap { String(validatingCString: $0.pointee.gr_name) } ?? "gid \(info.st_gid)"
        let mode = String(info.st_mode & 0o777, radix: 8)
        return "\(nodePath) is readable only by its owner and group '\(group)' (mode \(mode)); "
            + "add your user to it (sudo usermod -aG \(group) $USER) and log in again"
    }

    /// Resolves at once with the current status: Linux grants device access through groups, not prompts.
    public static func requestAccess(for mediaType: MediaType) async -> Bool {
        authorizationStatus(for: mediaType) == .authorized
    }
}
