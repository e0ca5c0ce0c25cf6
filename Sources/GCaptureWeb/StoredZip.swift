import Foundation

/// A zip archive of files stored as they are (photos and movies do not shrink), written to an unnamed file
/// that is gone once the last descriptor on it closes: nothing is left behind, whatever happens to the
/// download. The plain zip format, which every unzip reads, holds at most 65,535 entries and 4 GiB; a larger
/// selection is refused with a reason rather than written as a broken archive.
struct StoredZip {
    struct Entry {
        /// The name in the archive (UTF-8).
        var name: String
        var path: String
        var modified: Date
    }

    enum Failure: Error, Equatable {
        case tooLarge(bytes: Int)
        case tooMany(count: Int)
        case unreadable(name: String)
        case cannotWrite(reason: String)
    }

    static let maximumBytes = Int(UInt32.max) - 1
    static let maximumEntries = Int(UInt16.max)

    /// Writes the archive of `entries` and returns its descriptor (read from offset 0) and size. A file that
    /// grows while it is copied (a movie being recorded) is archived as it was when the copy began.
    static func write(_ entries: [Entry]) throws(Failure) -> (descriptor: Int32, size: Int) {
        guard entries.count <= maximumEntries else { throw .tooMany(count: entries.count) }
        var sizes: [Int] = []
        for entry in entries {
            var info = stat()
            guard stat(entry.path, &info) == 0 else { throw .unreadable(name: entry.name) }
            sizes.append(Int(info.st_size))
        }
        let headers = entries.reduce(22) { $0 + 30 + 46 + 2 * $1.name.utf8.count }
        let total = sizes.reduce(headers, +)
        guard total <= maximumBytes else { throw .tooLarge(bytes: total) }

        var template = Array((FileManager.default.temporaryDirectory.path + "/gcapture-zip-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw .cannotWrite(reason: String(cString: strerror(errno))) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var writer = Writer(descriptor: descriptor)
        do throws(Failure) {
            var directory: [UInt8] = []
            for (entry, size) in zip(entries, sizes) {
                let offset = writer.offset
                let name = Array(entry.name.utf8)
                let (time, date) = dosTime(entry.modified)
                // The CRC and sizes are known once the file has been copied: written as zero, then put in place.
                var local = Bytes()
                local.u32(0x0403_4b50); local.u16(20); local.u16(0x0800); local.u16(0); local.u16(time); local.u16(date)
                local.u32(0); local.u32(0); local.u32(0); local.u16(UInt16(name.count)); local.u16(0)
                try writer.write(local.bytes + name)
                let (crc, copied) = try writer.copy(from: entry.path, upTo: size, name: entry.name)
                var fields = Bytes()
                fields.u32(crc); fields.u32(UInt32(copied)); fields.u32(UInt32(copied))
                try writer.write(fields.bytes, at: offset + 14)

                var central = Bytes()
                central.u32(0x0201_4b50); central.u16(0x0314); central.u16(20); central.u16(0x0800); central.u16(0)
                central.u16(time); central.u16(date); central.u32(crc); central.u32(UInt32(copied)); central.u32(UInt32(copied))
                central.u16(UInt16(name.count)); central.u16(0); central.u16(0); central.u16(0); central.u16(0)
                central.u32(UInt32(0o100644) << 16); central.u32(UInt32(offset))
                directory += central.bytes + name
            }
            let directoryOffset = writer.offset
            var end = Bytes()
            end.u32(0x0605_4b50); end.u16(0); end.u16(0); end.u16(UInt16(entries.count)); end.u16(UInt16(entries.count))
            end.u32(UInt32(directory.count)); end.u32(UInt32(directoryOffset)); end.u16(0)
            try writer.write(directory + end.bytes)
            return (descriptor, writer.offset)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// MS-DOS time and date, in local time as unzip shows them.
    static func dosTime(_ date: Date) -> (time: UInt16, date: UInt16) {
        var seconds = time_t(max(315_532_800, date.timeIntervalSince1970)) // 1980-01-01, the format's first day
        var parts = tm()
        localtime_r(&seconds, &parts)
        let time = (parts.tm_hour << 11) | (parts.tm_min << 5) | (parts.tm_sec / 2)
        let day = ((parts.tm_year - 80) << 9) | ((parts.tm_mon + 1) << 5) | parts.tm_mday
        return (UInt16(truncatingIfNeeded: time), UInt16(truncatingIfNeeded: day))
    }

    private struct Bytes {
        var bytes: [UInt8] = []
        mutating func u16(_ value: UInt16) { bytes += [UInt8(value & 0xFF), UInt8(value >> 8)] }
        mutating func u32(_ value: UInt32) { for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8((value >> UInt32(shift)) & 0xFF)) } }
    }

    private struct Writer {
        let descriptor: Int32
        private(set) var offset = 0

        init(descriptor: Int32) { self.descriptor = descriptor }

        mutating func write(_ bytes: [UInt8]) throws(Failure) {
            try put(bytes, at: offset)
            offset += bytes.count
        }

        func write(_ bytes: [UInt8], at position: Int) throws(Failure) { try put(bytes, at: position) }

        private func put(_ bytes: [UInt8], at position: Int) throws(Failure) {
            var done = 0
            while done < bytes.count {
                let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + done, bytes.count - done, off_t(position + done)) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw .cannotWrite(reason: String(cString: strerror(errno))) }
                done += written
            }
        }

        /// Copies at most `limit` bytes of the file, returning their CRC-32 and count.
        mutating func copy(from path: String, upTo limit: Int, name: String) throws(Failure) -> (crc: UInt32, count: Int) {
            let source = open(path, O_RDONLY | O_CLOEXEC)
            guard source >= 0 else { throw .unreadable(name: name) }
            defer { close(source) }
            var crc = CRC32()
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var copied = 0
            while copied < limit {
                let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress!, min($0.count, limit - copied)) }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { throw .unreadable(name: name) }
                if count == 0 { break }
                let chunk = Array(buffer[0..<count])
                crc.update(chunk)
                try write(chunk)
                copied += count
            }
            return (crc.value, copied)
        }
    }
}

/// The zip format's checksum (CRC-32, the IEEE polynomial), a byte at a time from a table.
struct CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }
    private var state: UInt32 = 0xFFFF_FFFF

    mutating func update(_ bytes: [UInt8]) {
        var crc = state
        Self.table.withUnsafeBufferPointer { table in
            bytes.withUnsafeBufferPointer { data in
                for byte in data { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
            }
        }
        state = crc
    }

    var value: UInt32 { state ^ 0xFFFF_FFFF }
}
