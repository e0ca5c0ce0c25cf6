import Foundation
import GStreamerKit
import Synchronization

/// The frame-stall watchdog: a camera that stops delivering without a word (a wedged driver, a USB camera
/// whose firmware hangs, vivid dropping every buffer) posts nothing itself: v4l2src just waits in poll()
/// forever. Each camera's `SourceWatch` notes when its last frame passed; the session's pressure tick
/// (SessionPressure on SystemPressureMonitor's shared timer, every 250 ms while the graph plays) asks each
/// watch whether that was longer ago than its interval. GStreamer's `watchdog` element did this before, at a price every frame paid: it
/// destroyed and re-armed a GSource for each buffer and woke its own thread to do so (about 60 context
/// switches a second at 30 fps), and it needed gst-plugins-bad.
///
/// The watch keeps watching after it fires: the next frame ends the stall, and a camera that stalls again
/// is reported again.
enum FrameStallWatchdog {
    /// The default interval: ten frame intervals, and never under one second.
    ///
    /// Ten intervals because cameras do skip frames for good reasons (auto-exposure lengthening the
    /// exposure in the dark halves or quarters the frame rate; a driver drops a few buffers when the queue
    /// runs dry), and that must not read as a stall; one second as a floor because at 30-60 fps ten
    /// intervals is 166-333 ms, which a busy machine's scheduler can exceed (that is system pressure, which
    /// has its own response, not a dead camera). A 5 fps camera gets 2 s.
    static func defaultTimeout(frameRate: Fraction) -> Duration {
        guard frameRate.numerator > 0 else { return .seconds(1) }
        let tenFrames = 10.0 * Double(frameRate.denominator) / Double(frameRate.numerator)
        return .milliseconds(Int((max(1.0, tenFrames) * 1000).rounded()))
    }
}

extension CaptureDeviceInput {
    /// The frame-stall timeout the app set on the input of `device` among `inputs` (nil: from the frame rate).
    /// By stable id: a camera found again after an interruption is another CaptureDevice value.
    static func frameStallTimeout(of device: CaptureDevice, among inputs: [CaptureInput]) -> Duration? {
        inputs.lazy.compactMap { $0 as? CaptureDeviceInput }.first { $0.device.uniqueID == device.uniqueID }?.frameStallTimeout
    }

    /// The interval for a source delivering at `frameRate`.
    func effectiveFrameStallTimeout(frameRate: Fraction) -> Duration {
        frameStallTimeout ?? FrameStallWatchdog.defaultTimeout(frameRate: frameRate)
    }
}

/// What the session watches on one running camera source, from its streaming thread: when its last frame
/// passed (a stall is a long silence, and the next frame its end), how late frames leave the camera (for
/// system pressure), and how many the session lets through under pressure. One buffer probe at the pad right
/// behind the camera's element does all of it.
final class SourceWatch: Sendable {
    let device: CaptureDevice
    /// The source's frame interval in nanoseconds.
    let frameInterval: UInt64
    /// How long a silence is a stall, in nanoseconds; 0 for a source that is not judged so (a filler).
    private let stallTimeout: UInt64
    /// When the last frame passed (CLOCK_MONOTONIC nanoseconds); 0 before the first, which the start's (or a
    /// switch's) own deadline waits for: a camera slow to give its first frame is not stalled.
    private let lastFrame = Atomic<UInt64>(0)
    private let stalled = Locked<Bool>(false)
    /// `stalled` as every frame reads it, without the lock; the lock orders a stall and the resume after it.
    private let mayBeStalled = Atomic<Bool>(false)
    private let onEvent: @Sendable (GraphEvent) -> Void
    /// Largest lateness seen since the last `takeFigures()`, in nanoseconds.
    private let worstLateness = Atomic<UInt64>(0)
    private let frames = Atomic<Int>(0)
    private let passed = Atomic<Int>(0)
    /// The presentation time of the last frame let through; `ClockTime.none` before the first.
    private let lastPassedTime = Atomic<UInt64>(UInt64(ClockTime.none))
    /// 1 lets every frame through, 2 every other one, 0 none (interrupted for pressure).
    let keepOneIn = Atomic<Int>(1)

    private let withheld: FrameCounter

    init(device: CaptureDevice, frameRate: Fraction, stallTimeout: Duration?, withheld: FrameCounter,
         onEvent: @escaping @Sendable (GraphEvent) -> Void) {
        self.device = device
        self.withheld = withheld
        self.stallTimeout = stallTimeout.map { UInt64(max(1_000_000, $0.inNanoseconds)) } ?? 0
        frameInterval = frameRate.numerator > 0
            ? UInt64(1_000_000_000 * Double(frameRate.denominator) / Double(frameRate.numerator)) : 33_333_333
        self.onEvent = onEvent
    }

    private let probe = Locked<(pad: Pad, id: UInt)?>(nil)

    /// Installs the probe on the pad behind the camera's element (the caps filter's input), else on the bin's
    /// output.
    func install(on bin: Bin) {
        guard let pad = bin.element(named: "caps")?.staticPad("sink") ?? bin.staticPad("src") else { return }
        let id = pad.addProbe(.buffer) { [self] info in
            let count = frames.add(1, ordering: .relaxed).newValue
            // The pipeline's clock is GStreamer's system clock, CLOCK_MONOTONIC: read the same.
            let monotonic = Self.monotonicNanoseconds()
            lastFrame.store(monotonic, ordering: .relaxed)
            if let clockTime = info.bufferClockTime.map(UInt64.init), monotonic > clockTime {
                worstLateness.raise(to: monotonic - clockTime)
            }
            if mayBeStalled.load(ordering: .acquiring) {
                stalled.withLock { isStalled in
                    guard isStalled else { return }
                    isStalled = false
                    mayBeStalled.store(false, ordering: .releasing)
                    onEvent(.sourceResumed(device: device))
                }
            }
            let keep = keepOneIn.load(ordering: .relaxed)
            guard keep > 0, count % keep == 0 else {
                withheld.count.add(1, ordering: .relaxed)
                return .drop
            }
            passed.add(1, ordering: .relaxed)
            if let time = info.bufferPTS { lastPassedTime.store(UInt64(time), ordering: .relaxed) }
            return .ok
        }
        probe.withLock { $0 = (pad, id) }
    }

    /// The presentation time of the last frame the watch let through, nil before the first: where a camera
    /// switched to must begin (SourceCut).
    var lastDeliveredTime: ClockTime? {
        let time = lastPassedTime.load(ordering: .relaxed)
        return time == UInt64(ClockTime.none) ? nil : ClockTime(time)
    }

    /// Takes the probe off (the source left the graph; it may come back, with a new watch).
    func uninstall() {
        guard let (pad, id) = probe.withLock({ state in defer { state = nil }; return state }) else { return }
        pad.removeProbe(id)
    }

    /// Reports the camera stalled when its last frame passed longer than its interval ago (once, until a
    /// frame passes again). `now`: CLOCK_MONOTONIC nanoseconds.
    func checkForStall(now: UInt64) {
        let last = lastFrame.load(ordering: .relaxed)
        guard stallTimeout > 0, last > 0, now > last, now - last >= stallTimeout,
              !mayBeStalled.load(ordering: .acquiring) else { return }
        markStalled()
    }

    /// Reported once, until a frame passes again.
    func markStalled() {
        stalled.withLock { isStalled in
            guard !isStalled else { return }
            isStalled = true
            mayBeStalled.store(true, ordering: .releasing)
            onEvent(.sourceStalled(device: device))
        }
    }

    var isStalled: Bool { stalled.withLock { $0 } }

    /// Frames seen, frames let through and the worst lateness since the last call.
    func takeFigures() -> (frames: Int, passed: Int, worstLateness: UInt64) {
        (frames.exchange(0, ordering: .relaxed), passed.exchange(0, ordering: .relaxed),
         worstLateness.exchange(0, ordering: .relaxed))
    }

    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}

/// The watches on a graph's running camera sources, by their source bin's path: changed on the session queue,
/// read by the bus handler (which watch a stall message is about) and by system pressure.
final class SourceWatches: Sendable {
    private let watches = Locked<[String: SourceWatch]>([:])
    func add(_ watch: SourceWatch, on bin: Bin) {
        watch.install(on: bin)
        watches.withLock { $0[bin.path] = watch }
    }

    func remove(at path: String) {
        watches.withLock { $0.removeValue(forKey: path) }?.uninstall()
    }

    /// A watch's probe holds the watch and the watch its pad: both must go before the graph can.
    func removeAll() {
        for watch in watches.withLock({ watches in defer { watches.removeAll() }; return Array(watches.values) }) {
            watch.uninstall()
        }
    }

    /// Asks every watch whether its camera has been silent too long: on the tick of the session's pressure
    /// timer (SessionPressure), which runs only while the graph plays.
    func checkForStalls() {
        let now = SourceWatch.monotonicNanoseconds()
        for watch in watches.withLock({ Array($0.values) }) { watch.checkForStall(now: now) }
    }

    /// The watch on the source bin at `path`.
    func watch(at path: String) -> SourceWatch? { watches.withLock { $0[path] } }

    /// The camera's watch (a graph has one camera source at a time, two only during a switch).
    var camera: SourceWatch? { watches.withLock { $0.values.first } }
}

extension Atomic where Value == UInt64 {
    fileprivate func raise(to value: UInt64) {
        var current = load(ordering: .relaxed)
        while value > current {
            let (exchanged, original) = compareExchange(expected: current, desired: value, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}

/// Test cameras that behave as if their driver hung: their frames stop before the camera's watch, as a
/// wedged camera's do, until released. Only tests set this (a camera has no way to ask for it).
enum TestCameraStalls {
    private static let stalled = Locked<Set<String>>([])
    /// How many are stalled: every test camera frame reads it, and only while one is stalled do frames pay
    /// for the lock and the set.
    private static let stalledCount = Atomic<Int>(0)

    static func set(_ uniqueID: String, stalled isStalled: Bool) {
        stalled.withLock { set in
            if isStalled { set.insert(uniqueID) } else { set.remove(uniqueID) }
            stalledCount.store(set.count, ordering: .releasing)
        }
    }

    static func isStalled(_ uniqueID: String) -> Bool {
        stalledCount.load(ordering: .acquiring) > 0 && stalled.withLock { $0.contains(uniqueID) }
    }

    /// The probe that swallows a stalled test camera's frames, on its videotestsrc's output.
    static func install(on bin: Bin, uniqueID: String) {
        guard let pad = bin.element(named: "camera")?.staticPad("src") else { return }
        pad.addProbe(.buffer) { _ in isStalled(uniqueID) ? .drop : .ok }
    }
}
