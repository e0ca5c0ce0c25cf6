import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// One orientation for every output: for each of the eight rotation × mirror settings of a connection, the
/// preview on an X server, the frames to code, a photo's pixels, a photo turned by its EXIF tag as a viewer
/// shows it, an MP4 as a player shows it and a Matroska file all show the same picture: the camera's picture
/// turned clockwise by the angle, then mirrored left-right. The expected picture is computed here from the
/// unturned frame; what each output shows is read by tools nobody here wrote (Pillow's exif_transpose,
/// ffmpeg with its autorotation, an X screenshot), and every picture is compared with all eight turns of
/// the camera's, so the test says which one an output showed when it shows the wrong one.
final class OrientationMatrixTests: XCTestCase {
    /// The eight settings, as (clockwise degrees, mirrored).
    static let settings: [Turn] = [0, 90, 180, 270].flatMap { angle in [false, true].map { Turn(angle: angle, mirrored: $0) } }

    struct Turn: Hashable, CustomStringConvertible {
        let angle: Int
        let mirrored: Bool
        var description: String { "\(angle)°\(mirrored ? " mirrored" : "")" }
    }

    /// Still SMPTE bars at 160x120: white to blue left to right, other bars below, so no turn or mirror maps
    /// the picture onto itself (checked below); 4:3, so a quarter turn also changes the shape.
    private let camera = CaptureDevice.makeTestCamera(
        uniqueID: "orientation-matrix", options: .init(pattern: .smpte, motion: 0, sizes: [.init(width: 160, height: 120)], maxFrameRate: 30))

    /// Mean colour difference (0-255, the worst cell and channel) allowed between an output's picture and the
    /// expected one: the JPEG, H.264, YUV and X round trips differed by up to 16 here; a wrong setting by
    /// over 250.
    static let tolerance = 30.0

    func testFramesPhotosAndMoviesShowTheSamePictureForEveryTurn() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python),
              try runTool(Self.python, ["-c", "import PIL.ImageOps"]).status == 0 else {
            throw TestEnvironment.missing("Pillow is not installed for \(Self.python) (apt install python3-pil, or bash scripts/install-deps.sh)")
        }
        let folder = try temporaryFolder()
        let frames = CaptureVideoDataOutput()
        frames.videoSettings = .init(pixelFormat: "RGB")
        let photos = CapturePhotoOutput(), movie = CaptureMovieFileOutput()
        let outputs: [CaptureOutput] = [frames, photos, movie]
        for output in outputs { output.connection.automaticallyAdjustsVideoMirroring = false }
        let session = try await startSession(camera: camera, preset: .inputPriority, outputs: outputs)
        let sensor = try await nextFrame(of: frames, width: 160, height: 120)
        let candidates = Self.candidates(from: sensor)

        var failures: [String] = []
        for turn in Self.settings {
            for output in outputs {
                output.connection.videoRotationAngle = Double(turn.angle)
                output.connection.isVideoMirrored = turn.mirrored
            }
            let expected = candidates[turn]!
            var shown: [(String, Picture)] = []
            shown.append(("frames", try await nextFrame(of: frames, width: expected.width, height: expected.height)))

            let name = "\(turn.angle)\(turn.mirrored ? "m" : "")"
            let pixels = folder.appendingPathComponent("photo-\(name).jpg"), tagged = folder.appendingPathComponent("tagged-\(name).jpg")
            _ = try await photos.capturePhoto(with: CapturePhotoSettings(fileURL: pixels), within: engineDeadline)
            _ = try await photos.capturePhoto(with: CapturePhotoSettings(orientationHandling: .exifOrientationOnly, fileURL: tagged), within: engineDeadline)
            XCTAssertEqual(try exif(pixels)["Orientation"] as? Int ?? 1, 1, "a photo with turned pixels asks no viewer to turn it")
            shown.append(("photo pixels", try viewed(pixels)))
            shown.append(("photo EXIF \(try exif(tagged)["Orientation"] as? Int ?? 1)", try viewed(tagged)))

            for fileType in [CaptureMovieFileOutput.FileType.mp4, .matroska] {
                movie.fileType = fileType
                let url = folder.appendingPathComponent("movie-\(name).\(fileType == .mp4 ? "mp4" : "mkv")")
                try await record(movie, to: url)
                shown.append((fileType == .mp4 ? "MP4 (display matrix \(try probe(url, countFrames: false).clockwiseRotation)°)" : "Matroska",
                               try played(url)))
            }
            for (output, picture) in shown {
                if let failure = Self.check(picture, shows: turn, candidates: candidates) { failures.append("\(output): \(failure)") }
            }
        }
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(failures, [], failures.joined(separator: "\n"))
    }

    func testThePreviewShowsTheSamePictureForEveryTurn() async throws {
        let display = try VirtualDisplay()
        defer { display.stop() }
        let folder = try temporaryFolder()
        var failures: [String] = []
        var candidates: [Turn: Picture] = [:]
        for turn in Self.settings {
            // A session each: ximagesink sizes its window at the first frame.
            let preview = CapturePreviewOutput(environment: ["DISPLAY": display.name])
            preview.connection.automaticallyAdjustsVideoMirroring = false
            preview.connection.videoRotationAngle = Double(turn.angle)
            preview.connection.isVideoMirrored = turn.mirrored
            let frames = CaptureVideoDataOutput()
            frames.videoSettings = .init(pixelFormat: "RGB")
            let session = try await startSession(camera: camera, preset: .inputPriority, outputs: [preview, frames])
            if candidates.isEmpty { candidates = Self.candidates(from: try await nextFrame(of: frames, width: 160, height: 120)) }
            let deadline = Date().addingTimeInterval(10)
            while preview.shownFrameCount < 10, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            XCTAssertGreaterThanOrEqual(preview.shownFrameCount, 10, "the preview showed too few frames")
            // The window is mapped and drawn by the time a few frames have passed the sink; one more frame time.
            try await Task.sleep(for: .milliseconds(200))
            XCTAssertEqual(preview.sinkInUse, "ximagesink")
            let expected = candidates[turn]!
            let shot = folder.appendingPathComponent("preview-\(turn.angle)\(turn.mirrored ? "m" : "").ppm")
            try screenshot(display, width: expected.width, height: expected.height, to: shot)
            try await within(engineDeadline, "session.stop()") { await session.stop() }
            if let failure = Self.check(try Picture(ppm: shot), shows: turn, candidates: candidates) {
                failures.append("preview: \(failure)")
            }
        }
        XCTAssertEqual(failures, [], failures.joined(separator: "\n"))
    }

    /// Frames to code pay for a flip only once they are turned: an unturned output's branch has none, the
    /// first turn while frames flow puts one in and the frames come turned from then on, and a turn back
    /// keeps it, passing frames through.
    func testFramesToCodeGetAFlipOnlyOnceTheyAreTurned() async throws {
        let frames = CaptureVideoDataOutput()
        frames.connection.automaticallyAdjustsVideoMirroring = false
        let session = try await startSession(camera: camera, preset: .inputPriority, outputs: [frames])
        let graph = { session.launchDescription ?? "" }
        let unturned = try await nextFrameSize(of: frames, in: [(160, 120)])
        XCTAssertEqual(unturned, Size(160, 120))
        XCTAssertFalse(graph().contains("videoflip"), "an unturned output has no flip: \(graph())")

        frames.connection.videoRotationAngle = 90
        let turned = try await nextFrameSize(of: frames, in: [(120, 160)])
        XCTAssertEqual(turned, Size(120, 160), "the first turn turns the frames")
        XCTAssertTrue(graph().contains("videoflip"), "the turn put a flip in: \(graph())")

        frames.connection.videoRotationAngle = 0
        let turnedBack = try await nextFrameSize(of: frames, in: [(160, 120)])
        XCTAssertEqual(turnedBack, Size(160, 120), "turned back")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    private struct Size: Equatable {
        let width, height: Int
        init(_ width: Int, _ height: Int) { (self.width, self.height) = (width, height) }
    }

    /// The size of the first frame of one of `sizes`, or of the 15th frame when none came in that size.
    private func nextFrameSize(of output: CaptureVideoDataOutput, in sizes: [(Int, Int)]) async throws -> Size {
        let stream = output.sampleBuffers()
        return try await within(5, "a frame") {
            var seen = 0
            for await buffer in stream {
                seen += 1
                if sizes.contains(where: { $0 == (buffer.width, buffer.height) }) || seen >= 15 {
                    return Size(buffer.width, buffer.height)
                }
            }
            throw CheckFailed(description: "the frames ended")
        }
    }

    /// The table's own promise, independent of any pipeline: each setting is one distinct transform, whose
    /// rotation and mirroring read back, and whose MP4 split (pixels flipped, then turned by the player)
    /// composes to the same transform as the whole turn.
    func testTheTableSplitsEveryTurnForAPlayerIntoTheSamePicture() {
        let picture = Picture(width: 4, height: 3, rgb: (0..<36).map { UInt8($0) })
        var seen = Set<FrameTransform>()
        for turn in Self.settings {
            let transform = FrameTransform(rotation: turn.angle, mirrored: turn.mirrored)
            seen.insert(transform)
            XCTAssertEqual(transform.rotation, turn.angle)
            XCTAssertEqual(transform.isMirrored, turn.mirrored)
            let split = transform.displayMatrixSplit
            XCTAssertEqual(split.pixels.rotation % 180, 0, "\(turn): the pixels must keep their shape; the player turns them")
            let flipped = picture.turned(split.pixels.rotation, mirrored: split.pixels.isMirrored)
            XCTAssertEqual(flipped.turned(split.displayRotation, mirrored: false), picture.turned(turn.angle, mirrored: turn.mirrored),
                           "\(turn): MP4 pixels \(split.pixels) turned \(split.displayRotation)° by the player")
        }
        XCTAssertEqual(seen.count, 8)
    }

    // MARK: What the outputs show

    private static let python = "/usr/bin/python3"

    /// A frame delivered a few frames after now (one already past the flip when the connection changed may
    /// still come), as RGB: the first of the size asked for, else the 15th whatever its size.
    private func nextFrame(of output: CaptureVideoDataOutput, width: Int, height: Int) async throws -> Picture {
        let stream = output.sampleBuffers()
        let buffer = try await within(5, "a frame") {
            var seen = 0
            for await buffer in stream {
                seen += 1
                if seen >= 4, buffer.width == width, buffer.height == height { return buffer }
                if seen >= 15 { return buffer }
            }
            throw CheckFailed(description: "the frames ended")
        }
        XCTAssertEqual(buffer.pixelFormat, "RGB")
        let rgb = buffer.withPlanes { planes in
            (0..<buffer.height).flatMap { row in
                Array(planes[0].bytes[row * planes[0].stride..<row * planes[0].stride + buffer.width * 3])
            }
        }
        return Picture(width: buffer.width, height: buffer.height, rgb: try XCTUnwrap(rgb))
    }

    /// A photo as a viewer shows it: Pillow's exif_transpose applies the EXIF orientation.
    private func viewed(_ jpeg: URL) throws -> Picture {
        let ppm = jpeg.deletingPathExtension().appendingPathExtension("ppm")
        let script = "import sys\nfrom PIL import Image, ImageOps\nImageOps.exif_transpose(Image.open(sys.argv[1])).convert('RGB').save(sys.argv[2])"
        let result = try runTool(Self.python, ["-c", script, jpeg.path, ppm.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try Picture(ppm: ppm)
    }

    /// A movie's first frame as a player shows it: ffmpeg applies the display matrix (autorotation is its
    /// default; ffmpeg 5.1 also applies a matrix's flips, though the engine writes only turns).
    private func played(_ movie: URL) throws -> Picture {
        let ppm = movie.appendingPathExtension("ppm")
        let result = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-i", movie.path, "-frames:v", "1", ppm.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try Picture(ppm: ppm)
    }

    private func record(_ movie: CaptureMovieFileOutput, to url: URL) async throws {
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .milliseconds(400))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter, "the recording to \(url.lastPathComponent)")
    }

    // MARK: Comparing pictures

    /// The camera's picture under each of the eight settings.
    private static func candidates(from sensor: Picture) -> [Turn: Picture] {
        Dictionary(uniqueKeysWithValues: settings.map { ($0, sensor.turned($0.angle, mirrored: $0.mirrored)) })
    }

    /// Nil when `picture` is the camera's picture under `turn`, else what it is instead. Also fails the test
    /// when the pattern does not tell `turn` from every other setting of the same shape.
    private static func check(_ picture: Picture, shows turn: Turn, candidates: [Turn: Picture]) -> String? {
        let expected = candidates[turn]!
        for (other, candidate) in candidates where other != turn && candidate.width == expected.width {
            XCTAssertGreaterThan(expected.distance(to: candidate) ?? .infinity, 3 * tolerance,
                                 "the pattern does not tell \(turn) from \(other)")
        }
        guard picture.width == expected.width, picture.height == expected.height else {
            return "\(picture.width)x\(picture.height), expected \(expected.width)x\(expected.height) for \(turn)"
        }
        let distances = candidates.compactMapValues { picture.distance(to: $0) }
        let distance = distances[turn]!
        print("orientation \(turn): differs by \(String(format: "%.1f", distance)), the nearest other setting by \(Int(distances.filter { $0.key != turn }.values.min() ?? .infinity))")
        if distance <= tolerance { return nil }
        let best = distances.min { $0.value < $1.value }!
        return "for \(turn) it shows \(best.key) (differs by \(Int(best.value))), not \(turn) (differs by \(Int(distance)))"
    }
}

/// An RGB picture, 8 bits a channel, rows top to bottom without padding.
struct Picture: Equatable {
    let width: Int, height: Int
    let rgb: [UInt8]
    /// Mean colours of an 8x8 grid of cells, row by row: coarse enough that coding, chroma subsampling and
    /// the bars' snow average out, fine enough that every bar counts.
    let cellMeans: [Double]

    init(width: Int, height: Int, rgb: [UInt8]) {
        precondition(rgb.count == width * height * 3)
        self.width = width; self.height = height; self.rgb = rgb
        let cells = 8
        var means = [Double](repeating: 0, count: cells * cells * 3)
        rgb.withUnsafeBufferPointer { pixels in
            for row in 0..<cells {
                for column in 0..<cells {
                    var sums = (0, 0, 0), count = 0
                    for y in row * height / cells..<(row + 1) * height / cells {
                        for x in column * width / cells..<(column + 1) * width / cells {
                            let offset = (y * width + x) * 3
                            sums.0 += Int(pixels[offset]); sums.1 += Int(pixels[offset + 1]); sums.2 += Int(pixels[offset + 2])
                            count += 1
                        }
                    }
                    let cell = (row * cells + column) * 3
                    means[cell] = Double(sums.0) / Double(count)
                    means[cell + 1] = Double(sums.1) / Double(count)
                    means[cell + 2] = Double(sums.2) / Double(count)
                }
            }
        }
        cellMeans = means
    }

    /// The same pixels (the cell means follow from them; a picture smaller than the grid has empty cells).
    static func == (a: Picture, b: Picture) -> Bool { a.width == b.width && a.height == b.height && a.rgb == b.rgb }

    /// A binary PPM (P6, maxval 255), as ffmpeg and Pillow write them.
    init(ppm url: URL) throws {
        let data = [UInt8](try Data(contentsOf: url))
        var fields: [String] = [], index = 0
        while fields.count < 4, index < data.count {
            while index < data.count, data[index] == 0x20 || data[index] == 0x0A || data[index] == 0x0D || data[index] == 0x09 { index += 1 }
            var field = ""
            while index < data.count, ![0x20, 0x0A, 0x0D, 0x09].contains(data[index]) { field.append(Character(UnicodeScalar(data[index]))); index += 1 }
            fields.append(field)
        }
        index += 1
        guard fields.count == 4, fields[0] == "P6", let width = Int(fields[1]), let height = Int(fields[2]), fields[3] == "255",
              data.count - index >= width * height * 3 else {
            throw CheckFailed(description: "\(url.lastPathComponent) is not an 8-bit binary PPM: \(fields)")
        }
        self.init(width: width, height: height, rgb: Array(data[index..<index + width * height * 3]))
    }

    func pixel(_ x: Int, _ y: Int) -> ArraySlice<UInt8> { rgb[(y * width + x) * 3..<(y * width + x) * 3 + 3] }

    /// Turned `angle` degrees clockwise, then mirrored left-right: the connection's meaning, written out
    /// pixel by pixel (a quarter turn clockwise puts the bottom-left pixel at the top left).
    func turned(_ angle: Int, mirrored: Bool) -> Picture {
        var picture = self
        for _ in 0..<(angle / 90) {
            let source = picture
            picture = Picture(width: source.height, height: source.width, rgb: (0..<source.width).flatMap { y in
                (0..<source.height).flatMap { x in source.pixel(y, source.height - 1 - x) }
            })
        }
        guard mirrored else { return picture }
        let source = picture
        return Picture(width: source.width, height: source.height, rgb: (0..<source.height).flatMap { y in
            (0..<source.width).flatMap { x in source.pixel(source.width - 1 - x, y) }
        })
    }

    /// The worst difference of a cell's mean colour channel between two pictures of the same size; nil for
    /// pictures of another shape.
    func distance(to other: Picture) -> Double? {
        guard width == other.width, height == other.height else { return nil }
        return zip(cellMeans, other.cellMeans).map { abs($0 - $1) }.max() ?? 0
    }
}
