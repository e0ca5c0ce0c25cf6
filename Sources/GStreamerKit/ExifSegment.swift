import Foundation

/// A JPEG's EXIF APP1 payload written here rather than by GStreamer's gst_tag_list_to_exif_buffer: that one
/// leaves out what EXIF 2.3 requires of a JPEG (XResolution, YResolution, ResolutionUnit, YCbCrPositioning,
/// ComponentsConfiguration, ColorSpace, PixelXDimension and PixelYDimension) and puts values at odd offsets,
/// so `exiftool -validate` found ten warnings in every photo.
struct ExifSegment {
    /// One IFD entry: the tag, its TIFF type and count, and its value's bytes (little-endian).
    private struct Entry {
        var tag: UInt16
        var type: UInt16
        var count: UInt32
        var bytes: [UInt8]
    }

    private static let byte: UInt16 = 1, ascii: UInt16 = 2, short: UInt16 = 3, long: UInt16 = 4, rational: UInt16 = 5,
                        undefined: UInt16 = 7

    private var ifd0: [Entry] = []
    private var exif: [Entry] = []

    /// The tags of `values` that EXIF has a place for, and the picture's size as encoded.
    init(_ values: [(String, TagList.Value)], pixelWidth: Int, pixelHeight: Int) {
        // 72 dpi, as cameras write when they know no better; YCbCr samples centred (JFIF's siting).
        ifd0 = [Self.rational(0x011A, 72, 1), Self.rational(0x011B, 72, 1), Self.short(0x0128, 2), Self.short(0x0213, 1)]
        exif = [Entry(tag: 0x9000, type: Self.undefined, count: 4, bytes: Array("0230".utf8)),
                Entry(tag: 0x9101, type: Self.undefined, count: 4, bytes: [1, 2, 3, 0]),
                Entry(tag: 0xA000, type: Self.undefined, count: 4, bytes: Array("0100".utf8)),
                Self.short(0xA001, 1), // sRGB
                Self.long(0xA002, UInt32(clamping: pixelWidth)), Self.long(0xA003, UInt32(clamping: pixelHeight))]
        for (name, value) in values {
            switch (name, value) {
            case ("description", .string(let text)): ifd0.append(Self.text(0x010E, text))
            case ("device-manufacturer", .string(let text)): ifd0.append(Self.text(0x010F, text))
            case ("device-model", .string(let text)): ifd0.append(Self.text(0x0110, text))
            case ("application-name", .string(let text)): ifd0.append(Self.text(0x0131, text))
            case ("image-orientation", .string(let text)):
                if let orientation = Self.orientations[text] { ifd0.append(Self.short(0x0112, orientation)) }
            case ("datetime", .dateTime(let date)):
                let text = TagList.exifDate(date)
                ifd0.append(Self.text(0x0132, text))
                exif.append(Self.text(0x9003, text))
                // The milliseconds (SubSecTimeOriginal, SubSecTime): photos of one burst second keep their order in
                // a viewer or a library that sorts by the moment taken.
                let subseconds = TagList.exifSubseconds(date)
                exif.append(Self.text(0x9291, subseconds))
                exif.append(Self.text(0x9290, subseconds))
            default: break
            }
        }
    }

    /// GStreamer's image-orientation names as EXIF Orientation values.
    private static let orientations: [String: UInt16] = [
        "rotate-0": 1, "flip-rotate-0": 2, "rotate-180": 3, "flip-rotate-180": 4,
        "flip-rotate-270": 5, "rotate-90": 6, "flip-rotate-90": 7, "rotate-270": 8,
    ]

    /// "Exif\0\0", then a little-endian TIFF block: IFD0 at offset 8, the Exif IFD after it, each IFD's
    /// values after its entries, every offset even.
    var data: Data {
        let pointerTag: UInt16 = 0x8769
        let ifd0Size = Self.size(of: ifd0 + [Self.long(pointerTag, 0)])
        let first = ifd0 + [Self.long(pointerTag, UInt32(8 + ifd0Size))]
        var tiff: [UInt8] = Array("II".utf8) + Self.le16(42) + Self.le32(8)
        tiff += Self.layOut(first, at: 8)
        tiff += Self.layOut(exif, at: 8 + ifd0Size)
        return Data("Exif\0\0".utf8) + tiff
    }

    /// An IFD's bytes: its entry count, entries (by tag, as TIFF requires), no next IFD, then the values
    /// that do not fit in an entry, each padded to an even length.
    private static func layOut(_ entries: [Entry], at offset: Int) -> [UInt8] {
        let sorted = entries.sorted { $0.tag < $1.tag }
        var table = le16(UInt16(sorted.count))
        var values: [UInt8] = []
        let valuesStart = offset + 2 + 12 * sorted.count + 4
        for entry in sorted {
            table += le16(entry.tag) + le16(entry.type) + le32(entry.count)
            if entry.bytes.count <= 4 {
                table += entry.bytes + [UInt8](repeating: 0, count: 4 - entry.bytes.count)
            } else {
                table += le32(UInt32(valuesStart + values.count))
                values += entry.bytes + (entry.bytes.count % 2 == 1 ? [0] : [])
            }
        }
        return table + le32(0) + values
    }

    private static func size(of entries: [Entry]) -> Int {
        2 + 12 * entries.count + 4 + entries.reduce(0) { $0 + ($1.bytes.count > 4 ? ($1.bytes.count + 1) & ~1 : 0) }
    }

    private static func text(_ tag: UInt16, _ value: String) -> Entry {
        let bytes = Array(value.utf8) + [0]
        return Entry(tag: tag, type: ascii, count: UInt32(bytes.count), bytes: bytes)
    }
    private static func short(_ tag: UInt16, _ value: UInt16) -> Entry { Entry(tag: tag, type: short, count: 1, bytes: le16(value)) }
    private static func long(_ tag: UInt16, _ value: UInt32) -> Entry { Entry(tag: tag, type: long, count: 1, bytes: le32(value)) }
    private static func rational(_ tag: UInt16, _ numerator: UInt32, _ denominator: UInt32) -> Entry {
        Entry(tag: tag, type: rational, count: 1, bytes: le32(numerator) + le32(denominator))
    }
    private static func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
    private static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) } }
}
