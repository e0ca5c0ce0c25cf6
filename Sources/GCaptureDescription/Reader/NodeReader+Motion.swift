import Foundation
import Yams

extension NodeReader {
    /// `motion: true` (the whole picture, no trigger) or a mapping.
    mutating func readMotion(_ node: Node) -> CaptureDescription.Motion {
        var motion = CaptureDescription.Motion()
        let p = shown("outputs.motion")
        guard case .mapping = node, let fields = entries(node, path: "outputs.motion", what: p) else { return motion }
        if let node = fields["zones"] { motion.zones = rectangles(node, "\(p).zones") }
        if let node = fields["masks"] { motion.masks = rectangles(node, "\(p).masks") }
        if let node = fields["sensitivity"], let value = fraction(node, "\(p).sensitivity") { motion.sensitivity = value }
        if let node = fields["minimum-area"], let value = fraction(node, "\(p).minimum-area") { motion.minimumArea = value }
        if let node = fields["triggers"], let value = choice(node, "\(p).triggers", among: ["movie", "none"]) {
            motion.triggersMovie = value == "movie"
        }
        return motion
    }

    /// A number from 0 to 1.
    private mutating func fraction(_ node: Node, _ path: String) -> Double? {
        guard let text = text(node, path) else { return nil }
        guard let value = Double(text), value.isFinite, (0...1).contains(value) else {
            error(at(node), "\(path) must be a number from 0 to 1, not '\(text)'")
            return nil
        }
        return value
    }

    /// A list of rectangles, each `[x, y, width, height]` in the picture's fractions (0-1, from the top left).
    private mutating func rectangles(_ node: Node, _ path: String) -> [CGRect] {
        guard case .sequence(let items) = node else {
            error(at(node), "\(path) is a list of rectangles, each [x, y, width, height] in fractions of the picture")
            return []
        }
        var rectangles: [CGRect] = []
        for (index, item) in items.enumerated() {
            let itemPath = "\(path)[\(index)]"
            guard case .sequence(let numbers) = item, numbers.count == 4 else {
                error(at(item), "\(itemPath) must be [x, y, width, height], four fractions of the picture")
                continue
            }
            let values = numbers.compactMap { fraction($0, itemPath) }
            guard values.count == 4 else { continue }
            let rect = CGRect(x: values[0], y: values[1], width: values[2], height: values[3])
            guard rect.width > 0, rect.height > 0, rect.maxX <= 1.0001, rect.maxY <= 1.0001 else {
                error(at(item), "\(itemPath) must lie inside the picture with a width and a height: x + width and y + height at most 1")
                continue
            }
            rectangles.append(rect)
        }
        return rectangles
    }
}
