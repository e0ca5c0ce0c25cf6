import Foundation
import GStreamerKit
import Logging
import Synchronization

extension CaptureSession {
    /// What the session does about its camera's system pressure, in the order it does it. Each step keeps
    /// the ones before it.
    public enum PressureResponse: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
        /// Nothing (nominal or fair pressure).
        case none = 0
        /// Serious: frame outputs (CaptureVideoDataOutput, the photo output's viewfinder frames) get one
        /// frame in two, so a recording still gets every frame.
        case fewerFramesToOutputs = 1
        /// Critical: the camera's frames are halved for every output, recordings included (the movie's
        /// timestamps stay true: it has a lower frame rate, not a faster clock).
        case reducedFrameRate = 2
        /// Shutdown: the camera is interrupted with `.videoDeviceNotAvailableDueToSystemPressure`; no frame
        /// goes anywhere until the pressure falls to serious.
        case interrupted = 3

        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }

        public var description: String {
            switch self {
            case .none: "none"
            case .fewerFramesToOutputs: "frame outputs get one frame in two"
            case .reducedFrameRate: "the camera's frame rate is halved"
            case .interrupted: "the camera is interrupted"
            }
        }

        static func forLevel(_ level: CaptureDevice.SystemPressureState.Level) -> Self {
            switch level {
            case .nominal, .fair: .none
            case .serious: .fewerFramesToOutputs
            case .critical: .reducedFrameRate
            case .shutdown: .interrupted
            }
        }
    }
}

/// A running graph's system pressure: every reading of the machine (SystemPressureMonitor) is combined
/// with what the graph itself shows (frames leaving the camera late, a recording's input queue filling,
/// QoS messages) into a level, and the graph is degraded in steps as the level rises.
///
/// The frame outputs' guard queues are not a measure: a two-frame queue in front of a slow delegate is
/// full by design (alwaysDiscardsLateVideoFrames), and that is the app's pace, not the machine's. A
/// recording's input queue (a second of video) filling is: its encoder falls behind.
///
/// The machine's own figures alone never go past `.fair`: a busy machine (a compiler on the other core)
/// says nothing about whether this session keeps up, and degrading a session that keeps up would be a
/// loss for nothing. Only this process's own lateness (its timer and its frames) goes further.
///
/// The level rises one step at a time, each after four readings (a second) that agree on more, so a
/// hiccup is not pressure and each response gets its chance before the next; a lower level must hold for
/// two seconds before the level falls, so the response does not flap; and the last level, shutdown, comes
/// only after three seconds at critical with the frame rate already halved.
final class SessionPressure: @unchecked Sendable {
    // @unchecked Sendable: `graph` is a weak var set once in init (a weak reference cannot be a let); the rest
    // is lets of Sendable types and `Locked` state.
    private weak var graph: SessionGraph?
    private let emit: @Sendable (GraphEvent) -> Void

    /// Frame outputs' share of frames: one in this many.
    private let outputsKeepOneIn = OneIn()
    /// Frame deliveries held back because of pressure: at the camera (one per frame) and at each frame
    /// output's entrance (one per output).
    let withheld = FrameCounter()

    private struct State {
        var listener: UUID?
        var startedAt: UInt64 = 0
        var history: [(level: CaptureDevice.SystemPressureState.Level, factors: CaptureDevice.SystemPressureState.Factors)] = []
        var reported = CaptureDevice.SystemPressureState.nominal
        var response = CaptureSession.PressureResponse.none
        var device: CaptureDevice?
        var qosMessages = 0
    }
    private let state = Locked(State())

    /// Readings kept: enough for the slowest rule (three seconds at critical).
    private static let historyLength = 12
    /// Readings that must agree on a higher level before the level takes one step up.
    static let readingsPerStep = 4
    /// Readings after the start that only set the baseline: the first frames are late by nature.
    private static let graceNanoseconds: UInt64 = 1_000_000_000

    init(graph: SessionGraph, emit: @escaping @Sendable (GraphEvent) -> Void) {
        self.graph = graph
        self.emit = emit
    }

    func start() {
        // The one periodic tick of a playing graph: pressure, and the cameras' silences (FrameStallWatchdog).
        let key = SystemPressureMonitor.shared.add { [weak self] reading in
            self?.graph?.sourceWatches.checkForStalls()
            self?.evaluate(reading)
        }
        state.withLock { state in
            state.listener = key
            state.startedAt = SourceWatch.monotonicNanoseconds()
        }
    }

    /// Stops measuring and lifts every degradation; the device's state goes back to nominal.
    func stop() {
        let (key, device) = state.withLock { state -> (UUID?, CaptureDevice?) in
            defer { state = State() }
            return (state.listener, state.device)
        }
        if let key { SystemPressureMonitor.shared.remove(key) }
        outputsKeepOneIn.value.store(1, ordering: .relaxed)
        if let device { SystemPressureBoard.shared.update(device, to: .nominal) }
    }

    /// The response in force now.
    var response: CaptureSession.PressureResponse { state.withLock { $0.response } }

    /// Makes a frame output's branch give up frames as the response says, at its entrance (before its
    /// guard queue, so dropped frames cost the branch nothing).
    func thinFrames(enteringBranch bin: Bin, of output: CaptureOutput) {
        guard let pad = bin.element(named: "guard")?.staticPad("sink") else { return }
        let keep = outputsKeepOneIn, withheld = withheld
        let box = CounterBox()
        pad.addProbe(.buffer) { [weak output] _ in
            let oneIn = keep.value.load(ordering: .relaxed)
            guard oneIn > 1, output?.yieldsFramesUnderPressure == true else { return .ok }
            guard box.counter.add(1, ordering: .relaxed).newValue % oneIn == 0 else {
                withheld.count.add(1, ordering: .relaxed)
                return .drop
            }
            return .ok
        }
    }

    /// On the monitor's queue, at every reading.
    private func evaluate(_ machine: MachinePressure) {
        guard let graph, let watch = graph.sourceWatches.camera else { return }
        let figures = watch.takeFigures()
        let qos = graph.quality.messages
        let fill = graph.recordingQueueFill()

        typealias Level = CaptureDevice.SystemPressureState.Level
        var level = Level.nominal
        var factors = CaptureDevice.SystemPressureState.Factors()
        func raise(_ candidate: Level, _ factor: CaptureDevice.SystemPressureState.Factors) {
            guard candidate > .nominal else { return }
            level = max(level, candidate)
            factors.insert(factor)
        }
        if let cpu = machine.cpuSome, cpu >= 60 { raise(.fair, .cpuContention) }
        raise(machine.timerSlip >= 400 ? .critical : machine.timerSlip >= 200 ? .serious : machine.timerSlip >= 50 ? .fair : .nominal,
              .cpuContention)
        if let full = machine.memoryFull, full >= 20 { raise(full >= 50 ? .critical : .serious, .memory) }
        if let some = machine.memorySome, some >= 20 { raise(.fair, .memory) }
        raise(machine.thermal.level, machine.thermal.factors)

        typealias Transition = (CaptureDevice.SystemPressureState, CaptureSession.PressureResponse, previous: CaptureSession.PressureResponse)
        let (transition, device) = state.withLock { state -> (Transition?, CaptureDevice) in
            defer { state.qosMessages = qos }
            let now = SourceWatch.monotonicNanoseconds()
            state.device = watch.device
            // A stalled camera sends no frames to be late: the watchdog speaks for it.
            if !watch.isStalled, figures.frames > 0 {
                let behind = Double(figures.worstLateness) / Double(watch.frameInterval)
                Log.session.trace("pressure reading", metadata: [
                    "behindFrames": .stringConvertible(behind), "frames": .stringConvertible(figures.frames),
                    "passed": .stringConvertible(figures.passed), "timerSlipMs": .stringConvertible(machine.timerSlip),
                    "cpuSome": .stringConvertible(machine.cpuSome ?? -1), "recordingQueueFill": .stringConvertible(fill)])
                raise(behind >= 10 ? .critical : behind >= 5 ? .serious : behind >= 2 ? .fair : .nominal, .frameBacklog)
            }
            raise(fill >= 0.9 ? .serious : fill >= 0.5 ? .fair : .nominal, .frameBacklog)
            if qos > state.qosMessages { raise(.fair, .frameBacklog) }
            guard now - state.startedAt >= Self.graceNanoseconds else { return (nil, watch.device) }

            state.history.append((level, factors))
            if state.history.count > Self.historyLength { state.history.removeFirst() }
            let next = Self.nextLevel(after: state.reported.level, history: state.history.map(\.level))
            let considered = state.history.suffix(next > state.reported.level ? Self.readingsPerStep : 8)
            // After a step up the history starts again: the next step needs readings of its own, and
            // shutdown twelve at critical since critical began.
            if next > state.reported.level { state.history.removeAll(keepingCapacity: true) }
            let nextFactors = considered.filter { $0.level > .nominal }.reduce(into: CaptureDevice.SystemPressureState.Factors()) {
                $0.formUnion($1.factors)
            }
            let nextState = next == state.reported.level && next > .nominal
                ? CaptureDevice.SystemPressureState(level: next, factors: state.reported.factors.union(nextFactors))
                : CaptureDevice.SystemPressureState(level: next, factors: nextFactors)
            guard nextState != state.reported else { return (nil, watch.device) }
            let previous = state.response
            state.reported = nextState
            state.response = .forLevel(next)
            return ((nextState, state.response, previous), watch.device)
        }
        guard let (newState, response, previous) = transition else { return }
        outputsKeepOneIn.value.store(response >= .fewerFramesToOutputs ? 2 : 1, ordering: .relaxed)
        watch.keepOneIn.store(response == .interrupted ? 0 : response >= .reducedFrameRate ? 2 : 1, ordering: .relaxed)
        SystemPressureBoard.shared.update(device, to: newState)
        // A change of what the session does is worth a line at the default level; fair and back is not.
        let logLevel: Logger.Level = response == previous ? .info : .notice
        Log.session.log(level: logLevel, "system pressure \(newState); \(response == .none ? "no change to capture" : "\(response)")")
        emit(.systemPressureChanged(device: device, newState, response, previous: previous))
    }

    /// The reported level after a new reading: one step up when the last `readingsPerStep` readings agree on
    /// more (shutdown only after twelve readings at critical), down to the highest of the last eight when
    /// all are lower.
    static func nextLevel(after current: CaptureDevice.SystemPressureState.Level,
                          history: [CaptureDevice.SystemPressureState.Level]) -> CaptureDevice.SystemPressureState.Level {
        if history.count >= readingsPerStep {
            let agreed = min(history.suffix(readingsPerStep).min()!, .critical)
            if agreed > current, current < .shutdown {
                return CaptureDevice.SystemPressureState.Level.allCases[CaptureDevice.SystemPressureState.Level.allCases.firstIndex(of: current)! + 1]
            }
        }
        if current == .critical, history.count >= historyLength, history.allSatisfy({ $0 >= .critical }) { return .shutdown }
        let recent = history.suffix(8)
        if recent.count == 8, let highest = recent.max(), highest < current {
            // An interrupted camera comes back only once it is below critical: at critical it would be
            // interrupted again three seconds later.
            return current == .shutdown ? (highest <= .serious ? highest : current) : highest
        }
        return current
    }
}

/// A shared "one in N" for probes (Atomic cannot be captured by closures).
final class OneIn: Sendable {
    let value = Atomic<Int>(1)
}

final class FrameCounter: Sendable {
    let count = Atomic<Int>(0)
}

private final class CounterBox: Sendable {
    let counter = Atomic<Int>(0)
}

extension CaptureSession {
    /// The response to system pressure in force now (`.none` when stopped).
    public var pressureResponse: PressureResponse { runningGraph?.pressure.response ?? .none }

    /// Frame deliveries the running session held back because of system pressure since it started: each
    /// frame the camera's halved rate skipped, plus each frame a frame output was not given. 0 when stopped.
    public var pressureWithheldFrameCount: Int { runningGraph?.pressure.withheld.count.load(ordering: .relaxed) ?? 0 }
}
