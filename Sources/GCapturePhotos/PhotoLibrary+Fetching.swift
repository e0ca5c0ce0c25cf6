import Foundation
import GRDB

extension PhotoLibrary {
    /// The assets `options` select, in their order; without sort descriptors, oldest first (by creation
    /// date), as PhotoKit's `PHAsset.fetchAssets(with:)`.
    public func fetchAssets(with options: FetchOptions?) -> FetchResult<Asset> {
        assetFetch(scope: nil, options: options)
    }

    public func fetchAssets(with mediaType: AssetMediaType, options: FetchOptions? = nil) -> FetchResult<Asset> {
        assetFetch(scope: .mediaType(mediaType), options: options)
    }

    /// The assets in an album, in the album's order unless `options` sort them.
    public func fetchAssets(in collection: AssetCollection, options: FetchOptions? = nil) -> FetchResult<Asset> {
        assetFetch(scope: .album(collection.localIdentifier), options: options)
    }

    public func fetchAssets(withLocalIdentifiers identifiers: [String], options: FetchOptions? = nil) -> FetchResult<Asset> {
        assetFetch(scope: .identifiers(identifiers), options: options)
    }

    /// The library's albums, in the order they were made unless `options` sort them.
    public func fetchAssetCollections(with type: AssetCollectionType = .album, subtype: AssetCollectionSubtype = .any,
                                      options: FetchOptions? = nil) -> FetchResult<AssetCollection> {
        albumFetch(identifiers: nil, options: options)
    }

    public func fetchAssetCollections(withLocalIdentifiers identifiers: [String], options: FetchOptions? = nil) -> FetchResult<AssetCollection> {
        albumFetch(identifiers: identifiers, options: options)
    }

    /// How many assets `options` select, without reading them.
    public func countAssets(with options: FetchOptions? = nil) -> Int {
        count(scope: nil, options: options)
    }

    /// How many of an album's assets `options` select, without reading them.
    public func countAssets(in collection: AssetCollection, options: FetchOptions? = nil) -> Int {
        count(scope: .album(collection.localIdentifier), options: options)
    }

    private func count(scope: AssetScope?, options: FetchOptions?) -> Int {
        let (from, query, _) = selection(scope: scope, options: options)
        guard let index = try? openIndex() else { return 0 }
        return (try? index.count(sql: "SELECT count(*) " + from + query.whereClause, arguments: query.statementArguments)) ?? 0
    }

    private enum AssetScope {
        case mediaType(AssetMediaType)
        case album(String)
        case identifiers([String])
    }

    /// The FROM and WHERE of a fetch, and its order when its options give none.
    private func selection(scope: AssetScope?, options: FetchOptions?) -> (from: String, query: FetchQuery, defaultOrder: String) {
        var query = FetchQuery()
        var from = "FROM asset"
        var defaultOrder = "asset.creationDate ASC, asset.identifier ASC"
        switch scope {
        case .mediaType(let type)?: query.add(.mediaType(type))
        case .album(let album)?:
            from = "FROM albumAsset JOIN asset ON asset.identifier = albumAsset.asset"
            query.conditions.append("albumAsset.album = ?")
            query.arguments.append(album)
            defaultOrder = "albumAsset.position ASC"
        case .identifiers(let identifiers)?:
            query.conditions.append("asset.identifier IN (" + identifiers.map { _ in "?" }.joined(separator: ",") + ")")
            query.arguments.append(contentsOf: identifiers.map { $0 as (any DatabaseValueConvertible)? })
        case nil: break
        }
        if let predicate = options?.predicate { query.add(predicate) }
        return (from, query, defaultOrder)
    }

    private func assetFetch(scope: AssetScope?, options: FetchOptions?) -> FetchResult<Asset> {
        let (from, query, defaultOrder) = selection(scope: scope, options: options)
        let ascending = options?.sortDescriptors?.first?.ascending ?? true
        let sql = "SELECT \(LibraryIndex.assetColumns) " + from + query.whereClause
            + FetchQuery.order(options?.sortDescriptors, keys: FetchQuery.assetSortKeys,
                               tieBreaker: "asset.identifier" + (ascending ? " ASC" : " DESC"), defaultOrder: defaultOrder)
            + FetchQuery.limit(options)
        let arguments = query.statementArguments
        let folder = self.folder
        let fetch: @Sendable () -> [Asset] = { [self] in
            guard let index = try? openIndex() else { return [] }
            return (try? index.assets(sql: sql, arguments: arguments, folder: folder)) ?? []
        }
        return FetchResult(fetch(), refetch: fetch)
    }

    private func albumFetch(identifiers: [String]?, options: FetchOptions?) -> FetchResult<AssetCollection> {
        var conditions = "", arguments: [any DatabaseValueConvertible] = []
        if let identifiers {
            conditions = " WHERE album.identifier IN (" + identifiers.map { _ in "?" }.joined(separator: ",") + ")"
            arguments = identifiers
        }
        let ascending = options?.sortDescriptors?.first?.ascending ?? true
        let sql = """
            SELECT album.identifier, album.title,
                (SELECT count(*) FROM albumAsset JOIN asset ON asset.identifier = albumAsset.asset
                    WHERE albumAsset.album = album.identifier) AS estimatedAssetCount,
                (SELECT min(asset.creationDate) FROM albumAsset JOIN asset ON asset.identifier = albumAsset.asset
                    WHERE albumAsset.album = album.identifier) AS startDate
            FROM album
            """ + conditions
            + FetchQuery.order(options?.sortDescriptors, keys: FetchQuery.albumSortKeys,
                               tieBreaker: "album.position" + (ascending ? " ASC" : " DESC"), defaultOrder: "album.position ASC")
            + FetchQuery.limit(options)
        let statementArguments = StatementArguments(arguments.map { $0.databaseValue })
        let fetch: @Sendable () -> [AssetCollection] = { [self] in
            guard let index = try? openIndex() else { return [] }
            return (try? index.albums(sql: sql, arguments: statementArguments)) ?? []
        }
        return FetchResult(fetch(), refetch: fetch)
    }
}
