import Foundation

extension CaptureDescription {
    /// Motion detection (CaptureMotionOutput) for the whole run; with `triggersMovie`, each motion is an event
    /// of the movie output (`trigger`'s clip: its pre-roll, held while the motion goes on, then the post-roll).
    public struct Motion: Sendable, Equatable {
        /// Where motion counts (normalized rectangles: x, y, width, height from the top left); empty: everywhere.
        public var zones: [CGRect] = []
        /// Where it never counts.
        public var masks: [CGRect] = []
        public var sensitivity = 0.5
        /// The share of the zones' area that must change.
        public var minimumArea = 0.005
        public var triggersMovie = false
    }
}
