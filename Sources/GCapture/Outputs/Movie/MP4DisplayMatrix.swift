import Foundation
import GStreamerKit

/// The display matrix of an MP4's video track (ISO/IEC 14496-12, `moov/trak/tkhd`): how a movie tells
/// players to turn its picture without re-encoding it. GStreamer 1.22's mp4mux ignores image-orientation
/// tags, so the recording edits the matrix in the `moov` box as that box passes to the file: the crash-safe
/// header at the start of a fragmented movie carries it from the first byte.
enum MP4DisplayMatrix {
    /// Sets the video track's matrix to a clockwise turn of `rotation` degrees (0, 90, 180, 270) in a
    /// buffer that holds a whole `moov` box. Returns whether a video track was found.
    @discardableResult
    static func setRotation(_ rotation: Int, inMovieBox bytes: UnsafeMutableRawBufferPointer) -> Bool {
        guard let header = videoTrackHeader(in: UnsafeRawBufferPointer(bytes)) else { return false }
        let width = Int32(bitPattern: readUInt32(bytes, header.size)) >> 16
        let height = Int32(bitPattern: readUInt32(bytes, header.size + 4)) >> 16
        for (index, value) in matrix(rotation: rotation, width: width, height: height).enumerated() {
            writeUInt32(bytes, header.matrix + 4 * index, UInt32(bitPattern: value))
        }
        return true
    }

    /// The clockwise turn the video track's matrix asks for, when it is a plain turn.
    static func rotation(inMovieBox bytes: UnsafeRawBufferPointer) -> Int? {
        guard let header = videoTrackHeader(in: bytes) else { return nil }
        let values = (0..<9).map { Int32(bitPattern: readUInt32(bytes, header.matrix + 4 * $0)) }
        return [0, 90, 180, 270].first { rotation in
            let expected = matrix(rotation: rotation, width: 0, height: 0)
            return [0, 1, 3, 4].allSatisfy { values[$0] == expected[$0] }
        }
    }

    /// The clockwise turn asked for by the first `moov` box of the movie at `url`.
    static func rotation(ofMovieAt url: URL) -> Int? {
        guard let file = try? FileHandle(forReadingFrom: url) else { return nil }
        defer { try? file.close() }
        var offset: UInt64 = 0
        while true {
            guard (try? file.seek(toOffset: offset)) != nil, let head = try? file.read(upToCount: 16),
                  let header = head.withUnsafeBytes({ boxHeader(in: $0, at: 0) }),
                  let size = header.size, size >= header.length else { return nil }
            if header.type == "moov" {
                guard size < 64 << 20, (try? file.seek(toOffset: offset)) != nil,
                      let box = try? file.read(upToCount: size) else { return nil }
                return box.withUnsafeBytes { rotation(inMovieBox: $0) }
            }
            offset += UInt64(size)
        }
    }

    /// Keeps the video track's matrix of every `moov` box that passes `pad` (a file sink's input) at a
    /// clockwise turn of `rotation` degrees. Other buffers pass untouched and uncopied.
    static func apply(rotation: Int, toMoviesPassing pad: Pad) {
        guard rotation != 0 else { return }
        pad.addProbe(.buffer) { info in
            let head = info.bufferPrefix(8)
            if head.count == 8, head[4...].elementsEqual(movieBoxType) {
                info.withWritableBuffer { buffer in
                    _ = buffer.withMappedBytes { setRotation(rotation, inMovieBox: $0) }
                }
            }
            return .ok
        }
    }

    // MARK: Boxes

    private static let movieBoxType = Array("moov".utf8)

    /// The matrix itself is FrameTransform's, with the rest of the orientation table.
    private static func matrix(rotation: Int, width: Int32, height: Int32) -> [Int32] {
        FrameTransform.displayMatrix(rotation: rotation, width: width, height: height)
    }

    /// Where the video track's matrix and its size are, as offsets into `bytes` (a whole `moov` box).
    private static func videoTrackHeader(in bytes: UnsafeRawBufferPointer) -> (matrix: Int, size: Int)? {
        guard let movie = children(of: 0..<bytes.count, in: bytes).first(where: { $0.type == "moov" }) else { return nil }
        for track in children(of: movie.content, in: bytes) where track.type == "trak" {
            let parts = children(of: track.content, in: bytes)
            guard let header = parts.first(where: { $0.type == "tkhd" }),
                  let media = parts.first(where: { $0.type == "mdia" }),
                  let handler = children(of: media.content, in: bytes).first(where: { $0.type == "hdlr" }),
                  handler.content.count >= 12, type(at: handler.content.lowerBound + 8, in: bytes) == "vide" else { continue }
            // tkhd: version and flags, then times, ids and duration (20 bytes, 32 in version 1), then 16
            // bytes of layer, group, volume and padding before the matrix; width and height follow it.
            let version = bytes[header.content.lowerBound]
            let matrix = header.content.lowerBound + 4 + (version == 1 ? 32 : 20) + 16
            guard matrix + 36 + 8 <= header.content.upperBound else { return nil }
            return (matrix, matrix + 36)
        }
        return nil
    }

    private struct Box {
        let type: String
        let content: Range<Int>
    }

    private static func children(of range: Range<Int>, in bytes: UnsafeRawBufferPointer) -> [Box] {
        var boxes: [Box] = []
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound, let header = boxHeader(in: bytes, at: offset) {
            let size = header.size ?? range.upperBound - offset
            guard size >= header.length, offset + size <= range.upperBound else { break }
            boxes.append(Box(type: header.type, content: offset + header.length..<offset + size))
            offset += size
        }
        return boxes
    }

    /// The box starting at `offset`: its type, its size (nil: it runs to the end of its parent or file) and
    /// the length of its header (16 with a 64-bit size). Nil when `bytes` ends inside the header.
    private static func boxHeader(in bytes: UnsafeRawBufferPointer, at offset: Int) -> (type: String, size: Int?, length: Int)? {
        guard offset + 8 <= bytes.count else { return nil }
        let type = type(at: offset + 4, in: bytes)
        switch readUInt32(bytes, offset) {
        case 0: return (type, nil, 8)
        case 1:
            guard offset + 16 <= bytes.count else { return nil }
            let size = UInt64(readUInt32(bytes, offset + 8)) << 32 | UInt64(readUInt32(bytes, offset + 12))
            return (type, Int(clamping: size), 16)
        case let size: return (type, Int(size), 8)
        }
    }

    private static func type(at offset: Int, in bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
    }

    private static func readUInt32(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    private static func readUInt32(_ bytes: UnsafeMutableRawBufferPointer, _ offset: Int) -> UInt32 {
        readUInt32(UnsafeRawBufferPointer(bytes), offset)
    }

    private static func writeUInt32(_ bytes: UnsafeMutableRawBufferPointer, _ offset: Int, _ value: UInt32) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
    }
}
