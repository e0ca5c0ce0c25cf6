import Foundation
import GCaptureSupport
import GStreamerKit
import Synchronization
import XCTest

/// Counts samples from an appsink and remembers when they arrived.
final class SampleCounter: Sendable {
    private let times = Locked<[ClockTime]>([])
    var count: Int { times.withLock { $0.count } }
    var timestamps: [ClockTime] { times.withLock { $0 } }

    init(_ sink: AppSink) {
        sink.setSampleHandler { [weak self] sample in self?.times.withLock { $0.append(sample.presentationTime ?? 0) } }
    }

    func waitFor(_ count: Int, timeout: TimeInterval = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while self.count < count, Date() < deadline { usleep(5_000) }
        return self.count >= count
    }
}

final class TeeBranchTests: XCTestCase {
    private func livePipeline() throws -> (Pipeline, Element, SampleCounter) {
        let pipeline = try Pipeline.launch("videotestsrc is-live=true ! video/x-raw,format=I420,width=160,height=120,framerate=50/1 "
                                           + "! tee name=tee allow-not-linked=true ! queue ! appsink name=main sync=false")
        let tee = try XCTUnwrap(pipeline.element(named: "tee"))
        let counter = SampleCounter(try XCTUnwrap(pipeline.element(named: "main").flatMap(AppSink.init)))
        return (pipeline, tee, counter)
    }

    func testBranchesAttachAndDetachWhileTheOtherBranchRuns() throws {
        let (pipeline, tee, main) = try livePipeline()
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        XCTAssertTrue(main.waitFor(5))
        for cycle in 0..<10 {
            let bin = try Bin.parse("queue ! appsink name=extra sync=false")
            let extra = SampleCounter(try XCTUnwrap(bin.element(named: "extra").flatMap(AppSink.init)))
            let branch = try TeeBranch(attaching: bin, to: tee, in: pipeline)
            XCTAssertTrue(extra.waitFor(3), "cycle \(cycle): the new branch got no frame")
            XCTAssertTrue(branch.detach(drain: false))
            XCTAssertNil(pipeline.element(named: bin.name), "the branch is still in the pipeline")
        }
        let before = main.count
        XCTAssertTrue(main.waitFor(before + 5), "the main branch stopped")
        // 50 fps: consecutive frames 20 ms apart, no gap from the attach/detach cycles.
        let gaps = zip(main.timestamps.dropFirst(), main.timestamps).map { $0 - $1 }
        XCTAssertLessThan(gaps.max() ?? 0, 100 * .millisecond)
    }

    func testDrainingDetachFinalizesAFile() throws {
        let (pipeline, tee, _) = try livePipeline()
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        let path = NSTemporaryDirectory() + "gcapture-branch-\(UUID().uuidString).mkv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let branch = try TeeBranch(attaching: Bin.parse("queue ! jpegenc ! matroskamux ! filesink location=\(path)"),
                                   to: tee, in: pipeline)
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertTrue(branch.detach(drain: true), "end-of-stream did not reach the file sink")
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
        probe.arguments = ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                           "stream=nb_read_frames", "-of", "csv=p=0", path]
        let output = Pipe()
        probe.standardOutput = output
        let exited = DispatchSemaphore(value: 0)
        probe.terminationHandler = { _ in exited.signal() }
        try probe.run()
        // ffprobe reads a 0.5 s file in milliseconds; one that is still running after 60 s never ends.
        if exited.wait(timeout: .now() + 60) == .timedOut {
            kill(probe.processIdentifier, SIGKILL)
            return XCTFail("ffprobe did not finish within 60 s")
        }
        let frames = Int(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        XCTAssertGreaterThanOrEqual(frames, 15, "a 0.5 s branch at 50 fps should hold about 25 frames")
    }

    /// A branch fed by its own appsrc (a pre-roll's): its end, given through `endingOwnInputs`, is seen by the
    /// drain however fast it reaches the sinks. Ended before the detach, the same end is lost (the bin forgets
    /// its sinks' ends once all have posted one), and the drain could only time out.
    func testADrainSeesTheEndOfABranchsOwnInputs() throws {
        let (pipeline, _, _) = try livePipeline()
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        func ownFedBranch() throws -> (TeeBranch, AppSource) {
            let bin = try Bin.parse("appsrc name=src format=time is-live=true ! fakesink name=end sync=false async=false")
            let source = try XCTUnwrap(bin.element(named: "src").flatMap(AppSource.init))
            source.setCaps(try Caps("application/x-test"))
            let branch = try TeeBranch(attaching: bin, inputs: [], in: pipeline)
            let bytes: [UInt8] = [1, 2, 3, 4]
            for frame in 0..<3 {
                XCTAssertTrue(bytes.withUnsafeBytes { source.push(copying: $0, presentationTime: ClockTime(frame) * 20 * .millisecond) })
            }
            return (branch, source)
        }
        for cycle in 0..<20 {
            let (branch, source) = try ownFedBranch()
            XCTAssertTrue(branch.detach(drain: true, timeout: .seconds(3), endingOwnInputs: source.endOfStream),
                          "cycle \(cycle): the drain did not see the branch's end")
        }
        let (branch, source) = try ownFedBranch()
        source.endOfStream()
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertFalse(branch.detach(drain: true, timeout: .milliseconds(300)), "an end that reached the sinks before the drain was seen")
    }

    /// A drain that takes longer than its timeout but keeps moving (an encoder working through the frames queued
    /// before it on a loaded machine) completes; one where nothing moves for the timeout fails after it. A slow
    /// drain given up after a fixed 3 s left the movie to be rebuilt from its sidecar, without its last frames.
    func testASlowDrainThatKeepsMovingCompletesAndAStuckOneFails() throws {
        let (pipeline, _, _) = try livePipeline()
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        func queuedBranch(frames: Int, microsecondsEach: Int) throws -> (TeeBranch, AppSource) {
            let bin = try Bin.parse("appsrc name=src format=time is-live=true ! queue max-size-buffers=0 max-size-bytes=0 "
                                    + "max-size-time=0 ! identity sleep-time=\(microsecondsEach) ! fakesink sync=false async=false")
            let source = try XCTUnwrap(bin.element(named: "src").flatMap(AppSource.init))
            source.setCaps(try Caps("application/x-test"))
            let branch = try TeeBranch(attaching: bin, inputs: [], in: pipeline)
            let bytes: [UInt8] = [1, 2, 3, 4]
            for frame in 0..<frames {
                XCTAssertTrue(bytes.withUnsafeBytes { source.push(copying: $0, presentationTime: ClockTime(frame) * 33 * .millisecond) })
            }
            return (branch, source)
        }
        let (slow, slowSource) = try queuedBranch(frames: 30, microsecondsEach: 40_000)
        var began = Date()
        XCTAssertTrue(slow.detach(drain: true, timeout: .milliseconds(300), endingOwnInputs: slowSource.endOfStream),
                      "a drain that kept moving for \(Date().timeIntervalSince(began)) s was given up")
        XCTAssertGreaterThan(Date().timeIntervalSince(began), 0.6, "the drain was not slower than its timeout: nothing tested")

        let (stuck, stuckSource) = try queuedBranch(frames: 3, microsecondsEach: 1_500_000)
        began = Date()
        XCTAssertFalse(stuck.detach(drain: true, timeout: .milliseconds(300), endingOwnInputs: stuckSource.endOfStream),
                       "a drain where nothing moved for 1.5 s completed")
        XCTAssertLessThan(Date().timeIntervalSince(began), 5, "the stuck drain was not given up")
    }

    func testAFailedBranchIsCutOffAndTheOthersKeepRunning() throws {
        let (pipeline, tee, main) = try livePipeline()
        let branchHolder = Locked<TeeBranch?>(nil)
        let failures = Locked<[String]>([])
        pipeline.bus.setHandler { message in
            guard case .error(let error) = message.kind else { return }
            failures.withLock { $0.append(error.message) }
            branchHolder.withLock { holder in
                if let branch = holder, message.isFrom(inside: branch.bin.path) { branch.markFailed() }
            }
        }
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        XCTAssertTrue(main.waitFor(5))
        // identity fails the data flow after a few buffers, as a broken encoder or full disk would.
        let bin = try Bin.parse("queue ! identity error-after=3 ! fakesink")
        try bin.set("name", "broken")
        let branch = try TeeBranch(attaching: bin, to: tee, in: pipeline)
        branchHolder.withLock { $0 = branch }
        let deadline = Date().addingTimeInterval(3)
        while failures.withLock({ $0.isEmpty }), Date() < deadline { usleep(5_000) }
        XCTAssertFalse(failures.withLock { $0.isEmpty }, "the broken branch reported no error")
        let before = main.count
        XCTAssertTrue(main.waitFor(before + 25), "the main branch stopped after the other branch failed")
        XCTAssertEqual(pipeline.state().current, .playing)
        XCTAssertTrue(branch.hasFailed)
        // A failed branch cannot be drained: its files were never finalized, and detach says so.
        XCTAssertFalse(branch.detach(drain: true))
    }

    func testDeviceMonitorStartsAndLists() throws {
        let monitor = DeviceMonitor(classes: ["Video/Source", "Audio/Source"])
        try monitor.start()
        defer { monitor.stop() }
        for device in monitor.devices {
            XCTAssertFalse(device.deviceClass.isEmpty)
        }
    }
}

extension TeeBranchTests {
    func testABranchThatCannotLinkLeavesNothingBehind() throws {
        let (pipeline, tee, main) = try livePipeline()
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        let bin = try Bin.parse("queue ! capsfilter caps=video/x-raw,format=RGB,width=7,height=3 ! fakesink")
        try bin.set("name", "unlinkable")
        XCTAssertThrowsError(try TeeBranch(attaching: bin, to: tee, in: pipeline)) { error in
            XCTAssertEqual((error as? GStreamerError)?.kind, .link)
        }
        XCTAssertNil(pipeline.element(named: "unlinkable"))
        let before = main.count
        XCTAssertTrue(main.waitFor(before + 10))
    }
}
