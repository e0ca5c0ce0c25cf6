import Foundation
import GCapture
#if canImport(Glibc)
import Glibc
#endif

/// gcapture's CaptureMotionOutput against motion (Debian's motion 4.5.1, the classic Linux motion detector) on
/// real V4L2 cameras: vivid's webcam input inside ../shared/testbed/v4l2-vm, 640x480 at 25 fps (the largest rate
/// vivid's webcam offers at that size), each detector a child process of its own. With two vivid instances
/// (`--vivid-opts "n_devs=2 node_types=0x1,0x1 num_inputs=1,1 input_types=0x0,0x0"`) the two detectors run at the
/// same time, one per camera, the same picture on both, and which camera each gets alternates every round: under
/// TCG whatever else the host does shows up as the guest's CPU time, and this way it weighs on both alike (one
/// after the other, motion's CPU was 15 % of a core in a 5 s trial and 50-56 % over 20 s while the host was busy).
/// With one instance they run one after the other, alternating the order. Each run:
///
///   still scene   vivid's 75% colour bars, nothing moving (no OSD text, no movement); the detector starts,
///                 gets `warmUpSeconds` to open the camera and learn the background (detections then are
///                 counted as startup detections), then its CPU time (utime + stime of /proc/PID/stat: every
///                 thread of the process) is read over `seconds` of the same still scene (detections there
///                 are false detections)
///   the object    vivid's `show_square` control is set with VIDIOC_S_CTRL from here: a 128x128 green square
///                 (5.3 % of the picture) appears over the bars from the next frame vivid makes. Latency = the
///                 detector's first report on a FIFO − the moment the ioctl returned, in ms and in frames
///
/// How each reports: motion runs its `on_motion_detected` hook (fork, `/bin/sh -c 'echo … > FIFO'`); the engine
/// child writes to the same FIFO from `onMotionBegan` (the output's own queue). Either way this process stamps
/// the FIFO's line as it arrives (CLOCK_MONOTONIC). What motion's hook costs on its own (a shell started and
/// writing to the FIFO) is measured from here and printed: it is part of motion's latency, as it is of any
/// program that waits for motion's hook.
///
/// Contestants:
///   gcapture          a session at .vga640x480 (NV12 640x480@25) with one CaptureMotionOutput (its branch scales
///                     to 160x120 grey; defaults: sensitivity 0.5, minimum area 0.5 %, two frames to begin)
///   gcapture capture  the same session with a CaptureVideoDataOutput nobody reads instead: capturing only, the
///                     floor the motion output adds to
///   motion            `motion -n` with a generated config: 640x480@25 (YU12), the detection settings of Debian's
///                     /etc/motion/motion.conf (threshold 1500 changed pixels = 0.49 % of the picture, despeckle
///                     EedDl, minimum_motion_frames 1, noise level 32 tuned), no pictures, no movies, no web
///                     control, no stream: it only detects
///   motion 640x360    the same at vivid's next smaller webcam size, threshold scaled to the same 0.49 % (1125
///                     pixels): how motion's CPU follows the pixels it analyses. (vivid's smallest, 320x180, nearer
///                     gcapture's 160x120, motion refuses: its height must be a multiple of 8.)
///   motion unpaced    motion 640x480 with `framerate 100`: motion paces itself to `framerate` with sleeps of its
///                     own; unpaced it takes each frame as soon as the camera has it. Whether that pacing is what
///                     makes motion late: it is not (about as late, at more CPU: see docs/benchmarks.md)
///
/// Two at once, the groups are gcapture with motion 640x480, gcapture capturing only with motion 640x360, and
/// gcapture with motion unpaced; CPU ratios are taken within each group (over the same seconds), then their median.
enum MotionVersusBenchmark {
    static let childMode = "motion-vs-engine"
    static let frameRate = 25
    static let warmUpSeconds = 6.0
    static let detectionTimeoutSeconds = 5.0
    /// motion's `framerate` is the most frames it takes a second, paced by its own sleeps; above the camera's
    /// rate it waits for the camera alone.
    static let unpacedFrameRate = 100
    /// Debian's /etc/motion/motion.conf: 1500 changed pixels of 640x480.
    static let motionThresholdShare = 1500.0 / (640 * 480)

    enum Contestant: String, Codable, CaseIterable, Sendable {
        case gcapture, gcaptureCapture, motion, motionSmall, motionUnpaced

        var label: String {
            switch self {
            case .gcapture: "gcapture CaptureMotionOutput 640x480 (analyses 160x120)"
            case .gcaptureCapture: "gcapture capture only 640x480 (no motion)"
            case .motion: "motion 640x480"
            case .motionSmall: "motion 640x360"
            case .motionUnpaced: "motion 640x480 framerate 100 (unpaced)"
            }
        }

        var detects: Bool { self != .gcaptureCapture }
    }

    struct Run: Codable, Sendable {
        var contestant: Contestant
        var device: String
        var round: Int
        /// Which of the round's groups (the detectors that ran at once).
        var group: Int
        var cpuSeconds: Double
        var windowSeconds: Double
        var startupDetections: Int
        var stillDetections: Int
        /// nil: nothing within detectionTimeoutSeconds (or the contestant does not detect).
        var latencyMilliseconds: Double?
        /// The engine's frames analyzed over its whole run, per second of it (nil for motion).
        var analyzedFramesPerSecond: Double?

        var percentOfOneCore: Double { cpuSeconds / windowSeconds * 100 }
    }

    struct ContestantSummary: Codable, Sendable {
        var contestant: Contestant
        var label: String
        var percentOfOneCore: Double
        var cpuSeconds: Double
        var latencyMilliseconds: Double?
        var latencyFrames: Double?
        var detected: Int
        var runs: Int
        var falseDetections: Int
    }

    struct Result: Codable, Sendable {
        var devices: [String]
        /// Two cameras, the two detectors at once; else one after the other on one.
        var simultaneous: Bool
        var motionVersion: String
        var seconds: Double
        var rounds: Int
        var frameRate: Int
        var runs: [Run]
        var summaries: [ContestantSummary]
        /// `/bin/sh -c 'echo … > FIFO'` started from here → its line read: what motion's hook adds.
        var hookMilliseconds: Double
        /// Rounds in which gcapture's motion output reported before motion at 640x480, and the other way.
        var races: [Race]
        /// Each motion's CPU over gcapture's, the median of the rounds' ratios.
        var cpuRatios: [CPURatio]
        /// gcapture's motion output alone: its session's CPU minus capturing only, in percent of one core.
        var gcaptureMotionOnlyPercent: Double
    }

    /// Rounds in which gcapture's motion output reported the square before this motion, and the other way.
    struct Race: Codable, Sendable {
        var against: Contestant
        var gcaptureFirst: Int
        var motionFirst: Int
    }

    struct CPURatio: Codable, Sendable {
        var contestant: Contestant
        /// Its CPU seconds over gcapture's (with the motion output) in the same group when they ran at once,
        /// else over the median of the round's gcapture runs.
        var overGcapture: Double
    }

    // MARK: The parent

    /// vivid's capture nodes (sysfs name `vivid-NNN-vid-cap`), one per instance, in order.
    static func vividCameras() -> [String] {
        let nodes = (try? FileManager.default.contentsOfDirectory(atPath: "/sys/class/video4linux")) ?? []
        return nodes.filter { $0.hasPrefix("video") }
            .sorted { (Int($0.dropFirst(5)) ?? 0) < (Int($1.dropFirst(5)) ?? 0) }
            .filter { node in
                let name = (try? String(contentsOfFile: "/sys/class/video4linux/\(node)/name", encoding: .utf8)) ?? ""
                return name.hasPrefix("vivid-") && name.contains("vid-cap")
            }
            .map { "/dev/\($0)" }
    }

    static func run(seconds: Double, rounds: Int, progress: (String) -> Void) throws -> Result {
        let cameras = vividCameras()
        guard !cameras.isEmpty else {
            throw BenchmarkError.setup("no vivid camera here: run inside ../shared/testbed/v4l2-vm (best with "
                                       + "--vivid-opts \"\(pairedVividOptions)\")")
        }
        guard let motion = executableInPath("motion") else {
            throw BenchmarkError.setup("motion is not installed (apt install motion; scripts/install-deps.sh)")
        }
        // Two vivid instances: the two detectors run at once, one on each, so whatever else the machine does
        // (under TCG it shows up as the guest's CPU time) weighs on both alike. One: one after the other.
        let devices = Array(cameras.prefix(2))
        let controls = try devices.map {
            try VividControls(device: $0, requiring: ["test_pattern", "show_square", "osd_text_mode",
                                                      "horizontal_movement", "vertical_movement"])
        }
        // In memory: the VM's /tmp is the host's over 9p, which has no named pipes.
        let base = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = base + "/gcapture-motion-vs-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifos = try devices.indices.map { try EventFIFO(path: directory + "/events-\($0)") }

        let hook = try (0..<5).map { _ in try hookMilliseconds(fifos[0]) }
        let version = motionVersion()
        progress(String(format: "motion-vs: %@ (motion %@), %@, %d s still per run, motion's hook %.1f ms (median of 5)",
                        devices.joined(separator: " and "), version, devices.count > 1 ? "two detectors at once" : "one at a time",
                        Int(seconds), Statistics.median(hook)))

        var runs: [Run] = []
        for round in 1...rounds {
            // Each group runs at once, one contestant per camera; which camera and which group first alternate.
            var groups: [[Contestant]] = devices.count > 1
                ? [[.gcapture, .motion], [.gcaptureCapture, .motionSmall], [.gcapture, .motionUnpaced]]
                : Contestant.allCases.map { [$0] }
            if round % 2 == 0 { groups = groups.reversed().map { $0.reversed() } }
            for (group, contestants) in groups.enumerated() {
                let slots = contestants.enumerated().map { Slot(contestant: $1, device: devices[$0], controls: controls[$0], fifo: fifos[$0]) }
                for run in try measure(slots, round: round, group: group, seconds: seconds, motion: motion, directory: directory) {
                    runs.append(run)
                    progress(String(format: "motion-vs: round %d/%d  %@ %@  %.2f %% of one core, %@, %d false, %d at startup",
                                    round, rounds, run.device, run.contestant.label.padding(toLength: 56, withPad: " ", startingAt: 0),
                                    run.percentOfOneCore,
                                    run.contestant.detects ? run.latencyMilliseconds.map { String(format: "detected in %.0f ms", $0) } ?? "NOT detected" : "(no detection)",
                                    run.stillDetections, run.startupDetections))
                }
            }
        }

        let summaries = Contestant.allCases.map { contestant -> ContestantSummary in
            let own = runs.filter { $0.contestant == contestant }
            let latencies = own.compactMap(\.latencyMilliseconds)
            let latency = latencies.isEmpty ? nil : Statistics.median(latencies)
            return ContestantSummary(contestant: contestant, label: contestant.label,
                                     percentOfOneCore: Statistics.median(own.map(\.percentOfOneCore)),
                                     cpuSeconds: Statistics.median(own.map(\.cpuSeconds)),
                                     latencyMilliseconds: latency, latencyFrames: latency.map { $0 * Double(frameRate) / 1000 },
                                     detected: latencies.count, runs: own.count,
                                     falseDetections: own.map(\.stillDetections).reduce(0, +))
        }
        func summary(_ contestant: Contestant) -> ContestantSummary { summaries.first { $0.contestant == contestant }! }
        /// gcapture's run beside `other` (at once), else the round's gcapture runs.
        func partners(_ other: Run) -> [Run] {
            let round = runs.filter { $0.round == other.round && $0.contestant == .gcapture }
            let beside = round.filter { $0.group == other.group }
            return beside.isEmpty ? round : beside
        }
        let motions: [Contestant] = [.motion, .motionUnpaced, .motionSmall]
        let races = motions.filter(\.detects).map { against -> Race in
            var race = Race(against: against, gcaptureFirst: 0, motionFirst: 0)
            for theirs in runs where theirs.contestant == against {
                let mine = partners(theirs).compactMap(\.latencyMilliseconds)
                let ours = mine.isEmpty ? Double.infinity : Statistics.median(mine)
                let their = theirs.latencyMilliseconds ?? .infinity
                if ours < their { race.gcaptureFirst += 1 } else if their < ours { race.motionFirst += 1 }
            }
            return race
        }
        let ratios = motions.compactMap { contestant -> CPURatio? in
            let values = runs.filter { $0.contestant == contestant }.compactMap { theirs -> Double? in
                let ours = partners(theirs).map(\.cpuSeconds)
                return ours.isEmpty ? nil : theirs.cpuSeconds / Statistics.median(ours)
            }
            return values.isEmpty ? nil : CPURatio(contestant: contestant, overGcapture: Statistics.median(values))
        }
        return Result(devices: devices, simultaneous: devices.count > 1, motionVersion: version, seconds: seconds, rounds: rounds,
                      frameRate: frameRate, runs: runs, summaries: summaries, hookMilliseconds: Statistics.median(hook),
                      races: races, cpuRatios: ratios,
                      gcaptureMotionOnlyPercent: summary(.gcapture).percentOfOneCore - summary(.gcaptureCapture).percentOfOneCore)
    }

    /// `--vivid-opts` for two webcams, the two detectors at once.
    static let pairedVividOptions = "n_devs=2 node_types=0x1,0x1 num_inputs=1,1 input_types=0x0,0x0"

    private struct Slot {
        var contestant: Contestant
        var device: String
        var controls: VividControls
        var fifo: EventFIFO
    }

    /// Detectors started together, one per camera: the still scene, their CPU over the same `seconds` of it,
    /// then the square on every camera at once and each one's first report.
    private static func measure(_ slots: [Slot], round: Int, group: Int, seconds: Double, motion: String,
                                directory: String) throws -> [Run] {
        for slot in slots {
            try slot.controls.set("show_square", 0)
            try slot.controls.set("test_pattern", 0)
            try slot.controls.set("osd_text_mode", 2)
            try slot.controls.set("horizontal_movement", 3)
            try slot.controls.set("vertical_movement", 3)
            slot.fifo.drain()
        }
        var children: [RunningChild] = []
        var stopped = false
        defer { if !stopped { for child in children { child.stop() } } }
        let logs = slots.enumerated().map { directory + "/\($1.contestant.rawValue)-\(round)-\(group)-\($0).log" }
        for (index, slot) in slots.enumerated() {
            switch slot.contestant {
            case .gcapture, .gcaptureCapture:
                children.append(try RunningChild(ChildProcess.currentExecutable,
                                                 ["child", childMode, "--device", slot.device, "--fifo", slot.fifo.path]
                                                    + (slot.contestant == .gcaptureCapture ? ["--capture-only"] : []),
                                                 output: logs[index]))
            case .motion, .motionSmall, .motionUnpaced:
                let config = directory + "/motion-\(index).conf"
                let (width, height) = slot.contestant == .motionSmall ? (640, 360) : (640, 480)
                try motionConfig(device: slot.device, width: width, height: height,
                                 frameRate: slot.contestant == .motionUnpaced ? unpacedFrameRate : frameRate,
                                 directory: directory, fifo: slot.fifo.path)
                    .write(toFile: config, atomically: true, encoding: .utf8)
                children.append(try RunningChild(motion, ["-n", "-c", config], output: logs[index]))
            }
        }
        func failure(_ index: Int, _ what: String) -> BenchmarkError {
            let tail = (try? String(contentsOfFile: logs[index], encoding: .utf8))?.split(separator: "\n").suffix(15).joined(separator: "\n") ?? ""
            return .child("\(slots[index].contestant.label) on \(slots[index].device): \(what)\n\(tail)")
        }
        let fifos = slots.map(\.fifo)

        let startup = EventFIFO.arrivals(fifos, until: Monotonic.now + UInt64(warmUpSeconds * 1e9))
        var cpuBefore: [Double] = []
        for (index, child) in children.enumerated() {
            guard child.isRunning, let cpu = child.cpuSeconds else { throw failure(index, "ended during its warm-up") }
            cpuBefore.append(cpu)
        }
        let windowStart = Monotonic.now
        let still = EventFIFO.arrivals(fifos, until: windowStart + UInt64(seconds * 1e9))
        var cpuAfter: [Double] = []
        for (index, child) in children.enumerated() {
            guard let cpu = child.cpuSeconds else { throw failure(index, "ended during the still scene") }
            cpuAfter.append(cpu)
        }
        let windowEnd = Monotonic.now

        // The square on every camera, the order turned each round; each latency from its own camera's change.
        var changed = [UInt64](repeating: 0, count: slots.count)
        for index in round % 2 == 1 ? Array(slots.indices) : slots.indices.reversed() {
            try slots[index].controls.set("show_square", 1)
            changed[index] = Monotonic.now
        }
        let detecting = slots.map(\.contestant.detects)
        let seen = EventFIFO.arrivals(fifos, until: changed.max()! + UInt64(detectionTimeoutSeconds * 1e9)) { arrivals in
            zip(arrivals, detecting).allSatisfy { !$1 || !$0.isEmpty }
        }
        for slot in slots { try slot.controls.set("show_square", 0) }

        stopped = true
        let ended = children.map { $0.stop() }
        var runs: [Run] = []
        for (index, slot) in slots.enumerated() {
            var analyzed: Double?
            if slot.contestant == .gcapture || slot.contestant == .gcaptureCapture {
                guard ended[index] == 0, let text = try? String(contentsOfFile: logs[index], encoding: .utf8),
                      let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
                      let report = try? JSONDecoder().decode(ChildReport.self, from: Data(line.utf8)) else {
                    throw failure(index, "ended with \(ended[index].map(String.init) ?? "a signal") and no report")
                }
                analyzed = slot.contestant == .gcapture ? Double(report.analyzedFrames) / report.seconds : nil
            }
            runs.append(Run(contestant: slot.contestant, device: slot.device, round: round, group: group,
                            cpuSeconds: cpuAfter[index] - cpuBefore[index],
                            windowSeconds: Monotonic.seconds(from: windowStart, to: windowEnd),
                            startupDetections: startup[index].count, stillDetections: still[index].count,
                            latencyMilliseconds: slot.contestant.detects
                                ? seen[index].first.map { Monotonic.milliseconds(from: changed[index], to: $0) } : nil,
                            analyzedFramesPerSecond: analyzed))
        }
        return runs
    }

    /// motion only detecting: Debian's detection settings, the threshold as the same share of the picture.
    static func motionConfig(device: String, width: Int, height: Int, frameRate: Int, directory: String, fifo: String) -> String {
        let threshold = Int((motionThresholdShare * Double(width * height)).rounded())
        return """
            daemon off
            setup_mode off
            log_file \(directory)/motion-\(device.split(separator: "/").last ?? "")-\(width)x\(height)-\(frameRate).log
            log_level 6
            target_dir \(directory)
            video_device \(device)
            width \(width)
            height \(height)
            framerate \(frameRate)
            emulate_motion off
            threshold \(threshold)
            despeckle_filter EedDl
            minimum_motion_frames 1
            event_gap 60
            pre_capture 0
            post_capture 0
            picture_output off
            movie_output off
            snapshot_interval 0
            webcontrol_port 0
            stream_port 0
            on_motion_detected echo motion > \(fifo)

            """
    }

    /// The shell motion's hook starts, started from here: spawn → its line on the FIFO.
    private static func hookMilliseconds(_ fifo: EventFIFO) throws -> Double {
        fifo.drain()
        let started = Monotonic.now
        let shell = try RunningChild("/bin/sh", ["-c", "echo hook > \(fifo.path)"], output: "/dev/null")
        let arrived = fifo.arrivals(until: started + 5_000_000_000, first: true).first
        shell.stop()
        guard let arrived else { throw BenchmarkError.setup("the shell never wrote to \(fifo.path)") }
        return Monotonic.milliseconds(from: started, to: arrived)
    }

    private static func motionVersion() -> String {
        let query = Process()
        query.executableURL = URL(fileURLWithPath: "/usr/bin/dpkg-query")
        query.arguments = ["-W", "-f", "${Version}", "motion"]
        let output = Pipe()
        query.standardOutput = output
        query.standardError = FileHandle.nullDevice
        guard (try? query.run()) != nil else { return "?" }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        query.waitUntilExit()
        return text.isEmpty ? "?" : text
    }

    private static func executableInPath(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return (path.split(separator: ":") + ["/usr/bin"]).map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    // MARK: The table

    static func table(_ result: Result) -> String {
        var lines = [String(format: "gcapture vs motion %@ (vivid webcam %@ at %d fps: still 75%% colour bars, then a 128x128 "
                            + "square; %.0f s still per run, %@, median of %d, alternating)",
                            result.motionVersion, result.devices.joined(separator: " and "), result.frameRate, result.seconds,
                            result.simultaneous ? "two at once, one per camera" : "one detector at a time", result.rounds)]
        for run in result.runs {
            let latency = run.contestant.detects
                ? run.latencyMilliseconds.map { String(format: "detected in %4.0f ms (%.1f frames)", $0, $0 * Double(result.frameRate) / 1000) } ?? "NOT detected"
                : ""
            lines.append(String(format: "  round %d  %@ %@ %5.2f %% of one core  %@%@%@", run.round, run.device,
                                run.contestant.label.padding(toLength: 56, withPad: " ", startingAt: 0), run.percentOfOneCore,
                                latency, run.stillDetections > 0 ? "  \(run.stillDetections) false" : "",
                                run.analyzedFramesPerSecond.map { String(format: "  %.1f frames analyzed a second", $0) } ?? ""))
        }
        lines.append("  median:")
        for summary in result.summaries {
            let latency = summary.contestant.detects
                ? summary.latencyMilliseconds.map { String(format: "latency %4.0f ms = %.1f frames (%d/%d detected)", $0, summary.latencyFrames ?? 0,
                                                           summary.detected, summary.runs) } ?? "never detected"
                : ""
            lines.append(String(format: "  %@ %5.2f %% of one core  %@%@", summary.label.padding(toLength: 65, withPad: " ", startingAt: 0),
                                summary.percentOfOneCore, latency,
                                summary.contestant.detects ? "  false detections \(summary.falseDetections)" : ""))
        }
        lines.append("  CPU over gcapture's (median of the rounds' ratios): "
                     + result.cpuRatios.map { String(format: "%@ %.2fx", $0.contestant.label, $0.overGcapture) }.joined(separator: ", "))
        lines.append(String(format: "  gcapture's motion output alone (minus capturing only): %.2f %% of one core", result.gcaptureMotionOnlyPercent))
        for race in result.races {
            lines.append(String(format: "  first to report the square, gcapture against %@: gcapture in %d, motion in %d of %d",
                                race.against.label, race.gcaptureFirst, race.motionFirst, race.gcaptureFirst + race.motionFirst))
        }
        lines.append(String(format: "  motion's hook alone (a shell started, writing to the FIFO), part of its latency: %.1f ms", result.hookMilliseconds))
        return lines.joined(separator: "\n")
    }

    // MARK: The engine's child

    struct ChildReport: Codable, Sendable {
        var seconds: Double
        var analyzedFrames: Int
        var events: Int
    }

    /// `gcapture-bench child motion-vs-engine --device D --fifo F [--capture-only]`: the V4L2 camera at .vga640x480
    /// with a CaptureMotionOutput (a line on F for each motion that begins), or a CaptureVideoDataOutput nobody
    /// reads; runs until SIGTERM, then prints its report.
    static func childMain(_ arguments: [String]) async -> Int32 {
        guard let device = arguments.value(after: "--device"), let fifo = arguments.value(after: "--fifo") else {
            printError("child \(childMode): needs --device and --fifo")
            return 2
        }
        let captureOnly = arguments.contains("--capture-only")
        // SIGTERM, from the moment the child starts, ends the run (the parent stops it so).
        signal(SIGTERM, SIG_IGN)
        let terminate = DispatchSource.makeSignalSource(signal: SIGTERM, queue: DispatchQueue(label: "motion-vs.signal"))
        let (terminated, terminating) = AsyncStream<Void>.makeStream()
        terminate.setEventHandler {
            terminating.yield()
            terminating.finish()
        }
        terminate.resume()
        defer { terminate.cancel() }
        return await ChildProcess.serve(childMode) {
            let fd = open(fifo, O_WRONLY | O_NONBLOCK)
            guard fd >= 0 else { throw BenchmarkError.setup("cannot open \(fifo): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            let session = CaptureSession(name: childMode)
            let motion = CaptureMotionOutput()
            let events = Locked(0)
            motion.onMotionBegan = { _ in
                events.withLock { $0 += 1 }
                let line = Array("gcapture\n".utf8)
                _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
            session.beginConfiguration()
            try session.add(CaptureDeviceInput(device: try CaptureDevice.requireDevice(withUniqueID: device)))
            try session.add(captureOnly ? CaptureVideoDataOutput() : motion)
            session.sessionPreset = .vga640x480
            try session.commitAndWait()
            try await session.start()
            let started = Date()
            for await _ in terminated { break }
            let elapsed = Date().timeIntervalSince(started)
            await session.stop()
            return ChildReport(seconds: elapsed, analyzedFrames: motion.analyzedFrameCount, events: events.withLock { $0 })
        }
    }
}

/// A named pipe the detectors write a line to when they see motion; read here without blocking, each line stamped
/// as it arrives. Opened read-write, so writers can always open it and it never reads end of file.
final class EventFIFO {
    let path: String
    fileprivate let fd: Int32

    init(path: String) throws {
        self.path = path
        unlink(path)
        guard mkfifo(path, 0o666) == 0 else { throw BenchmarkError.setup("mkfifo \(path): \(String(cString: strerror(errno)))") }
        fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw BenchmarkError.setup("cannot open \(path): \(String(cString: strerror(errno)))") }
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// Throws away whatever is waiting.
    func drain() { _ = readLines() }

    /// The arrival time of each line until `deadline` (CLOCK_MONOTONIC ns), or until the first one when `first`.
    func arrivals(until deadline: UInt64, first: Bool = false) -> [UInt64] {
        Self.arrivals([self], until: deadline) { first && !$0[0].isEmpty }[0]
    }

    /// The arrival times of each FIFO's lines until `deadline`, or until `done` says so.
    static func arrivals(_ fifos: [EventFIFO], until deadline: UInt64,
                         done: ([[UInt64]]) -> Bool = { _ in false }) -> [[UInt64]] {
        var stamps = [[UInt64]](repeating: [], count: fifos.count)
        while !done(stamps) {
            let now = Monotonic.now
            guard now < deadline else { break }
            var pollers = fifos.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&pollers, nfds_t(pollers.count), Int32(min((deadline - now) / 1_000_000 + 1, 1000)))
            guard ready > 0 else { continue }
            let stamp = Monotonic.now
            for (index, poller) in pollers.enumerated() where poller.revents & Int16(POLLIN) != 0 {
                stamps[index] += Array(repeating: stamp, count: fifos[index].readLines())
            }
        }
        return stamps
    }

    /// Complete lines read now.
    fileprivate func readLines() -> Int {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var lines = 0
        while true {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { break }
            lines += buffer[..<count].filter { $0 == UInt8(ascii: "\n") }.count
        }
        return lines
    }
}

/// A program started with posix_spawn and left running: its CPU time read from /proc while it runs, and stopped
/// with SIGTERM (SIGKILL after a grace period). stdout and stderr go to `output`.
struct RunningChild {
    let pid: pid_t

    init(_ executable: String, _ arguments: [String], output: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO)
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        let (pid, spawned) = ChildProcess.spawn(executable, arguments, actions: &actions)
        guard spawned == 0 else { throw BenchmarkError.child("cannot start \(executable): \(String(cString: strerror(spawned)))") }
        self.pid = pid
    }

    /// Not yet exited (a zombie counts as exited).
    var isRunning: Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let state = stat.split(separator: ")").last?.split(separator: " ").first else { return false }
        return state != "Z" && state != "X"
    }

    /// utime + stime of every thread of the process so far (/proc/PID/stat fields 14 and 15), in seconds.
    var cpuSeconds: Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.split(separator: ")").last else { return nil }
        // Fields from 3 (state) on; utime is field 14, stime 15.
        let fields = afterName.split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGTERM, then SIGKILL after `grace` seconds; reaps it. Its exit status, or nil when a signal ended it.
    @discardableResult
    func stop(grace: Double = 10) -> Int32? {
        kill(pid, SIGTERM)
        let deadline = Monotonic.now + UInt64(grace * 1e9)
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { break }
            if reaped < 0, errno != EINTR { return nil }
            if Monotonic.now >= deadline {
                kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0, errno == EINTR {}
                return nil
            }
            usleep(10_000)
        }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : nil
    }
}
