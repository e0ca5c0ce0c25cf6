import Foundation
import GCapture
@testable import GCapturePhotos
import XCTest

/// The media library over a real folder and a real SQLite index: files checked by exiftool and GStreamer's
/// own tools, the index deleted and corrupted for real.
final class PhotoLibraryTests: XCTestCase {
    /// A real JPEG (the engine's libjpeg encoder), `width` x `height`, a gradient whose shade is `shade`.
    func jpeg(width: Int = 64, height: Int = 48, shade: UInt8 = 0) throws -> Data {
        let pixels = (0..<(width * height)).map { UInt8(truncatingIfNeeded: $0 % width * 4 + Int(shade)) }
        return try JPEGEncoder.encode(grayscale: pixels, width: width, height: height, quality: 80)
    }

    func writeJPEG(_ url: URL, width: Int = 64, height: Int = 48, exif: [String] = []) throws {
        try jpeg(width: width, height: height).write(to: url)
        guard !exif.isEmpty else { return }
        let result = try runTool("/usr/bin/exiftool", ["-q", "-overwrite_original"] + exif + [url.path])
        XCTAssertEqual(result.status, 0, "exiftool: \(result.stderr)")
    }

    /// A real one-second MP4 (GStreamer's test source, x264, mp4mux), 320x240 at 30 fps.
    func writeMovie(_ url: URL) throws {
        let result = try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=30", "!",
                                                             "video/x-raw,width=320,height=240,framerate=30/1", "!", "x264enc", "!",
                                                             "mp4mux", "!", "filesink", "location=\(url.path)"])
        XCTAssertEqual(result.status, 0, "gst-launch: \(result.stderr)")
    }

    func newestFirst(limit: Int = 0) -> FetchOptions {
        let options = FetchOptions()
        options.sortDescriptors = [.init(key: "creationDate", ascending: false)]
        options.fetchLimit = limit
        return options
    }

    func testAPhotosHeaderGivesItsSizeOrientationAndTheMomentExiftoolWrote() throws {
        let url = try temporaryFolder().appendingPathComponent("turned.jpg")
        try writeJPEG(url, width: 64, height: 48,
                      exif: ["-Orientation#=6", "-DateTimeOriginal=2025:06:01 10:20:30", "-OffsetTimeOriginal=+02:00"])
        let header = try JPEGHeader.read(path: url.path)
        XCTAssertEqual(header.pixelWidth, 64)
        XCTAssertEqual(header.pixelHeight, 48)
        XCTAssertEqual(header.orientation, 6)
        XCTAssertEqual(header.displayedSize.width, 48, "orientation 6 turns the picture a quarter")
        XCTAssertEqual(header.dateTaken, ISO8601DateFormatter().date(from: "2025-06-01T08:20:30Z"))

        XCTAssertFalse(header.dateTakenHasSubseconds)
        XCTAssertEqual(try runTool("/usr/bin/exiftool", ["-q", "-overwrite_original", "-SubSecTimeOriginal=25", url.path]).status, 0)
        let finer = try JPEGHeader.read(path: url.path)
        XCTAssertEqual(finer.dateTaken, ISO8601DateFormatter().date(from: "2025-06-01T08:20:30Z")?.addingTimeInterval(0.25))

        // EXIF's whole seconds give way to the file's finer time when the file was written within them.
        let taken = try XCTUnwrap(header.dateTaken)
        let metadata = MediaFileMetadata(mediaType: .image, dateTaken: taken)
        XCTAssertEqual(metadata.creationDate(fileDate: taken.addingTimeInterval(0.6)), taken.addingTimeInterval(0.6))
        XCTAssertEqual(metadata.creationDate(fileDate: taken.addingTimeInterval(3600)), taken, "a copy made later keeps the EXIF moment")

        let plain = try JPEGHeader.read(data: try jpeg(width: 30, height: 20))
        XCTAssertEqual([plain.pixelWidth, plain.pixelHeight, plain.orientation], [30, 20, 1])
        XCTAssertNil(plain.dateTaken)
        XCTAssertThrowsError(try JPEGHeader.read(data: Data("not a picture".utf8)))
        XCTAssertThrowsError(try JPEGHeader.read(data: try jpeg().prefix(40)), "a JPEG cut before its frame header")
    }

    func testAPhotoAddedInAChangeBlockIsInTheFolderAndFetchedNewestFirst() async throws {
        let folder = try temporaryFolder().appendingPathComponent("library")
        let library = PhotoLibrary(folder: folder)
        XCTAssertEqual(library.fetchAssets(with: nil).count, 0, "a library whose folder does not exist yet is empty")
        var placeholders: [ObjectPlaceholder] = []
        let first = try jpeg(shade: 10), second = try jpeg(width: 80, height: 60, shade: 20)
        try await library.performChanges {
            let request = AssetCreationRequest.forAsset()
            request.addResource(with: .photo, data: first, options: AssetResourceCreationOptions(originalFilename: "first.jpg"))
            request.creationDate = Date(timeIntervalSince1970: 1_000)
            placeholders.append(request.placeholderForCreatedAsset!)
        }
        try await library.performChanges {
            let request = AssetCreationRequest.forAsset()
            request.addResource(with: .photo, data: second, options: AssetResourceCreationOptions(originalFilename: "first.jpg"))
            request.isFavorite = true
            placeholders.append(request.placeholderForCreatedAsset!)
        }
        XCTAssertEqual(placeholders.map(\.localIdentifier), ["first.jpg", "first-2.jpg"], "a taken name is never overwritten")
        XCTAssertEqual(FileManager.default.contents(atPath: folder.appendingPathComponent("first.jpg").path), first)
        XCTAssertEqual(FileManager.default.contents(atPath: folder.appendingPathComponent("first-2.jpg").path), second)

        let newest = library.fetchAssets(with: .image, options: newestFirst(limit: 1))
        XCTAssertEqual(newest.count, 1)
        let asset = try XCTUnwrap(newest.firstObject)
        XCTAssertEqual(asset.localIdentifier, "first-2.jpg")
        XCTAssertEqual([asset.pixelWidth, asset.pixelHeight], [80, 60])
        XCTAssertTrue(asset.isFavorite)
        XCTAssertEqual(asset.mediaType, .image)
        XCTAssertEqual(asset.fileURL.path, folder.appendingPathComponent("first-2.jpg").path)
        XCTAssertEqual(library.fetchAssets(with: nil).map(\.localIdentifier), ["first.jpg", "first-2.jpg"], "oldest first by default")
        XCTAssertEqual(library.fetchAssets(with: nil).first?.creationDate, Date(timeIntervalSince1970: 1_000))
        let hidden = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".incoming") }
        XCTAssertEqual(hidden, [], "no half-added file is left behind")
    }

    func testAChangeBlockWithOneBadResourceAddsNothing() async throws {
        let folder = try temporaryFolder()
        let library = PhotoLibrary(folder: folder)
        let good = try jpeg()
        do {
            try await library.performChanges {
                AssetCreationRequest.forAsset().addResource(with: .photo, data: good, options: .init(originalFilename: "good.jpg"))
                AssetCreationRequest.forAsset().addResource(with: .photo, data: Data("garbage".utf8), options: .init(originalFilename: "bad.jpg"))
            }
            XCTFail("a block with a resource that is not a JPEG must fail")
        } catch let error as PhotoLibraryError {
            guard case .unsupportedResource(_, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("not a JPEG"), reason)
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".gcapture-library") }
        XCTAssertEqual(left, [], "the good photo of the failed block was taken out again")
        XCTAssertEqual(library.fetchAssets(with: nil).count, 0)
    }

    func testAMovieIsIndexedWithItsDurationAndSizeAndMovedWhenAsked() async throws {
        let scratch = try temporaryFolder()
        let source = scratch.appendingPathComponent("clip.mp4")
        try writeMovie(source)
        let library = PhotoLibrary(folder: scratch.appendingPathComponent("library"))
        var placeholder: ObjectPlaceholder?
        try await library.performChanges {
            let request = AssetCreationRequest.forAsset()
            request.addResource(with: .video, fileURL: source, options: .init(shouldMoveFile: true))
            placeholder = request.placeholderForCreatedAsset
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: source.path), "the file was moved, not copied")
        let movie = try XCTUnwrap(library.fetchAssets(with: .video).firstObject)
        XCTAssertEqual(movie.localIdentifier, placeholder?.localIdentifier)
        XCTAssertEqual([movie.pixelWidth, movie.pixelHeight], [320, 240])
        XCTAssertEqual(movie.duration, 1.0, accuracy: 0.1)
        XCTAssertEqual(library.fetchAssets(with: .image).count, 0)
    }

    func testAlbumsAndFavoritesOutliveTheIndex() async throws {
        let folder = try temporaryFolder()
        let library = PhotoLibrary(folder: folder)
        let pictures = try (0..<3).map { try jpeg(shade: UInt8($0 * 30)) }
        var album: ObjectPlaceholder?
        try await library.performChanges {
            let created = pictures.enumerated().map { index, data -> ObjectPlaceholder in
                let request = AssetCreationRequest.forAsset()
                request.addResource(with: .photo, data: data, options: .init(originalFilename: "p\(index).jpg"))
                return request.placeholderForCreatedAsset!
            }
            let request = AssetCollectionChangeRequest.creationRequestForAssetCollection(withTitle: "Wedding")
            request.addAssets([created[2], created[0]])
            album = request.placeholderForCreatedAssetCollection
        }
        let p1 = try XCTUnwrap(library.fetchAssets(withLocalIdentifiers: ["p1.jpg"]).firstObject)
        try await library.performChanges { AssetChangeRequest(for: p1).isFavorite = true }

        for suffix in ["", "-wal", "-shm"] {
            try? FileManager.default.removeItem(at: folder.appendingPathComponent(LibraryIndex.fileName + suffix))
        }
        let reopened = PhotoLibrary(folder: folder)
        try await reopened.refresh()
        let albums = reopened.fetchAssetCollections(with: .album, subtype: .any)
        XCTAssertEqual(albums.map(\.localizedTitle), ["Wedding"])
        XCTAssertEqual(albums.first?.localIdentifier, album?.localIdentifier)
        XCTAssertEqual(albums.first?.estimatedAssetCount, 2)
        XCTAssertEqual(reopened.fetchAssets(in: try XCTUnwrap(albums.first)).map(\.localIdentifier), ["p2.jpg", "p0.jpg"],
                       "the album keeps its order")
        let favorites = FetchOptions()
        favorites.predicate = .favorite(true)
        XCTAssertEqual(reopened.fetchAssets(with: favorites).map(\.localIdentifier), ["p1.jpg"])
        XCTAssertEqual(reopened.fetchAssets(with: nil).count, 3)
    }

    func testACorruptIndexIsRebuiltWithAWarningAndNothingLost() async throws {
        let folder = try temporaryFolder()
        for index in 0..<5 { try writeJPEG(folder.appendingPathComponent("shot\(index).jpg")) }
        let first = PhotoLibrary(folder: folder)
        try await first.refresh()
        XCTAssertEqual(first.fetchAssets(with: nil).count, 5)
        XCTAssertNil(first.indexRecoveryReason)

        let index = folder.appendingPathComponent(LibraryIndex.fileName)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: index.path + suffix) }
        try Data(repeating: 0x5A, count: 8192).write(to: index)
        let reopened = PhotoLibrary(folder: folder)
        try await reopened.refresh()
        XCTAssertEqual(reopened.fetchAssets(with: nil).count, 5, "every photo is back in the rebuilt index")
        let reason = try XCTUnwrap(reopened.indexRecoveryReason, "the rebuild is reported")
        XCTAssertTrue(reason.contains("not a database") || reason.contains("corrupt"), reason)
    }

    final class ChangeLog: PhotoLibraryChangeObserver, @unchecked Sendable {
        private let lock = NSLock()
        private var changes: [Change] = []
        let arrived = DispatchSemaphore(value: 0)
        var last: Change? { lock.withLock { changes.last } }

        func photoLibraryDidChange(_ changeInstance: Change) {
            lock.withLock { changes.append(changeInstance) }
            arrived.signal()
        }
    }

    func testFilesAnotherProgramAddsAndDeletesReachObserversAndFetchResults() async throws {
        let folder = try temporaryFolder()
        try writeJPEG(folder.appendingPathComponent("kept.jpg"))
        try writeJPEG(folder.appendingPathComponent("doomed.jpg"))
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        let before = library.fetchAssets(with: .image, options: nil)
        XCTAssertEqual(Set(before.map(\.localIdentifier)), ["kept.jpg", "doomed.jpg"])

        let log = ChangeLog()
        library.register(log)
        let outside = try temporaryFolder().appendingPathComponent("new.jpg")
        try writeJPEG(outside, exif: ["-DateTimeOriginal=2030:01:01 00:00:00"])
        XCTAssertEqual(try runTool("/bin/cp", [outside.path, folder.appendingPathComponent("new.jpg").path]).status, 0)
        XCTAssertEqual(try runTool("/bin/rm", [folder.appendingPathComponent("doomed.jpg").path]).status, 0)

        let change = try await XCTUnwrapAsync(try await library.refresh())
        XCTAssertEqual(change.insertedAssetIdentifiers, ["new.jpg"])
        XCTAssertEqual(change.removedAssetIdentifiers, ["doomed.jpg"])
        XCTAssertEqual(log.arrived.wait(timeout: .now() + 5), .success, "the observer was told")
        let details = try XCTUnwrap(change.changeDetails(for: before))
        XCTAssertEqual(details.insertedObjects.map(\.localIdentifier), ["new.jpg"])
        XCTAssertEqual(details.removedObjects.map(\.localIdentifier), ["doomed.jpg"])
        XCTAssertEqual(details.fetchResultAfterChanges.map(\.localIdentifier).sorted(), ["kept.jpg", "new.jpg"])
        let refreshedAgain = try await library.refresh()
        XCTAssertNil(refreshedAgain, "nothing changed since")
    }

    /// The observer's changes, waited for with a deadline.
    func nextChange(_ log: ChangeLog, within seconds: Double) throws -> Change {
        guard log.arrived.wait(timeout: .now() + seconds) == .success else { throw DeadlineExceeded(description: "no change within \(seconds) s") }
        return try XCTUnwrap(log.last)
    }

    func testAPhotoCopiedInByCpReachesTheObserverWithinASecondAndADeletedOneLeaves() async throws {
        let folder = try temporaryFolder()
        try writeJPEG(folder.appendingPathComponent("old.jpg"))
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        let log = ChangeLog()
        library.register(log)
        let outside = try temporaryFolder().appendingPathComponent("new.jpg")
        try writeJPEG(outside)

        XCTAssertEqual(try runTool("/bin/cp", [outside.path, folder.appendingPathComponent("new.jpg").path]).status, 0)
        let copied = monotonicMilliseconds()
        let added = try nextChange(log, within: 5)
        let latency = monotonicMilliseconds() - copied
        XCTAssertEqual(added.insertedAssetIdentifiers, ["new.jpg"])
        XCTAssertLessThan(latency, 1000, "cp → observer took \(Int(latency)) ms")
        XCTAssertEqual(library.fetchAssets(withLocalIdentifiers: ["new.jpg"]).count, 1, "the index has it too")

        XCTAssertEqual(try runTool("/bin/mkdir", [folder.appendingPathComponent("later").path]).status, 0)
        _ = try? nextChange(log, within: 1) // a new folder alone changes nothing the index holds
        XCTAssertEqual(try runTool("/bin/cp", [outside.path, folder.appendingPathComponent("later/deep.jpg").path]).status, 0)
        XCTAssertEqual(try nextChange(log, within: 5).insertedAssetIdentifiers, ["later/deep.jpg"], "a subfolder made after the watch began is watched")

        // Linked in whole (`ln`, as the engine writes its photos): no close follows, the creation counts.
        XCTAssertEqual(try runTool("/bin/ln", [outside.path, folder.appendingPathComponent("linked.jpg").path]).status, 0)
        XCTAssertEqual(try nextChange(log, within: 5).insertedAssetIdentifiers, ["linked.jpg"], "a file linked in is seen")

        XCTAssertEqual(try runTool("/bin/rm", [folder.appendingPathComponent("old.jpg").path]).status, 0)
        XCTAssertEqual(try nextChange(log, within: 5).removedAssetIdentifiers, ["old.jpg"])
        library.unregisterChangeObserver(log)
    }

    func testFetchOptionsSelectByTypeDateAndFavoriteAndLimit() async throws {
        let folder = try temporaryFolder()
        for day in 1...6 {
            try writeJPEG(folder.appendingPathComponent("day\(day).jpg"), exif: ["-DateTimeOriginal=2026:03:0\(day) 12:00:00"])
        }
        try writeMovie(folder.appendingPathComponent("clip.mp4"))
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        let utc = ISO8601DateFormatter()
        let range = try XCTUnwrap(utc.date(from: "2026-03-02T00:00:00Z"))..<XCTUnwrap(utc.date(from: "2026-03-05T00:00:00Z"))
        let options = newestFirst()
        options.predicate = .all([.mediaType(.image), .created(in: range)])
        XCTAssertEqual(library.fetchAssets(with: options).map(\.localIdentifier), ["day4.jpg", "day3.jpg", "day2.jpg"])
        options.fetchLimit = 2
        XCTAssertEqual(library.fetchAssets(with: options).count, 2)
        options.predicate = .not(.mediaType(.image))
        options.fetchLimit = 0
        XCTAssertEqual(library.fetchAssets(with: options).map(\.localIdentifier), ["clip.mp4"])
        XCTAssertEqual(library.countAssets(with: nil), 7)
    }

    /// A subfolder's photos are the library's, one folder at a time by `.inFolder`; a link to a folder is not
    /// walked (a link to / would walk the disk), a page is `fetchOffset` and `fetchLimit`.
    func testSubfoldersAreWalkedLinksToFoldersAreNotAndPagesComeByOffset() async throws {
        let folder = try temporaryFolder()
        for day in 1...4 {
            try writeJPEG(folder.appendingPathComponent("day\(day).jpg"), exif: ["-DateTimeOriginal=2026:03:0\(day) 12:00:00"])
        }
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("march/later"), withIntermediateDirectories: true)
        try writeJPEG(folder.appendingPathComponent("march/inside.jpg"))
        try writeJPEG(folder.appendingPathComponent("march/later/deeper.jpg"))
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("loop").path, withDestinationPath: folder.path)
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        XCTAssertEqual(Set(library.fetchAssets(with: nil).map(\.localIdentifier)),
                       ["day1.jpg", "day2.jpg", "day3.jpg", "day4.jpg", "march/inside.jpg", "march/later/deeper.jpg"])
        let options = newestFirst(limit: 2)
        options.predicate = .inFolder("")
        options.fetchOffset = 1
        XCTAssertEqual(library.fetchAssets(with: options).map(\.localIdentifier), ["day3.jpg", "day2.jpg"])
        XCTAssertEqual(library.countAssets(with: options), 4)
        options.predicate = .inFolder("march")
        options.fetchOffset = 0
        XCTAssertEqual(library.fetchAssets(with: options).map(\.localIdentifier), ["march/inside.jpg"])
    }

    func testAuthorizationComesFromTheFolder() async throws {
        let scratch = try temporaryFolder()
        let missing = PhotoLibrary(folder: scratch.appendingPathComponent("not/yet"))
        XCTAssertEqual(missing.authorizationStatus(for: .readWrite), .notDetermined)
        let granted = await missing.requestAuthorization(for: .readWrite)
        XCTAssertEqual(granted, .authorized)
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("not/yet").path), "the request made the folder")

        let notAFolder = scratch.appendingPathComponent("file")
        try Data().write(to: notAFolder)
        let blocked = PhotoLibrary(folder: notAFolder)
        XCTAssertEqual(blocked.authorizationStatus(for: .addOnly), .denied)
        XCTAssertEqual(blocked.authorizationAdvice(for: .addOnly), "\(notAFolder.path) is not a folder")
        let underFile = PhotoLibrary(folder: notAFolder.appendingPathComponent("below"))
        XCTAssertEqual(underFile.authorizationStatus(for: .readWrite), .denied, "nothing can be made under a file")
        do {
            try await blocked.performChanges { AssetCreationRequest.forAsset().addResource(with: .photo, data: Data(), options: nil) }
            XCTFail("a change to a library that is not a folder must fail")
        } catch let error as PhotoLibraryError {
            XCTAssertTrue(error.description.contains(notAFolder.path), error.description)
        }
    }

    /// The rows of a JPEG as ffmpeg (not our decoder) reads them, one grey byte per pixel.
    func greyRows(of jpeg: Data, width: Int, height: Int) throws -> [[UInt8]] {
        let url = try temporaryFolder().appendingPathComponent("picture.jpg")
        try jpeg.write(to: url)
        let raw = url.deletingPathExtension().appendingPathExtension("gray")
        let result = try runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", url.path, "-f", "rawvideo", "-pix_fmt", "gray", raw.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let bytes = [UInt8](try Data(contentsOf: raw))
        XCTAssertEqual(bytes.count, width * height)
        return (0..<height).map { Array(bytes[$0 * width..<($0 + 1) * width]) }
    }

    func testAThumbnailIsDownsampledAndTurnedUprightAsTheExifSays() async throws {
        let folder = try temporaryFolder()
        // Stored 640x480, its left half black and right half white; EXIF 6 shows it turned a quarter clockwise,
        // so the black half is at the top of what a viewer shows.
        let pixels = (0..<(640 * 480)).map { $0 % 640 < 320 ? UInt8(0) : UInt8(255) }
        try JPEGEncoder.encode(grayscale: pixels, width: 640, height: 480, quality: 90).write(to: folder.appendingPathComponent("turned.jpg"))
        XCTAssertEqual(try runTool("/usr/bin/exiftool", ["-q", "-overwrite_original", "-Orientation#=6",
                                                         folder.appendingPathComponent("turned.jpg").path]).status, 0)
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        let asset = try XCTUnwrap(library.fetchAssets(with: .image).firstObject)
        XCTAssertEqual([asset.pixelWidth, asset.pixelHeight], [480, 640], "the asset's size is the shown one")

        let manager = CachingImageManager(countLimit: 4)
        let image = try await manager.requestImage(for: asset, targetSize: CGSize(width: 120, height: 120), contentMode: .aspectFit)
        XCTAssertEqual([image.pixelWidth, image.pixelHeight], [90, 120], "fits 120x120, upright")
        let rows = try greyRows(of: image.jpegData, width: 90, height: 120)
        XCTAssertLessThan(rows[10][45], 40, "top: the stored left half, black")
        XCTAssertGreaterThan(rows[110][45], 215, "bottom: the stored right half, white")
        let again = try await manager.requestImage(for: asset, targetSize: CGSize(width: 120, height: 120), contentMode: .aspectFit)
        XCTAssertEqual(again, image)
        XCTAssertEqual(manager.cachedImageCount, 1)

        let filled = try await manager.requestImage(for: asset, targetSize: CGSize(width: 120, height: 120), contentMode: .aspectFill)
        XCTAssertEqual([filled.pixelWidth, filled.pixelHeight], [120, 160], "covers 120x120")

        try writeMovie(folder.appendingPathComponent("clip.mp4"))
        try await library.refresh()
        let movie = try XCTUnwrap(library.fetchAssets(with: .video).firstObject)
        let poster = try await ImageManager.default().requestImage(for: movie, targetSize: CGSize(width: 160, height: 160))
        XCTAssertEqual([poster.pixelWidth, poster.pixelHeight], [160, 120], "the movie's first frame, 4:3")
    }

    func testAFolderGoneForAWhileIsAnErrorNotAnEmptyLibrary() async throws {
        let scratch = try temporaryFolder()
        let folder = scratch.appendingPathComponent("usb-stick")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for index in 0..<3 { try writeJPEG(folder.appendingPathComponent("p\(index).jpg")) }
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        let log = ChangeLog()
        library.register(log)
        let away = scratch.appendingPathComponent("unmounted")
        try FileManager.default.moveItem(at: folder, to: away)
        do {
            try await library.refresh()
            XCTFail("a folder that is gone cannot be refreshed")
        } catch PhotoLibraryError.unreadable(let url, _) {
            XCTAssertEqual(url.path, folder.path)
        }
        XCTAssertEqual(library.fetchAssets(with: nil).count, 3, "the index did not forget the assets")
        try FileManager.default.moveItem(at: away, to: folder)
        let change = try await library.refresh()
        XCTAssertNil(change, "back as it was: nothing changed")
        library.unregisterChangeObserver(log)
        XCTAssertEqual(log.arrived.wait(timeout: .now()), .timedOut, "no observer was told of removals")
    }

    func testAChangeNamingAnAssetThatIsGoneFailsAndChangesNothing() async throws {
        let folder = try temporaryFolder()
        try writeJPEG(folder.appendingPathComponent("a.jpg"))
        let library = PhotoLibrary(folder: folder)
        try await library.refresh()
        let asset = try XCTUnwrap(library.fetchAssets(with: nil).firstObject)
        try FileManager.default.removeItem(at: folder.appendingPathComponent("a.jpg"))
        do {
            try await library.performChanges { AssetChangeRequest(for: asset).isFavorite = true }
            XCTFail("the asset's file is gone")
        } catch PhotoLibraryError.noSuchObject(let identifier) {
            XCTAssertEqual(identifier, "a.jpg")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent(AlbumFile.name).path))
    }
}

func XCTUnwrapAsync<T>(_ value: @autoclosure () async throws -> T?, file: StaticString = #filePath, line: UInt = #line) async throws -> T {
    let unwrapped = try await value()
    return try XCTUnwrap(unwrapped, file: file, line: line)
}
