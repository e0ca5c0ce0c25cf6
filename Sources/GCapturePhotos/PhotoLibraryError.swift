import Foundation

/// Why a library operation failed, naming the file or the request at fault.
public enum PhotoLibraryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The library's folder (or a file in it) cannot be read.
    case unreadable(URL, reason: String)
    /// The library's folder (or a file in it) cannot be written.
    case unwritable(URL, reason: String)
    /// A resource handed to a creation request is not a photo or movie the library holds.
    case unsupportedResource(URL?, reason: String)
    /// A change request names an asset or album the library does not have (any more).
    case noSuchObject(String)
    /// A change request was made outside a `performChanges` block.
    case requestOutsideChangeBlock(String)
    /// The access level does not allow the change (reading with `.addOnly`).
    case accessDenied(String)

    public var description: String {
        switch self {
        case .unreadable(let url, let reason): "cannot read \(url.path): \(reason)"
        case .unwritable(let url, let reason): "cannot write \(url.path): \(reason)"
        case .unsupportedResource(let url, let reason): "\(url?.path ?? "the data") cannot be added to the library: \(reason)"
        case .noSuchObject(let identifier): "the library has no asset or album '\(identifier)'"
        case .requestOutsideChangeBlock(let request):
            "\(request) was made outside performChanges: make change requests inside its block"
        case .accessDenied(let reason): reason
        }
    }
}
