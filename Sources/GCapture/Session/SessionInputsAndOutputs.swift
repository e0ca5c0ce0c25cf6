extension CaptureSession {
    // AVCaptureSession's own calls for inputs and outputs, which do not throw: a refused or failed change is
    // reported as a runtime error before they return. `add(_:)` and `remove(_:)` throw instead.

    public func canAddInput(_ input: CaptureInput) -> Bool {
        let current = inputs
        return !current.contains(input) && !current.contains { $0.mediaType == input.mediaType }
    }

    /// Adds an input (AVCaptureSession.addInput). Outside begin/commitConfiguration the change is committed
    /// at once, blocking like commitConfiguration; inside, it is staged. It does not throw, as AVFoundation's
    /// does not: an input that canAddInput rejects (where AVFoundation raises an exception, which Swift
    /// cannot catch), or a change that cannot be applied, leaves the session as it was and is reported
    /// through runtimeErrorNotification and runtimeErrors(), before this returns. `add(_:)` throws instead.
    public func addInput(_ input: CaptureInput) {
        do { try add(input) } catch { publish(RuntimeError(error: error, output: nil, isFatal: false)) }
    }

    /// Removes an input (AVCaptureSession.removeInput). Like addInput it does not throw: a change that cannot
    /// be applied (the camera kept is gone, say) leaves the session as it was and is reported through
    /// runtimeErrorNotification and runtimeErrors() before this returns. `remove(_:)` throws instead.
    public func removeInput(_ input: CaptureInput) {
        do { try remove(input) } catch { publish(RuntimeError(error: error, output: nil, isFatal: false)) }
    }

    public func canAddOutput(_ output: CaptureOutput) -> Bool { !outputs.contains(output) }

    /// Adds an output (AVCaptureSession.addOutput). Outside begin/commitConfiguration the change is
    /// committed at once (on a running session the output joins the live graph), blocking like
    /// commitConfiguration; inside, it is staged. Like addInput it does not throw: a refused output or a
    /// change that cannot be applied leaves the session as it was and is reported through
    /// runtimeErrorNotification and runtimeErrors() before this returns. `add(_:)` throws instead.
    public func addOutput(_ output: CaptureOutput) {
        do { try add(output) } catch { publish(RuntimeError(error: error, output: nil, isFatal: false)) }
    }

    /// Removes an output (AVCaptureSession.removeOutput); a change that cannot be applied is reported as
    /// removeInput's is. `remove(_:)` throws instead.
    public func removeOutput(_ output: CaptureOutput) {
        do { try remove(output) } catch { publish(RuntimeError(error: error, output: output, isFatal: false)) }
    }
}
