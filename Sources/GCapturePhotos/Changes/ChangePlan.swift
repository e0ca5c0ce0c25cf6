import Foundation

/// The change requests one `performChanges` block made, collected while it runs on the caller's thread.
/// PhotoKit raises an exception for a request made outside a block; here it is a precondition failure naming
/// the request. Unchecked: it is only touched by the thread that runs the block (the task-local binding
/// ends when the block returns), and read by that same thread afterwards.
final class ChangeBlock: @unchecked Sendable {
    @TaskLocal static var current: ChangeBlock?

    var assetRequests: [AssetChangeRequest] = []
    var albumRequests: [AssetCollectionChangeRequest] = []
    var deletedAssets: [String] = []
    var deletedAlbums: [String] = []

    /// Runs a change block on this thread and returns what its requests ask.
    static func collect(_ changes: () -> Void) -> ChangePlan {
        let block = ChangeBlock()
        $current.withValue(block) { changes() }
        return block.plan
    }

    static func register(_ request: AssetChangeRequest, as name: String) {
        guard let block = current else { preconditionFailure(PhotoLibraryError.requestOutsideChangeBlock(name).description) }
        block.assetRequests.append(request)
    }

    static func register(_ request: AssetCollectionChangeRequest, as name: String) {
        guard let block = current else { preconditionFailure(PhotoLibraryError.requestOutsideChangeBlock(name).description) }
        block.albumRequests.append(request)
    }

    static func delete(assets: [String]) {
        guard let block = current else { preconditionFailure(PhotoLibraryError.requestOutsideChangeBlock("deleteAssets").description) }
        block.deletedAssets.append(contentsOf: assets)
    }

    static func delete(albums: [String]) {
        guard let block = current else {
            preconditionFailure(PhotoLibraryError.requestOutsideChangeBlock("deleteAssetCollections").description)
        }
        block.deletedAlbums.append(contentsOf: albums)
    }

    /// What the requests ask, as values that can cross to the library's queue.
    var plan: ChangePlan {
        var plan = ChangePlan()
        for request in assetRequests {
            if let target = request.target {
                plan.assetEdits.append(.init(identifier: target, isFavorite: request.isFavorite,
                                             creationDate: request.creationDateWasSet ? .some(request.creationDate) : nil))
            } else if let placeholder = request.placeholder {
                plan.creations.append(.init(placeholder: placeholder, resources: request.resources.map { ($0.type, $0.source, $0.options) },
                                            creationDate: request.creationDateWasSet ? request.creationDate : nil,
                                            isFavorite: request.isFavorite))
            }
        }
        for request in albumRequests {
            switch request.target {
            case .identifier(let identifier)?:
                plan.albumEdits.append(.init(target: .existing(identifier), title: request.title, steps: request.edits))
            case .titled(let title)?:
                plan.albumEdits.append(.init(target: .titled(title, request.placeholder ?? ObjectPlaceholder()), title: request.title,
                                             steps: request.edits))
            case nil:
                guard let placeholder = request.placeholder else { continue }
                plan.albumEdits.append(.init(target: .created(placeholder), title: request.title, steps: request.edits))
            }
        }
        plan.deletedAssets = deletedAssets
        plan.deletedAlbums = deletedAlbums
        return plan
    }
}

/// One change block's requests, applied all or nothing on the library's queue.
struct ChangePlan: Sendable {
    enum Source: Sendable {
        case file(URL)
        case data(Data)
    }

    struct Creation: Sendable {
        var placeholder: ObjectPlaceholder
        var resources: [(type: AssetResourceType, source: Source, options: AssetResourceCreationOptions)]
        var creationDate: Date?
        var isFavorite: Bool
    }

    struct AssetEdit: Sendable {
        var identifier: String
        var isFavorite: Bool
        /// nil: unchanged; .some(nil): back to what the file says.
        var creationDate: Date??
    }

    struct AlbumEdit: Sendable {
        enum Target: Sendable {
            case existing(String)
            case created(ObjectPlaceholder)
            /// The album of this title, made when there is none.
            case titled(String, ObjectPlaceholder)
        }

        enum Member: Sendable {
            case asset(String)
            case placeholder(ObjectPlaceholder)

            var identifier: String {
                switch self {
                case .asset(let identifier): identifier
                case .placeholder(let placeholder): placeholder.localIdentifier
                }
            }
        }

        enum Step: Sendable {
            case add([Member])
            case remove([String])
        }

        var target: Target
        var title: String
        var steps: [Step]
    }

    var creations: [Creation] = []
    var assetEdits: [AssetEdit] = []
    var albumEdits: [AlbumEdit] = []
    var deletedAssets: [String] = []
    var deletedAlbums: [String] = []

    var isEmpty: Bool {
        creations.isEmpty && assetEdits.isEmpty && albumEdits.isEmpty && deletedAssets.isEmpty && deletedAlbums.isEmpty
    }
}
