import Foundation
import GStreamerKit

extension CaptureDevice {
    /// How hard the machine is pressed while the device captures (AVCaptureDevice.SystemPressureState).
    /// A session measures it while it runs from what the machine and its own graph say: CPU and memory
    /// pressure (/proc/pressure), thermal zones against their trip points, frames leaving the camera late,
    /// full queues and QoS messages. `.nominal` when no session uses the device.
    public struct SystemPressureState: Sendable, Hashable, CustomStringConvertible {
        /// AVCaptureDevice.SystemPressureState.Level, in rising order.
        public enum Level: String, Sendable, Hashable, Comparable, CaseIterable, Codable {
            /// Nothing is pressed.
            case nominal
            /// Pressure is rising; the session reports it and changes nothing.
            case fair
            /// The session no longer keeps up everywhere: preview and frame outputs get fewer frames so
            /// that a recording gets them all.
            case serious
            /// Frames are late even so: the camera's frame rate is halved for every output.
            case critical
            /// The session cannot capture: the camera is interrupted with
            /// `.videoDeviceNotAvailableDueToSystemPressure` until the pressure falls.
            case shutdown

            private var rank: Int { Self.allCases.firstIndex(of: self)! }
            public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
        }

        /// What contributes to the level (AVCaptureDevice.SystemPressureState.Factors, plus Linux's own).
        public struct Factors: OptionSet, Sendable, Hashable, CustomStringConvertible {
            public let rawValue: UInt
            public init(rawValue: UInt) { self.rawValue = rawValue }

            /// A thermal zone of the machine is near or past a trip point.
            public static let systemTemperature = Factors(rawValue: 1 << 0)
            /// Never set on Linux: no interface reports a power budget. Kept so AVFoundation code compiles.
            public static let peakPower = Factors(rawValue: 1 << 1)
            /// Never set on Linux. Kept so AVFoundation code compiles.
            public static let depthModuleTemperature = Factors(rawValue: 1 << 2)
            /// A thermal zone the kernel names as the camera's is near or past a trip point.
            public static let cameraTemperature = Factors(rawValue: 1 << 3)
            /// Runnable tasks wait for a CPU (/proc/pressure/cpu), or the session's own threads run late.
            public static let cpuContention = Factors(rawValue: 1 << 8)
            /// Tasks stall on memory reclaim (/proc/pressure/memory).
            public static let memory = Factors(rawValue: 1 << 9)
            /// The session's graph falls behind: frames leave the camera late, queues fill, elements drop.
            public static let frameBacklog = Factors(rawValue: 1 << 10)

            static let names: [(Factors, String)] = [
                (.systemTemperature, "systemTemperature"), (.peakPower, "peakPower"),
                (.depthModuleTemperature, "depthModuleTemperature"), (.cameraTemperature, "cameraTemperature"),
                (.cpuContention, "cpuContention"), (.memory, "memory"), (.frameBacklog, "frameBacklog"),
            ]

            /// The factors' names, as the CLI prints them.
            public var names: [String] { Self.names.filter { contains($0.0) }.map(\.1) }
            public var description: String { names.isEmpty ? "none" : names.joined(separator: ", ") }
        }

        public let level: Level
        public let factors: Factors

        public init(level: Level, factors: Factors) {
            self.level = level
            self.factors = level == .nominal ? [] : factors
        }

        public static let nominal = SystemPressureState(level: .nominal, factors: [])

        public var description: String { level == .nominal ? "nominal" : "\(level.rawValue) (\(factors))" }
    }

    /// Posted with the device as object when its `systemPressureState` changes (AVFoundation's KVO of the
    /// property); the new state is under `systemPressureStateKey`.
    public static let systemPressureStateDidChangeNotification = Notification.Name("GCaptureDeviceSystemPressureStateDidChange")
    public static let systemPressureStateKey = "systemPressureState"

    /// The pressure the device captures under now (AVCaptureDevice.systemPressureState).
    public var systemPressureState: SystemPressureState { SystemPressureBoard.shared.state(of: uniqueID) }

    /// The device's pressure state as it changes, starting with the current one (one stream per call).
    public func systemPressureStates() -> AsyncStream<SystemPressureState> {
        SystemPressureBoard.shared.stream(of: uniqueID)
    }
}

/// Every device's pressure state, by unique id: a device object may be made again for the same camera
/// (rediscovered, replugged), and its state belongs to the camera, not to the object.
final class SystemPressureBoard: Sendable {
    static let shared = SystemPressureBoard()

    private struct Entry {
        var state = CaptureDevice.SystemPressureState.nominal
        var continuations: [UUID: AsyncStream<CaptureDevice.SystemPressureState>.Continuation] = [:]
    }
    private let entries = Locked<[String: Entry]>([:])

    func state(of id: String) -> CaptureDevice.SystemPressureState {
        entries.withLock { $0[id]?.state ?? .nominal }
    }

    func stream(of id: String) -> AsyncStream<CaptureDevice.SystemPressureState> {
        let (stream, continuation) = AsyncStream<CaptureDevice.SystemPressureState>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let key = UUID()
        let current = entries.withLock { entries in
            entries[id, default: Entry()].continuations[key] = continuation
            return entries[id]!.state
        }
        continuation.yield(current)
        continuation.onTermination = { [weak self] _ in
            _ = self?.entries.withLock { $0[id]?.continuations.removeValue(forKey: key) }
        }
        return stream
    }

    /// Records a new state; returns false (and tells nobody) when it is the same as before.
    @discardableResult
    func update(_ device: CaptureDevice, to state: CaptureDevice.SystemPressureState) -> Bool {
        let listeners = entries.withLock { entries -> [AsyncStream<CaptureDevice.SystemPressureState>.Continuation]? in
            var entry = entries[device.uniqueID] ?? Entry()
            guard entry.state != state else { return nil }
            entry.state = state
            entries[device.uniqueID] = entry
            return Array(entry.continuations.values)
        }
        guard let listeners else { return false }
        for listener in listeners { listener.yield(state) }
        NotificationCenter.default.post(name: CaptureDevice.systemPressureStateDidChangeNotification, object: device,
                                        userInfo: [CaptureDevice.systemPressureStateKey: state])
        return true
    }
}
