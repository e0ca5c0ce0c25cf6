import Foundation
import GCapture

/// The picture viewers see while the camera gives no frames: "NO SIGNAL" in white on dark grey, drawn from
/// a 5x7 pixel font (no font library, no GStreamer element that a machine may lack) and encoded once.
enum NoSignalPicture {
    private static let glyphs: [Character: [String]] = [
        "N": ["10001", "11001", "10101", "10011", "10001", "10001", "10001"],
        "O": ["01110", "10001", "10001", "10001", "10001", "10001", "01110"],
        "S": ["01111", "10000", "10000", "01110", "00001", "00001", "11110"],
        "I": ["01110", "00100", "00100", "00100", "00100", "00100", "01110"],
        "G": ["01110", "10001", "10000", "10111", "10001", "10001", "01111"],
        "A": ["01110", "10001", "10001", "11111", "10001", "10001", "10001"],
        "L": ["10000", "10000", "10000", "10000", "10000", "10000", "11111"],
        " ": ["00000", "00000", "00000", "00000", "00000", "00000", "00000"],
    ]

    static let text = "NO SIGNAL"

    /// A grey picture (a single luma plane) of `width` x `height` with the text centred, about half as wide.
    static func luma(width: Int, height: Int) -> [UInt8] {
        var pixels = [UInt8](repeating: 40, count: width * height)
        let columns = text.count * 6 - 1
        let scale = max(1, min(width / 2 / columns, height / 4 / 7))
        let left = (width - columns * scale) / 2, top = (height - 7 * scale) / 2
        for (index, character) in text.enumerated() {
            guard let rows = glyphs[character] else { continue }
            for (row, bits) in rows.enumerated() {
                for (column, bit) in bits.enumerated() where bit == "1" {
                    let x0 = left + (index * 6 + column) * scale, y0 = top + row * scale
                    for y in y0..<min(height, y0 + scale) {
                        for x in x0..<min(width, x0 + scale) where x >= 0 && y >= 0 { pixels[y * width + x] = 235 }
                    }
                }
            }
        }
        return pixels
    }

    static func jpeg(width: Int, height: Int) throws(CaptureError) -> Data {
        do {
            return try JPEGEncoder.encode(grayscale: luma(width: width, height: height), width: width, height: height, quality: 80)
        } catch {
            throw .encodingFailed(reason: "the no-signal picture could not be encoded", underlying: nil)
        }
    }
}
