import Foundation
import GRDB

/// The library's index: a SQLite database (through GRDB) beside the media, `.gcapture-library.sqlite`. It
/// only caches what the files and the album file say, so it is rebuilt from them whenever it is missing,
/// unreadable, corrupt, or of another schema; a fetch is one indexed query instead of a walk of the folder.
final class LibraryIndex: Sendable {
    static let fileName = ".gcapture-library.sqlite"
    /// Raised whenever the tables change shape: an index of another version is rebuilt, not migrated.
    static let schemaVersion = 1

    let pool: DatabasePool
    /// Why the index was started afresh when it was opened (corrupt, another schema), or nil.
    let rebuildReason: String?

    /// Opens the index of `folder`, creating it, or replacing it when it cannot be trusted.
    init(folder: URL) throws {
        let path = folder.appendingPathComponent(Self.fileName).path
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            if let problem = try Self.problem(with: pool) {
                try? pool.close()
                throw IndexProblem(reason: problem)
            }
            self.pool = pool
            rebuildReason = nil
        } catch {
            let reason = (error as? IndexProblem)?.reason ?? "\(error)"
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            do {
                pool = try DatabasePool(path: path, configuration: configuration)
            } catch {
                throw PhotoLibraryError.unwritable(URL(fileURLWithPath: path), reason: "\(error)")
            }
            rebuildReason = reason
        }
        try pool.write { db in try Self.createTables(db) }
    }

    private struct IndexProblem: Error { var reason: String }

    /// Why an existing database cannot serve as the index, or nil when it can (or is new and empty).
    private static func problem(with pool: DatabasePool) throws -> String? {
        try pool.read { db -> String? in
            let check = try String.fetchOne(db, sql: "PRAGMA quick_check") ?? "no answer"
            guard check == "ok" else { return "the index is corrupt (\(check))" }
            let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
            let tables = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'table'") ?? 0
            if tables > 0, version != schemaVersion { return "the index has schema \(version), this program uses \(schemaVersion)" }
            return nil
        }
    }

    private static func createTables(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS asset (
                identifier TEXT PRIMARY KEY NOT NULL,
                mediaType INTEGER NOT NULL,
                pixelWidth INTEGER NOT NULL,
                pixelHeight INTEGER NOT NULL,
                orientation INTEGER NOT NULL,
                creationDate REAL,
                fileDate REAL,
                fileModified INTEGER NOT NULL,
                fileSize INTEGER NOT NULL,
                duration REAL NOT NULL,
                isFavorite INTEGER NOT NULL DEFAULT 0
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS assetByDate ON asset(creationDate, identifier);
            CREATE INDEX IF NOT EXISTS assetByTypeAndDate ON asset(mediaType, creationDate, identifier);
            CREATE TABLE IF NOT EXISTS album (
                identifier TEXT PRIMARY KEY NOT NULL,
                title TEXT NOT NULL,
                created REAL NOT NULL,
                position INTEGER NOT NULL
            );
            CREATE TABLE IF NOT EXISTS albumAsset (
                album TEXT NOT NULL,
                asset TEXT NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (album, asset)
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS albumAssetByAsset ON albumAsset(asset);
            CREATE TABLE IF NOT EXISTS laidAlbumFile (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                json BLOB NOT NULL
            );
            PRAGMA user_version = \(schemaVersion);
            """)
    }

    // MARK: Keeping it true

    /// What the index holds of each file, to compare with the folder.
    func stamps() throws -> [String: FileStamp] {
        try pool.read { db in
            var stamps: [String: FileStamp] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT identifier, fileSize, fileModified FROM asset")
            while let row = try rows.next() {
                stamps[row[0]] = FileStamp(size: row[1], modified: row[2])
            }
            return stamps
        }
    }

    /// What the index holds of these files (those it has).
    func stamps(of identifiers: some Collection<String>) throws -> [String: FileStamp] {
        try pool.read { db in
            var stamps: [String: FileStamp] = [:]
            let statement = try db.cachedStatement(sql: "SELECT fileSize, fileModified FROM asset WHERE identifier = ?")
            for identifier in identifiers {
                if let row = try Row.fetchOne(statement, arguments: [identifier]) { stamps[identifier] = FileStamp(size: row[0], modified: row[1]) }
            }
            return stamps
        }
    }

    struct Record: Sendable {
        var identifier: String
        var metadata: MediaFileMetadata
        var stamp: FileStamp
    }

    /// Writes what was read of new and changed files and forgets removed ones, in one transaction, and then
    /// lays the album file over them (favourites, creation dates, albums).
    func apply(records: [Record], removals: [String], albumFile: AlbumFile) throws {
        try pool.write { db in
            let upsert = try db.cachedStatement(sql: """
                INSERT OR REPLACE INTO asset (identifier, mediaType, pixelWidth, pixelHeight, orientation, creationDate,
                    fileDate, fileModified, fileSize, duration, isFavorite) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
                """)
            for record in records {
                let metadata = record.metadata
                let fileDate = Double(record.stamp.modified) / 1e9
                let created = metadata.creationDate(fileDate: Date(timeIntervalSince1970: fileDate)).timeIntervalSince1970
                try upsert.execute(arguments: [record.identifier, metadata.mediaType.rawValue, metadata.pixelWidth, metadata.pixelHeight,
                                               metadata.orientation, created, fileDate, record.stamp.modified, record.stamp.size,
                                               metadata.duration])
            }
            let remove = try db.cachedStatement(sql: "DELETE FROM asset WHERE identifier = ?")
            for identifier in removals { try remove.execute(arguments: [identifier]) }
            try Self.lay(albumFile, changed: Set(records.map(\.identifier)), over: db)
        }
    }

    /// Makes the favourites, the creation dates a request set, and the albums of the index those of `albumFile`.
    private static func lay(_ albumFile: AlbumFile, changed: Set<String>, over db: Database) throws {
        let favorites = try Set(String.fetchAll(db, sql: "SELECT identifier FROM asset WHERE isFavorite = 1"))
        let setFavorite = try db.cachedStatement(sql: "UPDATE asset SET isFavorite = ? WHERE identifier = ?")
        for identifier in favorites.subtracting(albumFile.favorites) { try setFavorite.execute(arguments: [0, identifier]) }
        for identifier in albumFile.favorites.subtracting(favorites).union(albumFile.favorites.intersection(changed)) {
            try setFavorite.execute(arguments: [1, identifier])
        }
        let setDate = try db.cachedStatement(sql: "UPDATE asset SET creationDate = ? WHERE identifier = ?")
        for (identifier, date) in albumFile.creationDates { try setDate.execute(arguments: [date.timeIntervalSince1970, identifier]) }

        try db.execute(sql: "INSERT OR REPLACE INTO laidAlbumFile (id, json) VALUES (1, ?)", arguments: [try JSONEncoder().encode(albumFile)])
        try db.execute(sql: "DELETE FROM album; DELETE FROM albumAsset")
        let addAlbum = try db.cachedStatement(sql: "INSERT INTO album (identifier, title, created, position) VALUES (?, ?, ?, ?)")
        let addMember = try db.cachedStatement(sql: "INSERT OR IGNORE INTO albumAsset (album, asset, position) VALUES (?, ?, ?)")
        for (position, album) in albumFile.albums.enumerated() {
            try addAlbum.execute(arguments: [album.identifier, album.title, album.created.timeIntervalSince1970, position])
            for (index, asset) in album.assets.enumerated() { try addMember.execute(arguments: [album.identifier, asset, index]) }
        }
    }

    /// The album file as last laid over the index: what a refresh compares the file on disk with.
    func albumFile() throws -> AlbumFile {
        try pool.read { db in
            guard let json = try Data.fetchOne(db, sql: "SELECT json FROM laidAlbumFile WHERE id = 1") else { return AlbumFile() }
            return (try? JSONDecoder().decode(AlbumFile.self, from: json)) ?? AlbumFile()
        }
    }

    // MARK: Fetching

    static let assetColumns = """
        asset.identifier, asset.mediaType, asset.pixelWidth, asset.pixelHeight, asset.orientation, asset.creationDate,
        asset.fileDate, asset.fileSize, asset.duration, asset.isFavorite
        """

    func assets(sql: String, arguments: StatementArguments, folder: URL) throws -> [Asset] {
        try pool.read { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                let identifier: String = row[0]
                let created: Double? = row[5], modified: Double? = row[6]
                return Asset(localIdentifier: identifier, mediaType: AssetMediaType(rawValue: row[1]) ?? .unknown,
                             pixelWidth: row[2], pixelHeight: row[3],
                             creationDate: created.map(Date.init(timeIntervalSince1970:)),
                             modificationDate: modified.map(Date.init(timeIntervalSince1970:)),
                             duration: row[8], isFavorite: row[9],
                             fileURL: folder.appendingPathComponent(identifier), exifOrientation: row[4], fileSize: row[7])
            }
        }
    }

    func albums(sql: String, arguments: StatementArguments) throws -> [AssetCollection] {
        try pool.read { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                let start: Double? = row[3]
                return AssetCollection(localIdentifier: row[0], localizedTitle: row[1], estimatedAssetCount: row[2],
                                       startDate: start.map(Date.init(timeIntervalSince1970:)))
            }
        }
    }

    func count(sql: String, arguments: StatementArguments = []) throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: sql, arguments: arguments) ?? 0 }
    }
}
