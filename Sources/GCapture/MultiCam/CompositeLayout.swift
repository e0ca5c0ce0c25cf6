extension CaptureMultiCamSession {
    /// How an output connected to several cameras shows them in one picture (GStreamer's compositor).
    public enum CompositeLayout: String, Sendable, CaseIterable {
        /// Left to right in the connection's port order, each camera in a cell of the first camera's size.
        case sideBySide = "side-by-side"
        /// The first camera fills the picture; each further one is inset at a third of its size, in the
        /// bottom-right corner and then leftwards.
        case pictureInPicture = "pip"
    }
}

/// Where each camera goes in a composite picture, and the picture's size and rate.
struct CompositeGeometry: Sendable, Equatable {
    struct Cell: Sendable, Equatable { var x, y, width, height: Int }
    var width: Int
    var height: Int
    var frameRate: Fraction
    var cells: [Cell]

    /// `first`: the first camera's format and rate, which set the cell (side by side) or the picture (inset).
    init(_ layout: CaptureMultiCamSession.CompositeLayout, cameras: Int, first: CaptureDevice.Format, frameRate: Fraction) {
        let (w, h) = (first.width, first.height)
        self.frameRate = frameRate
        switch layout {
        case .sideBySide:
            (width, height) = (w * cameras, h)
            cells = (0..<cameras).map { Cell(x: $0 * w, y: 0, width: w, height: h) }
        case .pictureInPicture:
            (width, height) = (w, h)
            // Even sizes and places: every 4:2:0 format an encoder takes halves them.
            let (insetWidth, insetHeight, margin) = (w / 3 & ~1, h / 3 & ~1, max(2, w / 40 & ~1))
            cells = [Cell(x: 0, y: 0, width: w, height: h)] + (1..<max(cameras, 1)).map { index in
                Cell(x: w - index * (insetWidth + margin), y: h - margin - insetHeight, width: insetWidth, height: insetHeight)
            }
        }
    }
}
