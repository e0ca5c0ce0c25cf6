import Foundation

/// What a fetch selects and how it orders it: PhotoKit's PHFetchOptions. PhotoKit takes an NSPredicate
/// string; here the predicate is typed (`AssetPredicate`), so a misspelt key is a compile error rather than an
/// exception at run time. Foundation on Linux has no string-keyed NSSortDescriptor, so PhotoKit's
/// `NSSortDescriptor(key: "creationDate", ascending: false)` ports as
/// `FetchOptions.SortDescriptor(key: "creationDate", ascending: false)`.
public final class FetchOptions: @unchecked Sendable {
    /// One sort key. Assets: creationDate, modificationDate, duration, pixelWidth, pixelHeight, mediaType,
    /// isFavorite (or favorite), localIdentifier, fileSize. Albums: title (or localizedTitle), startDate,
    /// estimatedAssetCount, localIdentifier.
    public struct SortDescriptor: Sendable, Equatable {
        public var key: String
        public var ascending: Bool

        public init(key: String, ascending: Bool) {
            self.key = key
            self.ascending = ascending
        }
    }

    public var predicate: AssetPredicate?
    public var sortDescriptors: [SortDescriptor]?
    /// At most this many; 0 for no limit.
    public var fetchLimit: Int = 0
    /// Skips this many first (a Linux addition: a page of a long list, as the web gallery asks for).
    public var fetchOffset: Int = 0
    public var includeHiddenAssets = false

    public init() {}
}

/// Which assets a fetch selects.
public indirect enum AssetPredicate: Sendable, Equatable {
    case mediaType(AssetMediaType)
    case favorite(Bool)
    /// Created at or after `from` and before `to` (either end open).
    case created(from: Date?, to: Date?)
    /// Directly in one folder of the library, not deeper: "" its own folder, "2026-11-28" that subfolder (a
    /// Linux addition: a library is a folder, and may hold subfolders).
    case inFolder(String)
    case all([AssetPredicate])
    case any([AssetPredicate])
    case not(AssetPredicate)

    public static func created(in range: Range<Date>) -> AssetPredicate { .created(from: range.lowerBound, to: range.upperBound) }
    public static func created(after date: Date) -> AssetPredicate { .created(from: date, to: nil) }
    public static func created(before date: Date) -> AssetPredicate { .created(from: nil, to: date) }
}

/// The result of a fetch, in the order asked (PhotoKit's PHFetchResult): a collection, with PhotoKit's names
/// for its parts as well.
public struct FetchResult<Object: Sendable & Hashable>: Sendable, RandomAccessCollection {
    let objects: [Object]
    /// Runs the same fetch again, for `Change.changeDetails(for:)`.
    let refetch: (@Sendable () -> [Object])?

    init(_ objects: [Object], refetch: (@Sendable () -> [Object])? = nil) {
        self.objects = objects
        self.refetch = refetch
    }

    public var startIndex: Int { objects.startIndex }
    public var endIndex: Int { objects.endIndex }
    public subscript(position: Int) -> Object { objects[position] }

    public func object(at index: Int) -> Object { objects[index] }
    public var firstObject: Object? { objects.first }
    public var lastObject: Object? { objects.last }
    public func contains(_ object: Object) -> Bool { objects.contains(object) }
    public func index(of object: Object) -> Int? { objects.firstIndex(of: object) }
    public func objects(at indexes: IndexSet) -> [Object] { indexes.map { objects[$0] } }
    public func enumerateObjects(_ body: (_ object: Object, _ index: Int, _ stop: inout Bool) -> Void) {
        var stop = false
        for (index, object) in objects.enumerated() {
            body(object, index, &stop)
            if stop { return }
        }
    }
}
