import Foundation
import GRDB

/// A fetch's options as SQL over the index: a WHERE clause with its arguments, an ORDER BY and a LIMIT.
struct FetchQuery {
    var conditions: [String] = []
    var arguments: [(any DatabaseValueConvertible)?] = []

    static let assetSortKeys: [String: String] = [
        "creationDate": "asset.creationDate", "modificationDate": "asset.fileDate", "duration": "asset.duration",
        "pixelWidth": "asset.pixelWidth", "pixelHeight": "asset.pixelHeight", "mediaType": "asset.mediaType",
        "isFavorite": "asset.isFavorite", "favorite": "asset.isFavorite", "localIdentifier": "asset.identifier",
        "fileSize": "asset.fileSize",
    ]

    static let albumSortKeys: [String: String] = [
        "title": "album.title", "localizedTitle": "album.title", "startDate": "startDate",
        "localIdentifier": "album.identifier", "estimatedAssetCount": "estimatedAssetCount",
    ]

    mutating func add(_ predicate: AssetPredicate) {
        let (sql, values) = Self.sql(for: predicate)
        conditions.append(sql)
        arguments.append(contentsOf: values)
    }

    private static func sql(for predicate: AssetPredicate) -> (String, [(any DatabaseValueConvertible)?]) {
        switch predicate {
        case .mediaType(let type): return ("asset.mediaType = ?", [type.rawValue])
        case .favorite(let favorite): return ("asset.isFavorite = ?", [favorite ? 1 : 0])
        case .created(let from, let to):
            var parts: [String] = [], values: [(any DatabaseValueConvertible)?] = []
            if let from { parts.append("asset.creationDate >= ?"); values.append(from.timeIntervalSince1970) }
            if let to { parts.append("asset.creationDate < ?"); values.append(to.timeIntervalSince1970) }
            return (parts.isEmpty ? "1" : "(" + parts.joined(separator: " AND ") + ")", values)
        case .inFolder(let folder):
            guard !folder.isEmpty else { return ("instr(asset.identifier, '/') = 0", []) }
            let prefix = folder.hasSuffix("/") ? folder : folder + "/"
            return ("(substr(asset.identifier, 1, ?) = ? AND instr(substr(asset.identifier, ?), '/') = 0)",
                    [prefix.utf8.count, prefix, prefix.utf8.count + 1])
        case .all(let predicates), .any(let predicates):
            guard !predicates.isEmpty else {
                if case .all = predicate { return ("1", []) } else { return ("0", []) }
            }
            let parts = predicates.map(sql(for:))
            let joiner: String
            if case .all = predicate { joiner = " AND " } else { joiner = " OR " }
            return ("(" + parts.map(\.0).joined(separator: joiner) + ")", parts.flatMap(\.1))
        case .not(let inner):
            let (text, values) = sql(for: inner)
            return ("NOT (" + text + ")", values)
        }
    }

    var whereClause: String { conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ") }

    var statementArguments: StatementArguments { StatementArguments(arguments.map { $0?.databaseValue ?? .null }) }

    /// ORDER BY for the options' sort descriptors (PhotoKit's default, the index's order, when there are
    /// none); an unknown key is a programming error, as PhotoKit's exception for one is.
    static func order(_ descriptors: [FetchOptions.SortDescriptor]?, keys: [String: String], tieBreaker: String, defaultOrder: String) -> String {
        guard let descriptors, !descriptors.isEmpty else { return " ORDER BY " + defaultOrder }
        let terms = descriptors.map { descriptor -> String in
            guard let column = keys[descriptor.key] else {
                preconditionFailure("FetchOptions: cannot sort by '\(descriptor.key)'; keys: \(keys.keys.sorted().joined(separator: ", "))")
            }
            return column + (descriptor.ascending ? " ASC" : " DESC")
        }
        return " ORDER BY " + (terms + [tieBreaker]).joined(separator: ", ")
    }

    static func limit(_ options: FetchOptions?) -> String {
        let limit = options?.fetchLimit ?? 0, offset = max(0, options?.fetchOffset ?? 0)
        guard limit > 0 || offset > 0 else { return "" }
        return " LIMIT \(limit > 0 ? limit : -1)" + (offset > 0 ? " OFFSET \(offset)" : "")
    }
}
