extension CaptureSession {
    /// A failure while running, or a change addInput, addOutput, commitConfiguration or sessionPreset could
    /// not apply. Fatal ones stopped the session; others either cost one output, which was detached
    /// (`output` says which), or a device or a change that was refused, the session running on unchanged.
    public struct RuntimeError: Error, Sendable, CustomStringConvertible {
        public let error: CaptureError
        public let output: CaptureOutput?
        public let isFatal: Bool
        public var description: String { error.description }
    }
}
