import Foundation
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

    func testTheLevelRisesOneStepPerTwoReadingsAndFallsAfterEightLower() {
        typealias Level = CaptureDevice.SystemPressureState.Level
        XCTAssertEqual(SessionPressure.nextLevel(after: .nominal, history: [.critical]), .nominal, "one reading is a hiccup")
        XCTAssertEqual(SessionPressure.nextLevel(after: .nominal, history: [.critical, .critical]), .fair)
        XCTAssertEqual(SessionPressure.nextLevel(after: .serious, history: [.shutdown, .shutdown]), .critical)
        XCTAssertEqual(SessionPressure.nextLevel(after: .critical, history: Array(repeating: .critical, count: 11)), .critical)
        XCTAssertEqual(SessionPressure.nextLevel(after: .critical, history: Array(repeating: .critical, count: 12)), .shutdown)
        XCTAssertEqual(SessionPressure.nextLevel(after: .serious, history: Array(repeating: .fair, count: 7)), .serious)
        XCTAssertEqual(SessionPressure.nextLevel(after: .serious, history: Array(repeating: .nominal, count: 7) + [.fair]), .fair)
        XCTAssertEqual(SessionPressure.nextLevel(after: .shutdown, history: Array(repeating: .critical, count: 8)), .shutdown,
                       "an interruption ends only below critical")
        XCTAssertEqual(SessionPressure.nextLevel(after: .shutdown, history: Array(repeating: .serious, count: 8)), .serious)
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
