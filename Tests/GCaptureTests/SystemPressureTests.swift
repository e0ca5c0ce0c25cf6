import Foundation
import GStreamerKit
@testable import GCapture
import XCTest

/// A CPU cgroup with a quota: the processes put in it get `percent` of one CPU, and no more however idle
/// the machine is. cgroup v2's cpu.max where the cpu controller is there, else v1's CFS quota.
struct CPUQuotaGroup {
    let directory: String
    let procsFile: String

    init(percent: Int) throws {
        let name = "gcapture-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        let v2 = "/sys/fs/cgroup"
        let v2Controllers = (try? String(contentsOfFile: v2 + "/cgroup.controllers", encoding: .utf8)) ?? ""
        if v2Controllers.split(separator: " ").contains(where: { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "cpu" }) {
            directory = v2 + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try "\(percent * 1000) 100000".write(toFile: directory + "/cpu.max", atomically: false, encoding: .utf8)
        } else if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") {
            directory = "/sys/fs/cgroup/cpu/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try "100000".write(toFile: directory + "/cpu.cfs_period_us", atomically: false, encoding: .utf8)
            try "\(percent * 1000)".write(toFile: directory + "/cpu.cfs_quota_us", atomically: false, encoding: .utf8)
        } else {
            throw TestEnvironment.missing("no cgroup cpu controller here (neither v2 cpu.max nor v1 cpu.cfs_quota_us)")
        }
        procsFile = directory + "/cgroup.procs"
    }

    /// Runs a program inside the group from its first instruction: a shell joins it, then becomes the program.
    var launcher: [String] { ["/bin/sh", "-c", "echo $$ > \(procsFile) && exec \"$0\" \"$@\""] }

    /// Periods in which the group was throttled, as the kernel counted them.
    var throttledPeriods: Int? {
        guard let stat = try? String(contentsOfFile: directory + "/cpu.stat", encoding: .utf8) else { return nil }
        return stat.split(separator: "\n").first { $0.hasPrefix("nr_throttled") }.flatMap { Int($0.split(separator: " ")[1]) }
    }

    func remove() { rmdir(directory) }
}

final class SystemPressureTests: XCTestCase {
    /// The session's process starved of CPU (a fifth of one core for a 1080p camera with sensor noise):
    /// the pressure level rises, and the session degrades in steps, frame outputs first, before anything is
    /// interrupted; the CLI says so as JSON events.
    func testStarvingTheProcessRaisesThePressureAndDegradesBeforeInterrupting() throws {
        let group: CPUQuotaGroup
        do { group = try CPUQuotaGroup(percent: 20) } catch let error as CocoaError {
            throw TestEnvironment.missing("cannot make a cpu cgroup here: \(error.localizedDescription)")
        }
        defer { group.remove() }
        let result = try runProduct("gcapture", ["frames", "--camera", "test", "--preset", "hd1920x1080", "--noise", "8",
                                                 "--duration", "10", "--json"],
                                    launcher: group.launcher, timeout: 60)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertGreaterThan(group.throttledPeriods ?? 0, 0, "the quota really held the process back")
        let events = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let pressure = events.filter { $0["event"] as? String == "systemPressure" }
        let levels = pressure.compactMap { ($0["level"] as? String).flatMap(CaptureDevice.SystemPressureState.Level.init) }
        let responses = pressure.compactMap { $0["response"] as? String }
        print("pressure under a 20% CPU quota: " + zip(levels, responses).map { "\($0.rawValue)/\($1)" }.joined(separator: " → "))
        XCTAssertGreaterThanOrEqual(levels.max() ?? .nominal, .serious, "\(result.stdout)")
        // Degradation in steps: frame outputs first; the frame rate only after; an interruption only after both.
        let firstResponse = responses.first { $0 != "none" }
        XCTAssertEqual(firstResponse, "fewerFramesToOutputs", "\(responses)")
        if let reduced = responses.firstIndex(of: "reducedFrameRate") {
            XCTAssertLessThan(try XCTUnwrap(responses.firstIndex(of: "fewerFramesToOutputs")), reduced)
        }
        if let interrupted = responses.firstIndex(of: "interrupted") {
            XCTAssertLessThan(try XCTUnwrap(responses.firstIndex(of: "reducedFrameRate")), interrupted)
        }
        XCTAssertTrue(zip(levels, levels.dropFirst()).allSatisfy { $1 <= $0 || Self.rank($1) == Self.rank($0) + 1 },
                      "the level rises one step at a time: \(levels)")
        let finished = try XCTUnwrap(events.last { $0["event"] as? String == "finished" })
        XCTAssertGreaterThan(finished["withheldForPressure"] as? Int ?? 0, 0, "frames were really held back: \(finished)")
    }

    /// The same command with the CPU it needs: nothing is degraded (a busy machine alone may say fair).
    func testAnUnstarvedSessionIsNotDegraded() throws {
        let result = try runProduct("gcapture", ["frames", "--camera", "test", "--preset", "vga640x480", "--duration", "4", "--json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let events = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let responses = events.filter { $0["event"] as? String == "systemPressure" }.compactMap { $0["response"] as? String }
        XCTAssertTrue(responses.allSatisfy { $0 == "none" }, "\(result.stdout)")
        let finished = try XCTUnwrap(events.last { $0["event"] as? String == "finished" })
        XCTAssertEqual(finished["withheldForPressure"] as? Int, 0)
    }

    private static func rank(_ level: CaptureDevice.SystemPressureState.Level) -> Int {
        CaptureDevice.SystemPressureState.Level.allCases.firstIndex(of: level)!
    }

    func testTheLevelRisesOneStepPerFourReadingsAndFallsAfterEightLower() {
        typealias Level = CaptureDevice.SystemPressureState.Level
        XCTAssertEqual(SessionPressure.nextLevel(after: .nominal, history: [.critical, .critical, .critical]), .nominal,
                       "less than a second is a hiccup")
        XCTAssertEqual(SessionPressure.nextLevel(after: .nominal, history: [.critical, .fair, .critical, .critical]), .fair)
        XCTAssertEqual(SessionPressure.nextLevel(after: .fair, history: [.critical, .fair, .critical, .critical]), .fair)
        XCTAssertEqual(SessionPressure.nextLevel(after: .serious, history: Array(repeating: .shutdown, count: 4)), .critical)
        XCTAssertEqual(SessionPressure.nextLevel(after: .critical, history: Array(repeating: .critical, count: 11)), .critical)
        XCTAssertEqual(SessionPressure.nextLevel(after: .critical, history: Array(repeating: .critical, count: 12)), .shutdown)
        XCTAssertEqual(SessionPressure.nextLevel(after: .serious, history: Array(repeating: .fair, count: 7)), .serious)
        XCTAssertEqual(SessionPressure.nextLevel(after: .serious, history: Array(repeating: .nominal, count: 7) + [.fair]), .fair)
        XCTAssertEqual(SessionPressure.nextLevel(after: .shutdown, history: Array(repeating: .critical, count: 8)), .shutdown,
                       "an interruption ends only below critical")
        XCTAssertEqual(SessionPressure.nextLevel(after: .shutdown, history: Array(repeating: .serious, count: 8)), .serious)
    }

    /// A thermal zone that heats up past its trip points, in the kernel's layout: the session degrades in
    /// steps that are measured in what the outputs get (frame outputs halved while the recording keeps every
    /// frame; then the camera's rate halved for both), interrupts the camera only at the last level, and
    /// comes back by itself when the zone cools.
    func testHeatDegradesInStepsAndOnlyTheLastLevelInterrupts() async throws {
        let root = try temporaryFolder().path + "/thermal"
        let zone = root + "/thermal_zone0/"
        try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true)
        for (file, text) in [("type", "soc_thermal"), ("temp", "40000"), ("trip_point_0_type", "passive"), ("trip_point_0_temp", "85000"),
                             ("trip_point_1_type", "hot"), ("trip_point_1_temp", "95000"),
                             ("trip_point_2_type", "critical"), ("trip_point_2_temp", "105000")] {
            try text.write(toFile: zone + file, atomically: false, encoding: .utf8)
        }
        func heat(_ milliCelsius: Int) throws { try "\(milliCelsius)".write(toFile: zone + "temp", atomically: false, encoding: .utf8) }
        SystemPressureMonitor.thermalRoot.withLock { $0 = root }
        defer { SystemPressureMonitor.thermalRoot.withLock { $0 = "/sys/class/thermal" } }

        let camera = CaptureDevice.makeTestCamera(uniqueID: "test-heat-\(UUID().uuidString)", options: TestCameraOptions(maxFrameRate: 30))
        let frames = CaptureVideoDataOutput()
        let movie = CaptureMovieFileOutput()
        let session = try makeSession(camera: camera, outputs: [frames, movie])
        let events = EventLog(session)
        let log = FrameLog(frames)
        let states = Locked<[CaptureDevice.SystemPressureState]>([])
        let stateStream = camera.systemPressureStates()
        let following = Task { for await state in stateStream { states.withLock { $0.append(state) } } }
        defer { following.cancel() }
        let notified = Locked<[CaptureDevice.SystemPressureState.Level]>([])
        let observer = NotificationCenter.default.addObserver(forName: CaptureDevice.systemPressureStateDidChangeNotification,
                                                              object: camera, queue: nil) { note in
            if let state = note.userInfo?[CaptureDevice.systemPressureStateKey] as? CaptureDevice.SystemPressureState {
                notified.withLock { $0.append(state.level) }
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        defer { XCTAssertNoThrow(try withinBlocking(engineDeadline, "session.stopRunning()") { session.stopRunning() }) }
        let url = try temporaryFolder().appendingPathComponent("heat.mp4")
        let recording = await startRecording(movie, to: url)
        try await Task.sleep(for: .seconds(1))

        /// Frames the frame output and the recording got per second, over `seconds`.
        func rates(over seconds: Double = 1.5) async throws -> (frames: Double, movie: Double) {
            let frames0 = log.count, movie0 = movie.recordingStatistics.frames
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            return (Double(log.count - frames0) / seconds, Double(movie.recordingStatistics.frames - movie0) / seconds)
        }
        func response(_ wanted: CaptureSession.PressureResponse) -> (CaptureSession.Event) -> Bool {
            { if case .systemPressureChanged(_, _, let response) = $0 { response == wanted } else { false } }
        }
        XCTAssertEqual(session.pressureResponse, .none, "no degradation before the heat")
        let cool = try await rates()
        XCTAssertGreaterThan(cool.frames, 20, "\(cool)")

        try heat(90000)
        let serious = try await events.waitFor(timeout: 5, "serious pressure", response(.fewerFramesToOutputs))
        XCTAssertEqual(camera.systemPressureState.level, .serious)
        // The busy machine this runs on may add cpuContention: the heat must be named.
        XCTAssertTrue(camera.systemPressureState.factors.contains(.systemTemperature), "\(camera.systemPressureState)")
        let thinned = try await rates()
        print("rates: cool \(cool), serious \(thinned)")
        XCTAssertEqual(thinned.frames / cool.frames, 0.5, accuracy: 0.2, "frame outputs get one frame in two")
        XCTAssertGreaterThan(thinned.movie / cool.movie, 0.85, "the recording still gets every frame")

        try heat(97000)
        let critical = try await events.waitFor(from: serious.index, timeout: 5, "critical pressure", response(.reducedFrameRate))
        let halved = try await rates()
        print("rates: critical \(halved)")
        XCTAssertEqual(halved.movie / cool.movie, 0.5, accuracy: 0.2, "the camera's rate is halved for the recording too")
        XCTAssertEqual(halved.frames / cool.frames, 0.25, accuracy: 0.15)
        XCTAssertFalse(events.all.contains { $0.event.interruptionReason != nil }, "no interruption before the last level")

        try heat(102000)
        let interrupted = try await events.waitFor(from: critical.index, timeout: 6, "the pressure interruption") {
            $0.interruptionReason != nil
        }
        XCTAssertEqual(events.all[interrupted.index].event.interruptionReason, .videoDeviceNotAvailableDueToSystemPressure)
        XCTAssertEqual(camera.systemPressureState.level, .shutdown)
        // Interrupted as any other interruption is, by the time the app hears of it.
        XCTAssertTrue(session.isInterrupted, "isInterrupted is false during the pressure interruption")
        XCTAssertEqual(session.interruptionReasons, [.videoDeviceNotAvailableDueToSystemPressure])
        let stopped = try await rates(over: 1)
        XCTAssertLessThanOrEqual(stopped.frames, 2, "no frame goes anywhere while interrupted")

        try heat(40000)
        let ended = try await events.waitFor(from: interrupted.index, timeout: 6, "the end of the pressure interruption") {
            $0.endedReason != nil
        }
        XCTAssertEqual(events.all[ended.index].event.endedReason, .videoDeviceNotAvailableDueToSystemPressure)
        XCTAssertFalse(session.isInterrupted, "still interrupted after the pressure interruption ended")
        XCTAssertEqual(session.interruptionReasons, [])
        try await Task.sleep(for: .milliseconds(500))
        let back = try await rates()
        XCTAssertGreaterThan(back.frames / cool.frames, 0.8, "frames flow again: \(back)")
        XCTAssertLessThanOrEqual(camera.systemPressureState.level, .fair, "cooled (a busy machine may still say fair)")
        XCTAssertFalse(camera.systemPressureState.factors.contains(.systemTemperature))
        XCTAssertEqual(session.pressureResponse, .none)
        XCTAssertGreaterThan(session.pressureWithheldFrameCount, 0)
        movie.stopRecording()
        try await assertFinishedWithoutError(recording)
        // The recording went through every level, the interruption included, and plays.
        let probed = try probe(url)
        XCTAssertEqual(probed.codecs, ["h264"])
        XCTAssertGreaterThan(probed.videoFrames ?? 0, 0)
        XCTAssertTrue(try ffmpegDecodes(url))
        // The stream began with the state at the time (nominal) and, like the notification, saw every step.
        let streamed = states.withLock { $0 }
        XCTAssertEqual(streamed.first, .nominal)
        for level in [CaptureDevice.SystemPressureState.Level.serious, .critical, .shutdown] {
            XCTAssertTrue(streamed.contains { $0.level == level }, "\(streamed)")
            XCTAssertTrue(notified.withLock { $0.contains(level) }, "\(notified.withLock { $0 })")
        }
    }

    /// The monitor's timer exists only while a session runs.
    func testTheMonitorReadsOnlyWhileASessionRuns() async throws {
        let session = try makeSession(outputs: [CaptureVideoDataOutput()])
        XCTAssertFalse(SystemPressureMonitor.shared.isReading, "no session runs yet")
        try await within(engineDeadline, "session.start()") { try await session.start() }
        XCTAssertTrue(SystemPressureMonitor.shared.isReading)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertFalse(SystemPressureMonitor.shared.isReading, "the timer went with the last session")
    }

    /// Readings in the kernel's own formats: PSI lines and a thermal zone with trip points.
    func testPSIAndThermalZonesAreRead() throws {
        let psi = MachinePressure.parsePSI("some avg10=12.50 avg60=5.00 avg300=6.16 total=3651120359\nfull avg10=3.25 avg60=0.00 avg300=0.00 total=0\n")
        XCTAssertEqual(psi.some, 12.5)
        XCTAssertEqual(psi.full, 3.25)
        let root = try temporaryFolder().path
        let zone = root + "/thermal_zone0/"
        try FileManager.default.createDirectory(atPath: zone, withIntermediateDirectories: true)
        for (file, text) in [("type", "x86_pkg_temp"), ("temp", "86000"), ("trip_point_0_type", "passive"),
                             ("trip_point_0_temp", "85000"), ("trip_point_1_type", "critical"), ("trip_point_1_temp", "105000")] {
            try text.write(toFile: zone + file, atomically: false, encoding: .utf8)
        }
        let zones = ThermalZones(root: root)
        XCTAssertEqual(zones.reading().level, .serious)
        XCTAssertEqual(zones.reading().factors, .systemTemperature)
        try "101000".write(toFile: zone + "temp", atomically: false, encoding: .utf8)
        XCTAssertEqual(zones.reading().level, .shutdown)
        try "70000".write(toFile: zone + "temp", atomically: false, encoding: .utf8)
        XCTAssertEqual(zones.reading().level, .nominal)
    }
}
