import Foundation
import GStreamerKit
import Synchronization

/// The frame-stall watchdog: GStreamer's `watchdog` element sits right behind the camera's own element in
/// the video source bin and posts an error when no buffer passes for its timeout. A camera that stops
/// delivering without a word (a wedged driver, a USB camera whose firmware hangs, vivid dropping every
/// buffer) posts nothing itself: v4l2src just waits in poll() forever.
///
/// The element keeps watching after it fires: its timer is re-armed by the next buffer, so a camera that
/// stalls again is reported again. That next buffer is what `SourceWatch` reports as the end of the stall.
enum FrameStallWatchdog {
    /// The element's name inside a source bin; a stall is an error posted by an element of this name.
    static let elementName = "stall-watchdog"

    /// Whether GStreamer has the element here (gst-plugins-bad's debugutilsbad); without it, stalls go unseen.
    static let isAvailable: Bool = {
        let available = GStreamer.hasElement("watchdog")
        if !available {
            Log.session.warning("GStreamer's watchdog element (gst-plugins-bad) is missing: a camera that stops delivering frames will not be noticed")
        }
        return available
    }()

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

    /// The gst-launch fragment that goes right behind the camera's element ("" without the element).
    static func fragment(timeout: Duration) -> String {
        guard isAvailable else { return "" }
        return "watchdog name=\(elementName) timeout=\(max(1, milliseconds(timeout))) ! "
    }

    /// Whether a bus error is the watchdog saying no frame came (not a failure of the device).
    static func isStall(_ error: GStreamerError) -> Bool {
        guard let path = error.sourcePath, let last = path.split(separator: "/").last else { return false }
        return last.hasSuffix(":" + elementName)
    }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1000 + Int(duration.components.attoseconds / 1_000_000_000_000_000)
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

/// What the session watches on one running camera source, from its streaming thread: when frames come
/// again after a stall, how late they leave the camera (for system pressure), and how many the session lets
/// through under pressure. One buffer probe at the pad right behind the watchdog does all three.
final class SourceWatch: Sendable {
    let device: CaptureDevice
    /// The source's frame interval in nanoseconds.
    let frameInterval: UInt64
    private let stalled = Locked<Bool>(false)
    /// `stalled` as every frame reads it, without the lock; the lock orders a stall and the resume after it.
    private let mayBeStalled = Atomic<Bool>(false)
    private let onEvent: @Sendable (GraphEvent) -> Void
    /// Largest lateness seen since the last `takeFigures()`, in nanoseconds.
    private let worstLateness = Atomic<UInt64>(0)
    private let frames = Atomic<Int>(0)
    private let passed = Atomic<Int>(0)
    /// 1 lets every frame through, 2 every other one, 0 none (interrupted for pressure).
    let keepOneIn = Atomic<Int>(1)

    private let withheld: FrameCounter

    init(device: CaptureDevice, frameRate: Fraction, withheld: FrameCounter, onEvent: @escaping @Sendable (GraphEvent) -> Void) {
        self.device = device
        self.withheld = withheld
        frameInterval = frameRate.numerator > 0
            ? UInt64(1_000_000_000 * Double(frameRate.denominator) / Double(frameRate.numerator)) : 33_333_333
        self.onEvent = onEvent
    }

    private let probe = Locked<(pad: Pad, id: UInt)?>(nil)

    /// Installs the probe on the pad behind the watchdog (the caps filter's input), else on the bin's output.
    func install(on bin: Bin) {
        guard let pad = bin.element(named: "caps")?.staticPad("sink") ?? bin.staticPad("src") else { return }
        let id = pad.addProbe(.buffer) { [self] info in
            let count = frames.add(1, ordering: .relaxed).newValue
            // The pipeline's clock is GStreamer's system clock, CLOCK_MONOTONIC: read the same.
            if let clockTime = info.bufferClockTime.map(UInt64.init) {
                let monotonic = Self.monotonicNanoseconds()
                if monotonic > clockTime { worstLateness.raise(to: monotonic - clockTime) }
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
            return .ok
        }
        probe.withLock { $0 = (pad, id) }
    }

    /// Takes the probe off (the source left the graph; it may come back, with a new watch).
    func uninstall() {
        guard let (pad, id) = probe.withLock({ state in defer { state = nil }; return state }) else { return }
        pad.removeProbe(id)
    }

    /// The watchdog fired: reported once, until a frame passes again.
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

    /// The watch on the source inside which `message` was posted.
    func watch(of message: Message) -> SourceWatch? {
        watches.withLock { watches in watches.first { message.isFrom(inside: $0.key) }?.value }
    }

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

/// Test cameras that behave as if their driver hung: their frames stop before the watchdog, as a wedged
/// camera's do, until released. Only tests set this (a camera has no way to ask for it).
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
