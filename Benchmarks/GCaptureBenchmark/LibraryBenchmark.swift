import Foundation
import GCapture
import GCapturePhotos

/// The photo library at a wedding booth's scale: `assets` small JPEGs (made here) in one folder, and
/// - a full rebuild of the index from the folder (the index deleted; open, then `refresh()`), goal ≤ 60 s;
/// - the index's size on disk, goal ≤ 50 MB;
/// - the newest 100 photos fetched (`fetchAssets` with a limit, sorted by creation date), from the caller's
///   side, goal ≤ 20 ms at the 95th percentile; beside it, the same answer the way the web gallery found it
///   before the library (list the folder, stat every file, sort): the ratio says what the index buys;
/// - a refresh that finds nothing changed (the folder walked and compared with the index);
/// - one gallery page (60 items) served by `gcapture serve` over that folder, first and deep in the list, timed
///   from the client's side, goal ≤ 50 ms; beside it, the folder-scanning listing (/api/gallery) over the
///   same folder.
enum LibraryBenchmark {
    struct Result: Codable, Sendable {
        var assets: Int
        var rounds: Int
        var makeSeconds: Double
        var rebuildSeconds: [Double]
        var indexMegabytes: Double
        var newest100Milliseconds: Summary
        var folderScanNewest100Milliseconds: Summary
        var unchangedRefreshMilliseconds: Summary
        var firstPageMilliseconds: Summary
        var deepPageMilliseconds: Summary
        var folderScanListingMilliseconds: Summary
    }

    static func run(assets: Int, rounds: Int, progress: (String) -> Void) async throws -> Result {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gcapture-bench-library-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        progress("library: making \(assets) photos in \(folder.path)")
        let madeAt = Date()
        let photo = try JPEGEncoder.encode(grayscale: (0..<(64 * 48)).map { UInt8(truncatingIfNeeded: $0) }, width: 64, height: 48)
        let base = Date(timeIntervalSince1970: 1_750_000_000)
        for number in 0..<assets {
            let path = folder.appendingPathComponent(String(format: "IMG-%06d.jpg", number)).path
            guard FileManager.default.createFile(atPath: path, contents: photo) else { throw BenchmarkError.child("cannot write \(path)") }
            // One photo every 10 s of a long evening: the creation dates the index sorts by.
            let moment = base.addingTimeInterval(Double(number) * 10)
            var times = [timespec(tv_sec: Int(moment.timeIntervalSince1970), tv_nsec: 0),
                         timespec(tv_sec: Int(moment.timeIntervalSince1970), tv_nsec: 0)]
            utimensat(AT_FDCWD, path, &times, 0)
        }
        let makeSeconds = Date().timeIntervalSince(madeAt)

        var rebuilds: [Double] = []
        var library = PhotoLibrary(folder: folder)
        for round in 1...rounds {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: folder.appendingPathComponent(".gcapture-library.sqlite" + suffix).path) }
            progress("library: rebuild \(round)/\(rounds) of the index from \(assets) files")
            library = PhotoLibrary(folder: folder)
            let start = monotonicSeconds()
            try await library.refresh()
            rebuilds.append(monotonicSeconds() - start)
            guard library.countAssets() == assets else { throw BenchmarkError.child("the index holds \(library.countAssets()) of \(assets) assets") }
        }
        let indexBytes = ["", "-wal", "-shm"].compactMap {
            try? FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(".gcapture-library.sqlite" + $0).path)[.size] as? Int
        }.reduce(0, +)

        progress("library: the newest 100, from the index and from a folder scan")
        let options = FetchOptions()
        options.sortDescriptors = [.init(key: "creationDate", ascending: false)]
        options.fetchLimit = 100
        var fetches: [Double] = [], scans: [Double] = []
        let expected = (0..<100).map { String(format: "IMG-%06d.jpg", assets - 1 - $0) }
        for _ in 0..<(rounds * 20) {
            let start = monotonicSeconds()
            let newest = library.fetchAssets(with: .image, options: options)
            fetches.append((monotonicSeconds() - start) * 1000)
            guard newest.map(\.localIdentifier) == Array(expected.prefix(min(100, assets))) else {
                throw BenchmarkError.child("the index's newest 100 are not the newest files")
            }
        }
        for _ in 0..<rounds {
            let start = monotonicSeconds()
            let newest = newestByScanning(folder, count: 100)
            scans.append((monotonicSeconds() - start) * 1000)
            guard newest == Array(expected.prefix(min(100, assets))) else { throw BenchmarkError.child("the scan's newest 100 differ") }
        }
        var refreshes: [Double] = []
        for _ in 0..<rounds {
            let start = monotonicSeconds()
            let change = try await library.refresh()
            refreshes.append((monotonicSeconds() - start) * 1000)
            if change != nil { throw BenchmarkError.child("a refresh of an unchanged folder found a change") }
        }
        progress("library: gallery pages served by gcapture serve over the folder")
        let pages = try servedPages(folder: folder, assets: assets, rounds: rounds)
        return Result(assets: assets, rounds: rounds, makeSeconds: makeSeconds, rebuildSeconds: rebuilds,
                      indexMegabytes: Double(indexBytes) / 1_048_576, newest100Milliseconds: Summary(fetches),
                      folderScanNewest100Milliseconds: Summary(scans), unchangedRefreshMilliseconds: Summary(refreshes),
                      firstPageMilliseconds: Summary(pages.first), deepPageMilliseconds: Summary(pages.deep),
                      folderScanListingMilliseconds: Summary(pages.scan))
    }

    /// `gcapture serve` (the test camera running, as in use) over the library's folder: its first page and a
    /// page half-way down, and the old folder-scanning listing, each on a new connection.
    static func servedPages(folder: URL, assets: Int, rounds: Int) throws -> (first: [Double], deep: [Double], scan: [Double]) {
        let (server, port) = try ServeBenchmark.launchServer(output: folder, extra: ["--live-size", "320x240"])
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        func page(_ target: String, items: Int) throws -> Double {
            let answer = try ServeBenchmark.timedGet(port: port, target)
            guard answer.status == 200, answer.bytes > items * 100 else {
                throw BenchmarkError.child("\(target) answered \(answer.status) with \(answer.bytes) bytes")
            }
            return answer.milliseconds
        }
        let pageSize = min(60, assets)
        // The server's first page waits for its first refresh of the folder: not what a page costs.
        _ = try page("/api/library?limit=\(pageSize)", items: pageSize)
        var first: [Double] = [], deep: [Double] = [], scan: [Double] = []
        for _ in 0..<(rounds * 20) {
            first.append(try page("/api/library?limit=\(pageSize)", items: pageSize))
            deep.append(try page("/api/library?limit=\(pageSize)&offset=\(assets / 2)", items: pageSize))
        }
        for _ in 0..<rounds { scan.append(try page("/api/gallery", items: assets)) }
        return (first, deep, scan)
    }

    /// The web gallery's way before the library (MediaFolders.items, still /api/gallery): every name, a stat
    /// each, sorted by modification time.
    static func newestByScanning(_ folder: URL, count: Int) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var dated: [(name: String, modified: Int)] = []
        dated.reserveCapacity(names.count)
        for name in names where !name.hasPrefix(".") && name.hasSuffix(".jpg") {
            var info = stat()
            guard stat(folder.appendingPathComponent(name).path, &info) == 0 else { continue }
            dated.append((name, Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)))
        }
        return dated.sorted { $0.modified != $1.modified ? $0.modified > $1.modified : $0.name > $1.name }.prefix(count).map(\.name)
    }

    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    static func table(_ result: Result) -> String {
        func verdict(_ met: Bool) -> String { met ? "MET" : "MISSED" }
        let rebuild = Statistics.median(result.rebuildSeconds)
        let fetch = result.newest100Milliseconds, scan = result.folderScanNewest100Milliseconds
        let first = result.firstPageMilliseconds, deep = result.deepPageMilliseconds, listing = result.folderScanListingMilliseconds
        return String(format: """
            Photo library (%d photos of 64x48 in one folder, made in %.1f s; %d rounds)
              full rebuild of the index, median      %8.2f s     (worst %.2f s)        goal ≤ 60 s     %@
              index on disk                          %8.1f MB                           goal ≤ 50 MB    %@
              newest 100 fetched, p50 / p95          %8.2f / %.2f ms                   goal ≤ 20 ms    %@
              the same by a folder scan (the old gallery), p50   %8.1f ms   index / scan %.3f×
              refresh with nothing changed, median   %8.1f ms
              one gallery page (60) served, p50 / p95 %7.2f / %.2f ms                   goal ≤ 50 ms    %@
              a page half-way down, p50 / p95        %8.2f / %.2f ms                   goal ≤ 50 ms    %@
              the folder-scanning listing (/api/gallery, every item), p50   %8.1f ms   page / listing %.3f×
            """, result.assets, result.makeSeconds, result.rounds,
                      rebuild, result.rebuildSeconds.max() ?? .nan, verdict(rebuild <= 60) as NSString,
                      result.indexMegabytes, verdict(result.indexMegabytes <= 50) as NSString,
                      fetch.median, Statistics.percentile(fetch.samples, 0.95),
                      verdict(Statistics.percentile(fetch.samples, 0.95) <= 20) as NSString,
                      scan.median, fetch.median / scan.median, result.unchangedRefreshMilliseconds.median,
                      first.median, Statistics.percentile(first.samples, 0.95), verdict(Statistics.percentile(first.samples, 0.95) <= 50) as NSString,
                      deep.median, Statistics.percentile(deep.samples, 0.95), verdict(Statistics.percentile(deep.samples, 0.95) <= 50) as NSString,
                      listing.median, first.median / listing.median)
    }
}
