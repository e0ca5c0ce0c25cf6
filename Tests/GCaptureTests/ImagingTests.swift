import Foundation
import GCapture
import XCTest

/// The engine's pictures for the web gallery: JPEGEncoder and MovieThumbnailGenerator, checked by ffprobe.
final class ImagingTests: XCTestCase {
    func testAGreyscalePictureAndItsThumbnailAreJPEGsOfTheirSizes() throws {
        let folder = try temporaryFolder()
        let width = 640, height = 480
        let pixels = (0..<(width * height)).map { UInt8(truncatingIfNeeded: $0 % width) }
        let picture = try JPEGEncoder.encode(grayscale: pixels, width: width, height: height)
        XCTAssertEqual(Array(picture.prefix(2)), [0xFF, 0xD8])
        let pictureFile = folder.appendingPathComponent("grey.jpg")
        try picture.write(to: pictureFile)
        let pictureSize = try XCTUnwrap(try probe(pictureFile, countFrames: false).videoSize)
        XCTAssertEqual([pictureSize.width, pictureSize.height], [width, height])

        let small = try JPEGEncoder.thumbnail(ofJPEG: picture, maximumDimension: 240)
        let smallFile = folder.appendingPathComponent("small.jpg")
        try small.write(to: smallFile)
        let smallSize = try XCTUnwrap(try probe(smallFile, countFrames: false).videoSize)
        XCTAssertEqual(max(smallSize.width, smallSize.height), 240)

        XCTAssertThrowsError(try JPEGEncoder.thumbnail(ofJPEG: Data("not a picture".utf8), maximumDimension: 240))
        XCTAssertThrowsError(try JPEGEncoder.encode(grayscale: [0, 1, 2], width: 640, height: 480))
    }

    func testAMoviesFirstFrameIsAJPEGOfTheAskedWidth() throws {
        let folder = try temporaryFolder()
        let movie = folder.appendingPathComponent("movie.mkv")
        let made = try runTool("/usr/bin/gst-launch-1.0", ["-q", "videotestsrc", "num-buffers=15", "!", "video/x-raw,width=640,height=360",
                                                           "!", "jpegenc", "!", "matroskamux", "!", "filesink", "location=\(movie.path)"])
        XCTAssertEqual(made.status, 0, made.stderr)

        var generator = MovieThumbnailGenerator(url: movie)
        generator.width = 160
        let frame = try generator.firstFrameJPEG()
        let frameFile = folder.appendingPathComponent("frame.jpg")
        try frame.write(to: frameFile)
        let size = try XCTUnwrap(try probe(frameFile, countFrames: false).videoSize)
        XCTAssertEqual([size.width, size.height], [160, 90])

        XCTAssertThrowsError(try MovieThumbnailGenerator(url: folder.appendingPathComponent("none.mp4")).firstFrameJPEG())
    }
}
