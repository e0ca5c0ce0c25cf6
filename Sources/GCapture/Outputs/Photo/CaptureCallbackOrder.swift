/// Keeps a capture delegate's callbacks in the order the captures were requested, as AVCapturePhotoOutput
/// does: a capture that gets ahead (its frame was already in the ring while an earlier one waits for the
/// camera) holds its callbacks until the earlier one has passed the same stage. Every capture passes every
/// stage exactly once, with no callbacks when it has none for it.
struct CaptureCallbackOrder {
    enum Stage: Int, CaseIterable {
        /// willBeginCapture
        case begin
        /// didFinishProcessingPhoto (or the deferred proxy) and didFinishCapture
        case finish
    }

    typealias Callback = @Sendable () -> Void

    private var issued = 0
    private var next = Array(repeating: 0, count: Stage.allCases.count)
    private var held = Array(repeating: [Int: [Callback]](), count: Stage.allCases.count)

    /// A place in the order, taken when the capture is requested.
    mutating func issue() -> Int {
        defer { issued += 1 }
        return issued
    }

    /// The capture holding `ticket` reached `stage`: returns every callback now due, in order. A capture's
    /// begin is always due before its finish, since it passes begin first.
    mutating func pass(_ ticket: Int, _ stage: Stage, _ callbacks: [Callback]) -> [Callback] {
        let index = stage.rawValue
        held[index][ticket] = callbacks
        var due: [Callback] = []
        while let ready = held[index].removeValue(forKey: next[index]) {
            due += ready
            next[index] += 1
        }
        return due
    }
}
