import Yams

extension NodeReader {
    /// `timelapse: true` (one frame a second at 30 fps) or a mapping.
    mutating func readTimelapse(_ node: Node) -> CaptureDescription.Timelapse {
        var timelapse = CaptureDescription.Timelapse()
        let p = shown("outputs.timelapse")
        // Under --safe it stops at the size a movie without max-size stops at (it has no key of its own).
        if safe { timelapse.maxSize = SafeLimits.defaultMaxSize }
        guard case .mapping = node, let fields = entries(node, path: "outputs.timelapse", what: p) else { return timelapse }
        // From a frame every 20 ms (a 50 fps camera's every frame) to one a day.
        if let node = fields["interval"], let value = seconds(node, "\(p).interval", in: 0.02...86_400) { timelapse.interval = value }
        if let node = fields["frame-rate"], let value = integer(node, "\(p).frame-rate", in: 1...120, unit: "frames a second") {
            timelapse.frameRate = value
        }
        let longest = safe ? SafeLimits.maxDuration : 86_400 * 365
        if let node = fields["max-duration"], let value = seconds(node, "\(p).max-duration", in: 0.1...longest) {
            timelapse.maxDuration = value
        }
        if let node = fields["folder"], let value = folder(node, "\(p).folder") { timelapse.folder = value }
        if let node = fields["name"], let value = pattern(node, "\(p).name", extensions: ["mp4", "m4v", "mov"], what: " (a timelapse is MP4)") {
            timelapse.name = value
        }
        return timelapse
    }
}
