import Foundation

/// What one change or refresh did to a library (PhotoKit's PHChange): ask it how a fetch result you hold is
/// affected.
public struct Change: Sendable {
    public let insertedAssetIdentifiers: Set<String>
    public let changedAssetIdentifiers: Set<String>
    public let removedAssetIdentifiers: Set<String>
    /// Albums were created, deleted, renamed or given other assets.
    public let albumsChanged: Bool

    init(inserted: Set<String>, changed: Set<String>, removed: Set<String>, albumsChanged: Bool) {
        insertedAssetIdentifiers = inserted
        changedAssetIdentifiers = changed
        removedAssetIdentifiers = removed
        self.albumsChanged = albumsChanged
    }

    /// How `fetchResult` looks after this change, and what moved in it; nil when the change does not touch
    /// it. The fetch is run again with its options (PhotoKit's `changeDetails(for:)`).
    public func changeDetails<Object>(for fetchResult: FetchResult<Object>) -> FetchResultChangeDetails<Object>? {
        guard let refetch = fetchResult.refetch else { return nil }
        let after = FetchResult(refetch(), refetch: refetch)
        let touched = insertedAssetIdentifiers.union(changedAssetIdentifiers).union(removedAssetIdentifiers)
        let details = FetchResultChangeDetails(before: fetchResult, after: after, changedIdentifiers: touched)
        if details.insertedObjects.isEmpty && details.removedObjects.isEmpty && details.changedObjects.isEmpty
            && fetchResult.objects == after.objects {
            return nil
        }
        return details
    }
}

/// How a fetch result changed (PhotoKit's PHFetchResultChangeDetails).
public struct FetchResultChangeDetails<Object: Sendable & Hashable & Identifiable>: Sendable where Object.ID == String {
    public let fetchResultBeforeChanges: FetchResult<Object>
    public let fetchResultAfterChanges: FetchResult<Object>
    /// Indexes in the result before the change.
    public let removedIndexes: IndexSet
    public let removedObjects: [Object]
    /// Indexes in the result after the change.
    public let insertedIndexes: IndexSet
    public let insertedObjects: [Object]
    /// Indexes in the result after the change.
    public let changedIndexes: IndexSet
    public let changedObjects: [Object]
    public var hasIncrementalChanges: Bool { true }

    init(before: FetchResult<Object>, after: FetchResult<Object>, changedIdentifiers: Set<String>) {
        fetchResultBeforeChanges = before
        fetchResultAfterChanges = after
        let beforeByIdentifier = Dictionary(before.objects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let afterIdentifiers = Set(after.objects.map(\.id))
        removedIndexes = IndexSet(before.objects.indices.filter { !afterIdentifiers.contains(before.objects[$0].id) })
        removedObjects = removedIndexes.map { before.objects[$0] }
        insertedIndexes = IndexSet(after.objects.indices.filter { beforeByIdentifier[after.objects[$0].id] == nil })
        insertedObjects = insertedIndexes.map { after.objects[$0] }
        changedIndexes = IndexSet(after.objects.indices.filter { position in
            let object = after.objects[position]
            guard let old = beforeByIdentifier[object.id] else { return false }
            return old != object || changedIdentifiers.contains(object.id)
        })
        changedObjects = changedIndexes.map { after.objects[$0] }
    }
}
