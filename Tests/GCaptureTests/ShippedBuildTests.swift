import Foundation
import XCTest

/// `gcapture` as it ships: the optimized build of scripts/build-release.sh, with the Swift runtime and
/// Foundation linked in. scripts/test.sh builds it; the other CLI tests run the debug build beside the tests.
final class ShippedBuildTests: XCTestCase {
    /// The package's .build/release/gcapture, whichever scratch path the tests were built in (.build-tsan).
    private func shippedCLI() throws -> URL {
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let release = package.appendingPathComponent(".build/release/gcapture")
        guard FileManager.default.isExecutableFile(atPath: release.path) else {
            throw TestEnvironment.missing("the shipped gcapture is not built (bash scripts/build-release.sh)")
        }
        return release
    }

    /// It runs on its own: no Swift shared library is loaded, so a machine without the toolchain runs it; nor
    /// the whole C++ runtime, of which the Swift runtime uses a little (scripts/build-release.sh).
    func testItNeedsNoSwiftSharedLibrary() throws {
        let cli = try shippedCLI()
        let libraries = try runTool("/usr/bin/ldd", [cli.path])
        XCTAssertEqual(libraries.status, 0, libraries.stderr)
        XCTAssertFalse(libraries.stdout.contains("libswift"), libraries.stdout)
        XCTAssertFalse(libraries.stdout.contains("libFoundation"), libraries.stdout)
        XCTAssertFalse(libraries.stdout.contains("libstdc++"), libraries.stdout)
        XCTAssertTrue(libraries.stdout.contains("libgstreamer-1.0"), libraries.stdout)
    }

    /// Statically linked, Swift finds the program's arguments by walking back from `environ` to the stack;
    /// a shim that set an environment variable when the program loaded moved `environ` first, and this build
    /// saw no arguments: `gcapture record ...` printed the top-level help and exited 0 with no movie.
    func testItRecordsAMovieAndTakesAPhotoAsTold() throws {
        let cli = try shippedCLI()
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("clip.mp4"), photo = folder.appendingPathComponent("shot.jpg")

        let recording = try runTool(cli.path, ["record", "--camera", "test", "--microphone", "test-microphone", "--preset", "vga640x480",
                                               "--duration", "1", "--output", movie.path])
        XCTAssertEqual(recording.status, 0, recording.stderr)
        XCTAssertFalse(recording.stdout.contains("USAGE: gcapture <subcommand>"), "the arguments were not seen")
        let probed = try probe(movie)
        XCTAssertEqual(probed.duration, 1, accuracy: 0.1)
        XCTAssertEqual(probed.videoSize?.width, 640)
        XCTAssertEqual(probed.stream("audio")?["codec_name"] as? String, "aac")

        let shot = try runTool(cli.path, ["photo", "--camera", "test", "--preset", "vga640x480", "--output", photo.path])
        XCTAssertEqual(shot.status, 0, shot.stderr)
        XCTAssertEqual(try exif(photo)["ImageWidth"] as? Int, 640)
    }
}
