import Dispatch
import Foundation
import GStreamerKit

extension CaptureDevice {
    /// The angles that keep a camera's pictures level with the horizon (AVCaptureDevice.RotationCoordinator):
    /// `videoRotationAngleForHorizonLevelCapture` for a photo or movie connection's `videoRotationAngle`,
    /// `videoRotationAngleForHorizonLevelPreview` for the preview's.
    ///
    /// Linux has no gravity service of its own; the coordinator combines three things:
    /// - the camera's mount angle (`CaptureDevice.mountAngle`, per device by stable id): a camera mounted
    ///   sideways in a kiosk is turned upright by it, with or without a sensor;
    /// - the machine's accelerometer through iio-sensor-proxy (`net.hadess.SensorProxy` on the system D-Bus,
    ///   or the bus `GCAPTURE_SENSOR_BUS` names; `none` turns it off), for cameras fixed to the machine, that
    ///   is with a position: turning the machine clockwise by a quarter turns a back camera's picture back
    ///   clockwise, a front camera's (which looks the other way) counter-clockwise. A camera of unspecified
    ///   position (a USB camera on a stand) does not turn with the machine. Lying flat keeps the last angle.
    ///   With no service, no sensor or no bus the mount angle alone counts, without an error;
    /// - the display's rotation, for the preview: by default the desktop turns the screen with the sensor
    ///   (GNOME, KDE), so the preview needs the capture angle; where the screen's rotation is fixed (rotation
    ///   lock, a kiosk's xrandr setting) say so with `displayRotation` or `GCAPTURE_DISPLAY_ROTATION`
    ///   (0, 90, 180, 270 or xrandr's normal, right, inverted, left) and the preview also undoes the turn
    ///   of the screen. X RandR is not read: a kiosk's rotated monitor is rotated by exactly what its
    ///   mounting needs, which no sensor sees, so its xrandr setting alone would mislead.
    /// Without a preview output the preview angle is 0. A mirrored preview (a front camera's, automatically)
    /// is mirrored after it is turned, which reverses the sense of the screen's turn; the preview connection's
    /// mirroring is read at each change of the angles.
    ///
    /// Changes are observable with `observe(_:options:changeHandler:)` (KVO's shape; handlers run in order
    /// on the coordinator's own queue, not the main queue, which a Linux program may not run) and `angles()`.
    public final class RotationCoordinator: Sendable {
        /// Both angles at one moment.
        public struct Angles: Sendable, Hashable, CustomStringConvertible {
            public var preview: Double
            public var capture: Double
            public init(preview: Double, capture: Double) { self.preview = preview; self.capture = capture }
            public var description: String { "preview \(Int(preview))°, capture \(Int(capture))°" }
        }

        /// How the screen showing the preview is turned.
        public enum DisplayRotation: Sendable, Hashable {
            /// The desktop turns the screen with the accelerometer, so the screen is always upright.
            case followsSensor
            /// The screen's picture is turned this many degrees clockwise on the panel (xrandr's rotation: right
            /// 90, inverted 180, left 270), whatever the sensor says.
            case fixed(Double)
        }

        /// KVO's options that apply here.
        public struct ObservingOptions: OptionSet, Sendable {
            public let rawValue: Int
            public init(rawValue: Int) { self.rawValue = rawValue }
            /// The change carries the new value.
            public static let new = ObservingOptions(rawValue: 1)
            /// The change carries the old value.
            public static let old = ObservingOptions(rawValue: 2)
            /// The handler is also called once at once, with the current value.
            public static let initial = ObservingOptions(rawValue: 4)
        }

        /// What changed (NSKeyValueObservedChange's values).
        public struct ObservedChange: Sendable {
            public let newValue: Double?
            public let oldValue: Double?
        }

        /// Keeps an observation alive (NSKeyValueObservation): it ends with `invalidate()` or when released.
        public final class Observation: Sendable {
            private let end: Locked<(@Sendable () -> Void)?>
            init(end: @escaping @Sendable () -> Void) { self.end = Locked(end) }
            public func invalidate() { end.withLock { end in defer { end = nil }; return end }?() }
            deinit { invalidate() }
        }

        public let device: CaptureDevice
        public let previewLayer: CapturePreviewOutput?

        private struct State {
            var mountAngle: Int
            /// The machine's turn, clockwise, from the accelerometer's last orientation with an edge up.
            var sensorDegrees = 0
            var hasSensor = false
            var displayRotation: DisplayRotation
            var angles = Angles(preview: 0, capture: 0)
            var observers: [UUID: Observer] = [:]
            var streams: [UUID: AsyncStream<Angles>.Continuation] = [:]
        }

        private enum Key: Sendable { case preview, capture }

        private struct Observer: Sendable {
            let key: Key
            let options: ObservingOptions
            let handler: @Sendable (RotationCoordinator, ObservedChange) -> Void
        }

        private let state: Locked<State>
        private let environment: [String: String]
        /// Handlers run here, in the order of the changes.
        private let queue = DispatchQueue(label: "gcapture.rotation-coordinator")
        private let sensor = Locked<SensorProxyClient?>(nil)
        private let mountListener = Locked<UUID?>(nil)

        /// A coordinator for `device`'s pictures and, when given, the preview showing them.
        public convenience init(device: CaptureDevice, previewLayer: CapturePreviewOutput?) {
            self.init(device: device, previewLayer: previewLayer, environment: ProcessInfo.processInfo.environment)
        }

        /// The coordinator with another environment (sensor bus, settings), for tests.
        init(device: CaptureDevice, previewLayer: CapturePreviewOutput?, environment: [String: String]) {
            self.device = device
            self.previewLayer = previewLayer
            self.environment = environment
            state = Locked(State(mountAngle: DeviceSettings.mountAngle(of: device, environment: environment),
                                 displayRotation: Self.displayRotation(environment: environment)))
            state.withLock { $0.angles = Self.angles(for: $0, position: device.position, preview: previewMirroring()) }
            mountListener.withLock { $0 = DeviceSettings.addMountAngleListener { [weak self] in self?.mountAngleChanged() } }
            let bus = environment["GCAPTURE_SENSOR_BUS"].flatMap { $0.isEmpty ? nil : $0 }
                ?? SensorProxyClient.systemBusAddress(environment: environment)
            if bus != "none" {
                let client = SensorProxyClient(busAddress: bus) { [weak self] orientation in
                    self?.sensorChanged(orientation)
                }
                sensor.withLock { $0 = client }
            }
        }

        deinit {
            if let key = mountListener.withLock({ $0 }) { DeviceSettings.removeMountAngleListener(key) }
            sensor.withLock { $0 }?.stop()
            for continuation in state.withLock({ $0.streams.values }) { continuation.finish() }
        }

        /// The angle for the preview's connection so the preview shows the horizon level (0 without a preview).
        public var videoRotationAngleForHorizonLevelPreview: Double { state.withLock { $0.angles.preview } }

        /// The angle for a photo or movie connection so what is captured has the horizon level.
        public var videoRotationAngleForHorizonLevelCapture: Double { state.withLock { $0.angles.capture } }

        /// Whether an accelerometer reports now: without one the angles follow the mount angle alone.
        public var isTrackingGravity: Bool { state.withLock { $0.hasSensor } }

        /// How the screen showing the preview is turned; from GCAPTURE_DISPLAY_ROTATION at first.
        public var displayRotation: DisplayRotation {
            get { state.withLock { $0.displayRotation } }
            set {
                if case .fixed(let degrees) = newValue {
                    precondition(CaptureConnection.supportedVideoRotationAngles.contains(degrees), "a display rotation must be 0, 90, 180 or 270")
                }
                update { $0.displayRotation = newValue }
            }
        }

        /// The current angles, then each change, until the coordinator is released or the loop ends.
        public func angles() -> AsyncStream<Angles> {
            let (stream, continuation) = AsyncStream<Angles>.makeStream()
            let key = UUID()
            // Given the current angles under the state's lock: no change slips between the two.
            state.withLock { state in
                state.streams[key] = continuation
                continuation.yield(state.angles)
            }
            continuation.onTermination = { [weak self] _ in _ = self?.state.withLock { $0.streams.removeValue(forKey: key) } }
            return stream
        }

        /// Calls `changeHandler` after each change of one of the two angles (KVO's
        /// `observe(_:options:changeHandler:)`), on the coordinator's queue, in order, until the returned
        /// observation is invalidated or released.
        public func observe(_ keyPath: KeyPath<RotationCoordinator, Double>, options: ObservingOptions = [],
                            changeHandler: @escaping @Sendable (RotationCoordinator, ObservedChange) -> Void) -> Observation {
            precondition(keyPath == \RotationCoordinator.videoRotationAngleForHorizonLevelPreview
                            || keyPath == \RotationCoordinator.videoRotationAngleForHorizonLevelCapture,
                         "only videoRotationAngleForHorizonLevelPreview and videoRotationAngleForHorizonLevelCapture are observable")
            let key = UUID()
            let observer = Observer(key: keyPath == \RotationCoordinator.videoRotationAngleForHorizonLevelPreview ? .preview : .capture,
                                    options: options, handler: changeHandler)
            state.withLock { state in
                state.observers[key] = observer
                if options.contains(.initial) {
                    let value = Self.value(observer.key, in: state.angles)
                    queue.async { changeHandler(self, ObservedChange(newValue: options.contains(.new) ? value : nil, oldValue: nil)) }
                }
            }
            return Observation { [weak self] in _ = self?.state.withLock { $0.observers.removeValue(forKey: key) } }
        }

        // MARK: Inputs

        private func sensorChanged(_ orientation: SensorProxyClient.Orientation?) {
            update { state in
                state.hasSensor = orientation != nil
                switch orientation {
                case nil: state.sensorDegrees = 0
                case .normal?: state.sensorDegrees = 0
                case .leftUp?: state.sensorDegrees = 90
                case .bottomUp?: state.sensorDegrees = 180
                case .rightUp?: state.sensorDegrees = 270
                case .undefined?: break  // flat on a table: no edge is up, the last turn stands
                }
            }
        }

        private func mountAngleChanged() {
            let angle = DeviceSettings.mountAngle(of: device, environment: environment)
            update { $0.mountAngle = angle }
        }

        /// Applies a change and tells observers and streams what it changed, in order.
        private func update(_ change: (inout State) -> Void) {
            state.withLock { state in
                let old = state.angles
                change(&state)
                state.angles = Self.angles(for: state, position: device.position, preview: previewMirroring())
                let new = state.angles
                guard new != old else { return }
                let observers = Array(state.observers.values)
                // Queued under the lock, so two changes from two threads reach everyone in the order they were made.
                for continuation in state.streams.values { continuation.yield(new) }
                queue.async { [self] in
                    for observer in observers {
                        let before = Self.value(observer.key, in: old), after = Self.value(observer.key, in: new)
                        guard before != after else { continue }
                        observer.handler(self, ObservedChange(newValue: observer.options.contains(.new) ? after : nil,
                                                              oldValue: observer.options.contains(.old) ? before : nil))
                    }
                }
            }
        }

        // MARK: The angles

        /// Whether the preview's connection mirrors (nil without a preview): automatic mirroring mirrors this
        /// coordinator's camera when it faces the user. Read at each change of the angles.
        private func previewMirroring() -> Bool? {
            guard let connection = previewLayer?.connection else { return nil }
            return connection.automaticallyAdjustsVideoMirroring ? device.position == .front : connection.isVideoMirrored
        }

        /// capture = mount + s × turn, s = +1 for a back camera, -1 for a front one (it faces the other way),
        /// 0 for a camera not fixed to the machine. The preview is drawn on a screen turned by `screen` in the
        /// world (none where the desktop follows the sensor, else the machine's turn plus the picture's turn on
        /// the panel): capture - screen, or capture + screen when the preview is mirrored, since the mirror
        /// comes after the turn and reverses its sense on the screen.
        private static func angles(for state: State, position: Position, preview mirrored: Bool?) -> Angles {
            let turn = state.hasSensor ? state.sensorDegrees : 0
            let sign = switch position { case .back: 1; case .front: -1; case .unspecified: 0 }
            let capture = normalized(state.mountAngle + sign * turn)
            guard let mirrored else { return Angles(preview: 0, capture: Double(capture)) }
            let screen = switch state.displayRotation {
            case .followsSensor: 0
            case .fixed(let degrees): turn + Int(degrees)
            }
            return Angles(preview: Double(normalized(mirrored ? capture + screen : capture - screen)), capture: Double(capture))
        }

        private static func normalized(_ degrees: Int) -> Int { ((degrees % 360) + 360) % 360 }

        private static func value(_ key: Key, in angles: Angles) -> Double {
            key == .preview ? angles.preview : angles.capture
        }

        static func displayRotation(environment: [String: String]) -> DisplayRotation {
            guard let value = environment["GCAPTURE_DISPLAY_ROTATION"]?.lowercased(), !value.isEmpty, value != "auto" else {
                return .followsSensor
            }
            switch value {
            case "0", "normal": return .fixed(0)
            case "90", "right": return .fixed(90)
            case "180", "inverted": return .fixed(180)
            case "270", "left": return .fixed(270)
            default:
                Log.devices.warning("GCAPTURE_DISPLAY_ROTATION: '\(value)' is not auto, 0, 90, 180, 270, normal, right, inverted or left; the screen is taken to follow the sensor")
                return .followsSensor
            }
        }
    }
}
