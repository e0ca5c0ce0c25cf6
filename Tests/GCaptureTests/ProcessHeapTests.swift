import Foundation
import Glibc
import XCTest
@testable import GCapture

/// The heap limit is set when the program loads, so threads made before any session share two arenas.
final class ProcessHeapTests: XCTestCase {
    func testThreadsMadeBeforeAnySessionShareTwoArenas() throws {
        guard getenv("MALLOC_ARENA_MAX") == nil else {
            // Nothing in scripts/ or .ci sets it: under CI the variable being set fails rather than skips.
            throw TestEnvironment.missing("a process without MALLOC_ARENA_MAX (it is set here, and the process keeps its own choice)")
        }
        XCTAssertEqual(ProcessHeap.arenaLimit, 2)
        // Eight threads allocating at once: without the limit glibc gives contending threads arenas of their own.
        let group = DispatchGroup()
        for _ in 0..<8 {
            group.enter()
            Thread.detachNewThread {
                for _ in 0..<2_000 { free(malloc(64 * 1024)) }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success, "the allocating threads did not finish")
        XCTAssertLessThanOrEqual(try Self.arenaCount(), 2)
    }

    /// glibc's own account of its arenas: malloc_info's XML has one <heap nr="N"> per arena.
    private static func arenaCount() throws -> Int {
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        let symbol = try XCTUnwrap(dlsym(nil, "malloc_info"), "this C library has no malloc_info")
        let mallocInfo = unsafeBitCast(symbol, to: MallocInfo.self)
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        let stream = try XCTUnwrap(open_memstream(&buffer, &size))
        XCTAssertEqual(mallocInfo(0, stream), 0)
        fclose(stream)
        defer { free(buffer) }
        let xml = String(cString: try XCTUnwrap(buffer))
        return xml.components(separatedBy: "<heap nr=").count - 1
    }
}
