import Foundation

/// What a JPEG's header says about the picture, read without decoding it: the frame's size (SOFn), and from
/// its EXIF the orientation and the moment it was taken. A photo library rebuilt from 100,000 photos reads
/// only their headers: a few small reads per file, the scan data never.
public struct JPEGHeader: Equatable, Sendable {
    public var pixelWidth: Int
    public var pixelHeight: Int
    /// EXIF orientation, 1 (upright) to 8; 1 when the photo has none.
    public var orientation: Int = 1
    /// EXIF DateTimeOriginal (else DateTime), read in the time zone the EXIF names, else the local one.
    public var dateTaken: Date?
    /// Whether `dateTaken` has a fraction of a second (SubSecTimeOriginal); EXIF dates are whole seconds.
    public var dateTakenHasSubseconds = false

    /// The picture as shown: orientations 5 to 8 turn it a quarter, swapping its sides.
    public var displayedSize: (width: Int, height: Int) {
        orientation >= 5 && orientation <= 8 ? (pixelHeight, pixelWidth) : (pixelWidth, pixelHeight)
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case notAJPEG
        case truncated

        public var description: String {
            switch self {
            case .notAJPEG: "its bytes are not a JPEG's"
            case .truncated: "it ends before its picture begins"
            }
        }
    }

    /// Reads the header of the JPEG file at `path`. Blocks for a few small reads.
    public static func read(path: String) throws -> JPEGHeader {
        guard let file = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoPermission) }
        defer { try? file.close() }
        return try read { offset, count in
            try file.seek(toOffset: UInt64(offset))
            return try file.read(upToCount: count) ?? Data()
        }
    }

    /// Reads a JPEG held in memory.
    public static func read(data: Data) throws -> JPEGHeader {
        try read { offset, count in
            guard offset < data.count else { return Data() }
            let start = data.startIndex + offset
            return data[start..<min(start + count, data.endIndex)]
        }
    }

    /// Walks the segments up to the first frame header, asking `bytes` only for each segment's marker and,
    /// for EXIF and the frame header, its body.
    private static func read(_ bytes: (_ offset: Int, _ count: Int) throws -> Data) throws -> JPEGHeader {
        let start = [UInt8](try bytes(0, 2))
        guard start == [0xFF, 0xD8] else { throw Failure.notAJPEG }
        var offset = 2
        var exif: (orientation: Int, date: Date?, hasSubseconds: Bool)?
        while true {
            let marker = [UInt8](try bytes(offset, 4))
            guard marker.count == 4 else { throw Failure.truncated }
            guard marker[0] == 0xFF else { throw Failure.notAJPEG }
            let kind = marker[1]
            if kind == 0xFF { offset += 1; continue } // fill byte
            if kind == 0xD8 || (0xD0...0xD7).contains(kind) || kind == 0x01 { offset += 2; continue }
            if kind == 0xD9 || kind == 0xDA { throw Failure.truncated } // image end or scan before any frame header
            let length = Int(marker[2]) << 8 | Int(marker[3])
            guard length >= 2 else { throw Failure.notAJPEG }
            let isFrameHeader = (0xC0...0xCF).contains(kind) && kind != 0xC4 && kind != 0xC8 && kind != 0xCC
            if isFrameHeader {
                let body = [UInt8](try bytes(offset + 4, 5))
                guard body.count == 5 else { throw Failure.truncated }
                let height = Int(body[1]) << 8 | Int(body[2]), width = Int(body[3]) << 8 | Int(body[4])
                guard width > 0, height > 0 else { throw Failure.notAJPEG }
                return JPEGHeader(pixelWidth: width, pixelHeight: height, orientation: exif?.orientation ?? 1,
                                  dateTaken: exif?.date, dateTakenHasSubseconds: exif?.hasSubseconds ?? false)
            }
            if kind == 0xE1, exif == nil {
                let body = try bytes(offset + 4, length - 2)
                if body.starts(with: Array("Exif\0\0".utf8)) { exif = ExifReader(tiff: [UInt8](body.dropFirst(6))).read() }
            }
            offset += 2 + length
        }
    }
}

/// The two EXIF facts the library needs, from a TIFF structure: IFD0's Orientation and DateTime, and the
/// EXIF IFD's DateTimeOriginal, SubSecTimeOriginal and OffsetTimeOriginal. Anything malformed reads as
/// absent, never as a crash.
struct ExifReader {
    let tiff: [UInt8]

    func read() -> (orientation: Int, date: Date?, hasSubseconds: Bool)? {
        guard tiff.count >= 8 else { return nil }
        let little: Bool
        switch (tiff[0], tiff[1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= tiff.count else { return nil }
            return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
        }
        func u32(_ at: Int) -> Int? {
            guard let a = u16(at), let b = u16(at + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }
        /// Each entry of the IFD at `at`: its tag, type, count and the offset of its value (inline or not).
        func entries(at: Int) -> [(tag: Int, type: Int, count: Int, value: Int)] {
            guard let count = u16(at), count < 1000 else { return [] }
            return (0..<count).compactMap { index in
                let entry = at + 2 + index * 12
                guard let tag = u16(entry), let type = u16(entry + 2), let n = u32(entry + 4) else { return nil }
                let size = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1][type, default: 1] * n
                let value = size <= 4 ? entry + 8 : (u32(entry + 8) ?? -1)
                return (tag, type, n, value)
            }
        }
        func text(_ entry: (tag: Int, type: Int, count: Int, value: Int)) -> String? {
            guard entry.type == 2, entry.value >= 0, entry.value + entry.count <= tiff.count else { return nil }
            let bytes = tiff[entry.value..<entry.value + entry.count].prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let ifd0Offset = u32(4) else { return nil }
        var orientation = 1, dateTime: String?, original: String?, offsetText: String?, subseconds: String?
        for entry in entries(at: ifd0Offset) {
            switch entry.tag {
            case 0x0112 where entry.type == 3:
                if let value = u16(entry.value), (1...8).contains(value) { orientation = value }
            case 0x0132: dateTime = text(entry)
            case 0x8769:
                guard let exifOffset = u32(entry.value) else { continue }
                for inner in entries(at: exifOffset) {
                    if inner.tag == 0x9003 { original = text(inner) }
                    if inner.tag == 0x9011 { offsetText = text(inner) }
                    if inner.tag == 0x9291 { subseconds = text(inner) }
                }
            default: continue
            }
        }
        var date = Self.date(original ?? dateTime, offset: offsetText)
        let digits = subseconds?.trimmingCharacters(in: .whitespaces) ?? ""
        let fraction = original != nil && !digits.isEmpty && digits.allSatisfy(\.isNumber) ? Double("0." + digits) : nil
        if let fraction, let whole = date { date = whole.addingTimeInterval(fraction) }
        return (orientation, date, fraction != nil)
    }

    /// "2026:11:28 09:15:02" in the zone "+01:00" names, or the local zone when none is given.
    static func date(_ text: String?, offset: String?) -> Date? {
        guard let text else { return nil }
        let parts = text.split(whereSeparator: { $0 == ":" || $0 == " " }).compactMap { Int($0) }
        guard parts.count == 6, parts[0] > 0 else { return nil }
        var zone = TimeZone.current
        if let offset, offset.count == 6, let sign = offset.first, sign == "+" || sign == "-" {
            let fields = offset.dropFirst().split(separator: ":").compactMap { Int($0) }
            if fields.count == 2, let named = TimeZone(secondsFromGMT: (sign == "-" ? -1 : 1) * (fields[0] * 3600 + fields[1] * 60)) {
                zone = named
            }
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2],
                                                  hour: parts[3], minute: parts[4], second: parts[5]))
    }
}
