import Dispatch
import Foundation
import GStreamerKit

/// What the machine says about pressure at one moment, read from the kernel.
struct MachinePressure: Sendable {
    /// /proc/pressure/cpu "some" avg10: the share of the last 10 s in which a runnable task waited for a
    /// CPU, in percent. nil when the kernel has no PSI (built without it, or booted with psi=0).
    var cpuSome: Double?
    /// /proc/pressure/memory "some" and "full" avg10, in percent.
    var memorySome: Double?
    var memoryFull: Double?
    /// The hottest thermal zone's level against its own trip points.
    var thermal = ThermalReading()
    /// How late the monitor's own timer fired, in milliseconds: this process waiting for a CPU.
    var timerSlip: Double = 0

    struct ThermalReading: Sendable {
        var level = CaptureDevice.SystemPressureState.Level.nominal
        var factors = CaptureDevice.SystemPressureState.Factors()
    }

    /// "some avg10=9.11 avg60=5.00 avg300=6.16 total=3651120359" → (some, full) avg10.
    static func parsePSI(_ text: String) -> (some: Double?, full: Double?) {
        var some: Double?, full: Double?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let kind = fields.first,
                  let avg10 = fields.first(where: { $0.hasPrefix("avg10=") }).flatMap({ Double($0.dropFirst(6)) }) else { continue }
            if kind == "some" { some = avg10 } else if kind == "full" { full = avg10 }
        }
        return (some, full)
    }

    static func readPSI(_ resource: String) -> (some: Double?, full: Double?) {
        guard let text = try? String(contentsOfFile: "/proc/pressure/" + resource, encoding: .utf8) else { return (nil, nil) }
        return parsePSI(text)
    }
}

/// The machine's thermal zones (/sys/class/thermal/thermal_zone*) and their trip points, found once.
struct ThermalZones: Sendable {
    struct Zone: Sendable {
        var tempPath: String
        var isCamera: Bool
        /// Trip temperatures in millidegrees: the first passive (or active) one, hot and critical.
        var passive: Int?
        var hot: Int?
        var critical: Int?
    }

    var zones: [Zone]

    init(root: String = "/sys/class/thermal") {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { $0.hasPrefix("thermal_zone") }
        zones = names.sorted().compactMap { name in
            let directory = root + "/" + name + "/"
            guard FileManager.default.fileExists(atPath: directory + "temp") else { return nil }
            let type = Self.read(directory + "type") ?? ""
            var zone = Zone(tempPath: directory + "temp", isCamera: type.lowercased().contains("cam"))
            for index in 0..<16 {
                guard let kind = Self.read(directory + "trip_point_\(index)_type"),
                      let temp = Self.read(directory + "trip_point_\(index)_temp").flatMap({ Int($0) }), temp > 0 else { continue }
                switch kind {
                case "passive", "active": zone.passive = min(zone.passive ?? .max, temp)
                case "hot": zone.hot = min(zone.hot ?? .max, temp)
                case "critical": zone.critical = min(zone.critical ?? .max, temp)
                default: break
                }
            }
            return zone.passive == nil && zone.hot == nil && zone.critical == nil ? nil : zone
        }
    }

    /// Levels: within 5 °C of the first passive/active trip fair, past it serious, past hot critical,
    /// within 5 °C of critical (where the kernel powers off) shutdown.
    func reading() -> MachinePressure.ThermalReading {
        var result = MachinePressure.ThermalReading()
        for zone in zones {
            guard let temp = Self.read(zone.tempPath).flatMap({ Int($0) }) else { continue }
            var level = CaptureDevice.SystemPressureState.Level.nominal
            if let critical = zone.critical, temp >= critical - 5000 { level = .shutdown }
            else if let hot = zone.hot, temp >= hot { level = .critical }
            else if let passive = zone.passive, temp >= passive { level = .serious }
            else if let passive = zone.passive, temp >= passive - 5000 { level = .fair }
            guard level > .nominal else { continue }
            result.level = max(result.level, level)
            result.factors.insert(zone.isCamera ? .cameraTemperature : .systemTemperature)
        }
        return result
    }

    private static func read(_ path: String) -> String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Reads the machine's pressure four times a second on its own queue, for every running session at once,
/// and only while one runs: no timer exists when no session plays. A reading is two small procfs files and
/// the thermal zones' temperatures: microseconds.
final class SystemPressureMonitor: Sendable {
    static let shared = SystemPressureMonitor()
    static let interval: DispatchTimeInterval = .milliseconds(250)
    static let intervalNanoseconds: UInt64 = 250_000_000

    typealias Listener = @Sendable (MachinePressure) -> Void

    private struct State {
        var listeners: [UUID: Listener] = [:]
        var timer: DispatchSourceTimer?
        var lastFire: UInt64 = 0
        var zones: ThermalZones?
        var zonesRoot = ""
    }

    private let queue = DispatchQueue(label: "gcapture.system-pressure")
    private let state = Locked(State())

    /// Where the thermal zones are read (tests point it at zones of their own, in the kernel's layout).
    /// The zones are listed once per root.
    static let thermalRoot = Locked("/sys/class/thermal")

    /// Calls `listener` on the monitor's queue at every reading until `remove`.
    func add(_ listener: @escaping Listener) -> UUID {
        let key = UUID()
        state.withLock { state in
            state.listeners[key] = listener
            guard state.timer == nil else { return }
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + Self.interval, repeating: Self.interval, leeway: .milliseconds(5))
            timer.setEventHandler { [weak self] in self?.fire() }
            state.lastFire = SourceWatch.monotonicNanoseconds()
            state.timer = timer
            timer.resume()
        }
        return key
    }

    /// Whether the timer exists (some session is running).
    var isReading: Bool { state.withLock { $0.timer != nil } }

    func remove(_ key: UUID) {
        let timer = state.withLock { state -> DispatchSourceTimer? in
            state.listeners.removeValue(forKey: key)
            guard state.listeners.isEmpty else { return nil }
            defer { state.timer = nil; state.zones = nil }
            return state.timer
        }
        timer?.cancel()
    }

    private func fire() {
        let now = SourceWatch.monotonicNanoseconds()
        let (listeners, last, zones) = state.withLock { state -> ([Listener], UInt64, ThermalZones) in
            defer { state.lastFire = now }
            let root = Self.thermalRoot.withLock { $0 }
            if state.zones == nil || state.zonesRoot != root { state.zones = ThermalZones(root: root); state.zonesRoot = root }
            return (Array(state.listeners.values), state.lastFire, state.zones!)
        }
        var reading = MachinePressure()
        let elapsed = now > last ? now - last : 0
        reading.timerSlip = elapsed > Self.intervalNanoseconds ? Double(elapsed - Self.intervalNanoseconds) / 1e6 : 0
        reading.cpuSome = MachinePressure.readPSI("cpu").some
        (reading.memorySome, reading.memoryFull) = MachinePressure.readPSI("memory")
        reading.thermal = zones.reading()
        for listener in listeners { listener(reading) }
    }
}
