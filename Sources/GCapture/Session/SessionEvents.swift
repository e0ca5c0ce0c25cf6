import Foundation

extension CaptureSession {
    /// What the session's notifications say, from now on, as one stream (one stream per call).
    public func events() -> AsyncStream<Event> { sessionEvents.makeStream() }

    /// Posts a notification and yields the same as an event, in that order for every observer: whoever hears
    /// the event finds the notification delivered (NotificationCenter calls its observers before returning).
    func post(_ event: Event) {
        defer { sessionEvents.yield(event) }
        switch event {
        case .didStartRunning: NotificationCenter.default.post(name: Self.didStartRunningNotification, object: self)
        case .didStopRunning: NotificationCenter.default.post(name: Self.didStopRunningNotification, object: self)
        case .runtimeError(let error):
            NotificationCenter.default.post(name: Self.runtimeErrorNotification, object: self,
                                            userInfo: [Self.runtimeErrorUserInfoKey: error])
        case .wasInterrupted(let reason):
            NotificationCenter.default.post(name: Self.wasInterruptedNotification, object: self,
                                            userInfo: [CaptureSessionInterruptionReasonKey: reason.rawValue])
        case .interruptionEnded(let reason):
            NotificationCenter.default.post(name: Self.interruptionEndedNotification, object: self,
                                            userInfo: [CaptureSessionInterruptionReasonKey: reason.rawValue])
        case .systemPressureChanged:
            // Its notification is the device's (CaptureDevice.systemPressureStateDidChangeNotification).
            break
        }
    }
}
