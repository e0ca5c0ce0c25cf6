import Foundation
@testable import GCapture
import GStreamerKit
import Synchronization
import XCTest

/// Seed Pattern 6 (front/back switching inside begin/commitConfiguration) on the built-in test cameras: two
/// cameras of different sizes and rates, switched back and forth under a running, recording session.
/// The same on two real V4L2 cameras: CameraSwitchV4L2Tests (in the VM).
final class CameraSwitchTests: XCTestCase {
    /// A back camera of 640x480 at 30 fps and a front one of 1280x720 at 25 fps: the movie must keep the
    /// first camera's size and format while the second one's frames are scaled into it.
    static let back = CaptureDevice.makeTestCamera(uniqueID: "switch-back", options: .init(
        pattern: .smpte, motion: 2, position: .back, sizes: [.init(width: 640, height: 480)], maxFrameRate: 30))
    static let front = CaptureDevice.makeTestCamera(uniqueID: "switch-front", options: .init(
        pattern: .checkers, motion: 2, position: .front, sizes: [.init(width: 1280, height: 720)], maxFrameRate: 25))

    func testSwitchesWhileRecordingMakeOneMovieThatPlaysAtItsFirstSize() async throws {
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let movie = CaptureMovieFileOutput()
        let session = try makeSession(camera: Self.back, microphone: .testMicrophone, preset: .high, outputs: [frames, movie])
        let errors = Locked<[CaptureSession.RuntimeError]>([])
        let errorTask = Task { for await error in session.runtimeErrors() { errors.withLock { $0.append(error) } } }
        defer { errorTask.cancel() }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = try temporaryFolder().appendingPathComponent("switching.mp4")
        let recording = await startRecording(movie, to: url)
        let started = Date()
        let switches = 6
        for index in 1...switches {
            try await Task.sleep(for: .milliseconds(400))
            let camera = index % 2 == 1 ? Self.front : Self.back
            try switchCamera(of: session, to: camera)
            let width = camera == Self.front ? 1280 : 640
            let before = log.count
            let arrived = await log.waitFor(before + 3, timeout: 5)
            XCTAssertTrue(arrived, "switch \(index): frames stopped")
            XCTAssertTrue(log.all.dropFirst(before).contains { $0.width == width }, "switch \(index): no frame of \(camera)")
        }
        try await Task.sleep(for: .milliseconds(400))
        movie.stopRecording()
        let elapsed = Date().timeIntervalSince(started)
        let finished = await recording.waitForFinish()
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertNil(try XCTUnwrap(finished, "the recording never finished").error)
        XCTAssertEqual(errors.withLock { $0.map(\.description) }, [], "runtime errors during the switches")

        // Frames kept flowing, none of them black (no filler, no flash): the preview's picture is these frames.
        let all = log.all
        XCTAssertFalse(all.contains { !FrameLog.isPicture($0) },
                       "black frames during the switches: \(all.filter { !FrameLog.isPicture($0) }.map { "\($0.width) \($0.luma) \($0.time)" })")
        XCTAssertEqual(Set(all.map(\.width)), [640, 1280])

        // One file, at the first camera's size, that plays end to end, with its audio.
        let files = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path).filter { $0.hasSuffix(".mp4") }
        XCTAssertEqual(files, ["switching.mp4"])
        let probed = try probe(url)
        XCTAssertEqual(probed.videoSize?.width, 640)
        XCTAssertEqual(probed.videoSize?.height, 480)
        XCTAssertEqual(Set(probed.codecs), ["h264", "aac"])
        XCTAssertEqual(probed.duration, elapsed, accuracy: 1.0, "the movie's duration against the recording's")
        // 30 fps and 25 fps halves: between 25 and 30 frames a second.
        let counted = Double(try XCTUnwrap(probed.videoFrames))
        XCTAssertGreaterThan(counted, probed.duration * 25 * 0.8, "frames missing from the movie")
        XCTAssertLessThan(counted, probed.duration * 30 * 1.1)
        XCTAssertTrue(try ffmpegDecodes(url), "ffmpeg does not decode the movie")
        try assertVideoTimeOnlyGoesForward(url)
        let gaps = try largestVideoGap(url)
        print("the movie's largest gap: \(gaps * 1000) ms; between frames delivered: \(FrameLog.longestGap(all) * 1000) ms")
        // The switch costs about a frame (the goal is 2 intervals; the benchmark measures it): more than 5 would
        // be a break-before-make switch waiting for the new camera to start.
        XCTAssertLessThan(gaps, 5.0 / 25, "the largest gap between two frames in the movie: \(gaps) s")
    }

    /// At a switch the new camera takes the outputs with its first frame newer than the old camera's latest by
    /// more than `cutSpacing`, even when that is less than a quarter of its interval (vivid's cameras, stamped by
    /// one timer, deliver a few milliseconds apart: waiting for a quarter interval cost a 25 fps camera two or
    /// three frames, 108-121 ms against a plain start's 27-29 in the VM). A first frame older than the old
    /// camera's last by less than half its interval goes out retimed just after it (waiting past it cost a whole
    /// interval in one switch in three in the VM); older frames, and one too close to tell from the frame before
    /// it in the outputs, stay out.
    func testTheCutTakesTheNewCamerasFirstFrameNewerThanTheOldOnesLast() throws {
        let caps = "video/x-raw,format=GRAY8,width=4,height=4,framerate=25/1"
        let pipeline = try Pipeline.launch("tee name=tee allow-not-linked=true ! appsink name=sink sync=false")
        defer { pipeline.shutDown() }
        let tee = try XCTUnwrap(pipeline.element(named: "tee"))
        let sink = try XCTUnwrap(pipeline.element(named: "sink").flatMap(AppSink.init))
        let old = try Bin.parse("appsrc name=old-camera format=time caps=\(caps)")
        let new = try Bin.parse("appsrc name=new-camera format=time caps=\(caps)")
        try pipeline.add(old)
        try pipeline.add(new)
        try XCTUnwrap(old.staticPad("src")).link(to: XCTUnwrap(tee.staticPad("sink")))
        let oldSource = try XCTUnwrap(old.element(named: "old-camera").flatMap(AppSource.init))
        let newSource = try XCTUnwrap(new.element(named: "new-camera").flatMap(AppSource.init))
        let times = Locked<[ClockTime]>([])
        sink.setSampleHandler { sample in times.withLock { $0.append(sample.presentationTime ?? 0) } }
        let oldLast: ClockTime = 1_000_000_000, millisecond: ClockTime = 1_000_000, frame: ClockTime = 40 * millisecond
        let cut = SourceCut(previous: old, next: new, tee: tee, previousLastTime: { oldLast }) { _, _ in }
        try XCTUnwrap(new.staticPad("src")).addProbe(.blockBuffer) { info in cut.moveTee(info) }
        try pipeline.setState(.playing)
        let pixels = [UInt8](repeating: 128, count: 16)
        XCTAssertTrue(pixels.withUnsafeBytes { oldSource.push(copying: $0, presentationTime: oldLast) })
        func wait(until condition: () -> Bool) {
            let deadline = Date().addingTimeInterval(5)
            while !condition(), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        }
        wait { times.withLock { $0 } == [oldLast] }
        XCTAssertEqual(times.withLock { $0 }, [oldLast], "the old camera's frame at the outputs")
        for time in [oldLast - 25 * millisecond, oldLast - 3 * millisecond, oldLast + millisecond, oldLast + 5 * millisecond,
                     oldLast + 45 * millisecond] {
            XCTAssertTrue(pixels.withUnsafeBytes { newSource.push(copying: $0, presentationTime: time, duration: frame) })
        }
        wait { times.withLock { $0.count } >= 4 }
        Thread.sleep(forTimeInterval: 0.1)
        let retimed = oldLast + SourceCut.cutSpacing + 1
        XCTAssertEqual(times.withLock { $0 }, [oldLast, retimed, oldLast + 5 * millisecond, oldLast + 45 * millisecond],
                       "25 ms older stays out; 3 ms older goes out just after the old camera's last; 1 ms newer, "
                       + "not after that, stays out; 5 ms newer follows")
    }

    /// A frame a hair newer than the last of the source before it (two cameras' frames of one moment, 100 µs
    /// apart) is not a new moment: mp4mux's tick at 30 fps is 1/3000 s, and such a frame became a second sample
    /// of one decode time (seen in the VM: the copy into a plain MP4 failed and the movie stayed fragmented).
    /// The first frame a moment later goes through, and so does everything after it.
    func testASourceInPlaceOfAnotherLetsThroughOnlyFramesAMomentAfterItsLast() throws {
        let pipeline = try Pipeline.launch("appsrc name=src format=time caps=video/x-raw,format=GRAY8,width=4,height=4,framerate=30/1 "
                                           + "! appsink name=sink sync=false")
        defer { pipeline.shutDown() }
        let source = try XCTUnwrap(pipeline.element(named: "src").flatMap(AppSource.init))
        let sink = try XCTUnwrap(pipeline.element(named: "sink").flatMap(AppSink.init))
        let times = Locked<[ClockTime]>([])
        sink.setSampleHandler { sample in times.withLock { $0.append(sample.presentationTime ?? 0) } }
        let last: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333
        SourceCut.dropFrames(on: try XCTUnwrap(source.element.staticPad("src")), notAfter: last)
        try pipeline.setState(.playing)
        let pixels = [UInt8](repeating: 128, count: 16)
        for time in [last - frame, last, last + 100_000, last + frame, last + frame + 100_000] {
            XCTAssertTrue(pixels.withUnsafeBytes { source.push(copying: $0, presentationTime: time) })
        }
        source.endOfStream()
        let deadline = Date().addingTimeInterval(10)
        while times.withLock({ $0.count }) < 2, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        Thread.sleep(forTimeInterval: 0.1)
        // Once through, the probe is gone: what comes after is the source's own order (and the movie's rule).
        XCTAssertEqual(times.withLock { $0 }, [last + frame, last + frame + 100_000])
    }

    func testAFrameIsANewMomentAQuarterOfItsIntervalAfterTheLast() {
        let last: ClockTime = 1_000_000_000, frame: ClockTime = 33_333_333
        XCTAssertFalse(SourceCut.isNewMoment(last + 100_000, after: last, frameDuration: frame), "within mp4mux's tick at 30 fps")
        XCTAssertFalse(SourceCut.isNewMoment(last + frame / 4, after: last, frameDuration: frame))
        XCTAssertTrue(SourceCut.isNewMoment(last + frame / 4 + 1, after: last, frameDuration: frame))
        XCTAssertFalse(SourceCut.isNewMoment(last + 900_000, after: last, frameDuration: nil), "no duration: a millisecond")
        XCTAssertTrue(SourceCut.isNewMoment(last + 2_000_000, after: last, frameDuration: nil))
        XCTAssertFalse(SourceCut.isNewMoment(last - frame, after: last, frameDuration: frame))
    }

    /// Retimed at the cut: only a frame older than the old camera's last by less than half its own interval, and
    /// only to just after that last.
    func testAFrameIsRetimedAtTheCutOnlyWhenLessThanHalfAnIntervalOlder() {
        let last: ClockTime = 1_000_000_000, frame: ClockTime = 40_000_000, millisecond: ClockTime = 1_000_000
        let justAfter = last + SourceCut.cutSpacing + 1
        XCTAssertEqual(SourceCut.retimedAtTheCut(last - 3 * millisecond, duration: frame, after: last), justAfter)
        XCTAssertEqual(SourceCut.retimedAtTheCut(last + SourceCut.cutSpacing, duration: frame, after: last), justAfter)
        XCTAssertEqual(SourceCut.retimedAtTheCut(last - 17 * millisecond, duration: frame, after: last), justAfter)
        XCTAssertNil(SourceCut.retimedAtTheCut(last - 18 * millisecond, duration: frame, after: last), "moved by half an interval")
        XCTAssertNil(SourceCut.retimedAtTheCut(last - 3 * millisecond, duration: nil, after: last), "no interval to judge by")
        XCTAssertNil(SourceCut.retimedAtTheCut(justAfter, duration: frame, after: last), "newer already: nothing to retime")
    }

    /// A switch to a camera that delivers its frames 200 ms after taking them (as USB cameras do by 50-200 ms)
    /// and back: its first frames are older than the last of the camera before, and stay out, so that time
    /// only goes forward in every output; the movie copies cleanly into a plain MP4. Without that, frames of
    /// one moment from both cameras made samples of no duration and mp4mux refused the copy ("no PTS").
    func testASwitchToACameraThatDeliversLateKeepsTimeGoingForward() async throws {
        let late = CaptureDevice.makeTestCamera(uniqueID: "switch-late", options: .init(
            pattern: .checkers, motion: 2, position: .front, sizes: [.init(width: 640, height: 480)], maxFrameRate: 30,
            deliveryDelay: 0.2))
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let movie = CaptureMovieFileOutput()
        let session = try makeSession(camera: Self.back, microphone: .testMicrophone, preset: .high, outputs: [frames, movie])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        let url = try temporaryFolder().appendingPathComponent("late.mp4")
        let recording = await startRecording(movie, to: url)
        for camera in [late, Self.back, late, Self.back] {
            try await Task.sleep(for: .milliseconds(500))
            try switchCamera(of: session, to: camera)
            let before = log.count
            let arrived = await log.waitFor(before + 3, timeout: 5)
            XCTAssertTrue(arrived, "frames stopped after the switch to \(camera)")
        }
        try await Task.sleep(for: .milliseconds(400))
        movie.stopRecording()
        try await assertFinishedWithoutError(recording)
        try await within(engineDeadline, "session.stop()") { await session.stop() }

        let times = log.all.map(\.time)
        let backwards = zip(times, times.dropFirst()).filter { $1 <= $0 }
        XCTAssertEqual(backwards.map { "\($0.0)→\($0.1)" }, [], "frames delivered with a time not after the one before")
        try assertVideoTimeOnlyGoesForward(url)
        XCTAssertTrue(try ffmpegDecodes(url), "ffmpeg does not decode the movie")
        // The late camera's first 200 ms overlap the frames already delivered: at most that and a few frames.
        let gap = try largestVideoGap(url)
        XCTAssertLessThan(gap, 0.2 + 4.0 / 30, "the largest gap between two frames in the movie")
    }

    /// A switch to a camera that is not there, or cannot be opened, leaves the running camera running and says
    /// why; a switch after that works.
    func testASwitchThatFailsKeepsTheOldCameraRunning() async throws {
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try makeSession(camera: Self.back, preset: .high, outputs: [frames])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await log.require(3, "the first frames")
        // A camera unplugged between the app making its input and the switch: its node is gone.
        let node = try temporaryFolder().appendingPathComponent("video-gone").path
        XCTAssertTrue(FileManager.default.createFile(atPath: node, contents: nil))
        let missing = CaptureDevice(uniqueID: node, localizedName: "Gone Camera", modelID: "", manufacturer: "",
                                    deviceType: .external, position: .front, mediaType: .video, nodePath: node,
                                    formats: TestCameraOptions().formats, backend: .v4l2(path: node))
        let missingInput = try CaptureDeviceInput(device: missing)
        try FileManager.default.removeItem(atPath: node)
        let broken = CaptureDevice(uniqueID: "/dev/null", localizedName: "Not A Camera", modelID: "", manufacturer: "",
                                   deviceType: .external, position: .front, mediaType: .video, nodePath: "/dev/null",
                                   formats: TestCameraOptions().formats, backend: .v4l2(path: "/dev/null"))
        for (input, words) in [(missingInput, "video-gone"), (try CaptureDeviceInput(device: broken), "Not A Camera")] {
            let camera = input.device
            XCTAssertThrowsError(try switchCamera(of: session, to: input)) { error in
                XCTAssertTrue("\(error)".contains(words), "\(error)")
            }
            XCTAssertEqual((session.inputs.first as? CaptureDeviceInput)?.device, Self.back)
            let before = log.count
            let resumed = await log.waitFor(before + 10, timeout: 3)
            XCTAssertTrue(resumed, "after a switch to \(camera): \(log.count - before) frames")
            XCTAssertTrue(log.all.dropFirst(before).allSatisfy { $0.width == 640 && FrameLog.isPicture($0) })
            XCTAssertTrue(session.isRunning)
        }
        try switchCamera(of: session, to: Self.front)
        let before = log.count
        try await log.require(before + 5, "frames from the front camera")
        XCTAssertTrue(log.all.dropFirst(before).contains { $0.width == 1280 })
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// The old camera runs until the new one delivers (make-before-break): a new camera slow to give its first
    /// frame (held here for 500 ms, as a USB camera takes its time) costs the outputs about one frame, not its
    /// whole start.
    func testTheOldCameraRunsUntilTheNewOneDelivers() async throws {
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let slow = CaptureDevice.makeTestCamera(uniqueID: "switch-slow-front", options: .init(
            pattern: .checkers, motion: 2, position: .front, sizes: [.init(width: 1280, height: 720)], maxFrameRate: 25))
        let session = try makeSession(camera: Self.back, preset: .high, outputs: [frames])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        try await log.require(5, "the first frames from the old camera")
        TestCameraStalls.set(slow.uniqueID, stalled: true)
        defer { TestCameraStalls.set(slow.uniqueID, stalled: false) }
        let input = try CaptureDeviceInput(device: slow)
        session.beginConfiguration()
        session.removeInput(session.inputs[0])
        try session.add(input)
        let commit = Task { try await session.commit() }
        try await Task.sleep(for: .milliseconds(200))
        let during = log.count
        try await Task.sleep(for: .milliseconds(300))
        let oldFramesWhileWaiting = log.count - during
        TestCameraStalls.set(slow.uniqueID, stalled: false)
        try await within(engineDeadline, "the commit to the slow camera") { try await commit.value }
        try await log.require(log.count + 5, "frames from the new camera")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertGreaterThanOrEqual(oldFramesWhileWaiting, 5, "the old camera stopped while the new one was starting")
        let all = log.all
        let firstNew = try XCTUnwrap(all.firstIndex { $0.width == 1280 }, "no frame of the new camera")
        XCTAssertGreaterThan(firstNew, 0)
        let gap = all[firstNew].time - all[firstNew - 1].time
        // Goal ≤ 2 intervals (80 ms at 25 fps); 3 leaves room for a loaded machine, far below the 500 ms held.
        XCTAssertLessThan(gap, 0.120, "the gap across the switch")
    }

    /// The switch tells the outputs it kept (videoDeviceDidChange): a preview's automatic mirroring follows
    /// the new camera's position, as AVFoundation's does.
    func testAutomaticMirroringFollowsASwitch() async throws {
        let preview = CapturePreviewOutput(environment: [:])
        preview.sinkName = "fakesink"
        let session = try makeSession(camera: Self.back, preset: .high, outputs: [preview])
        try await within(engineDeadline, "session.start()") { try await session.start() }
        XCTAssertFalse(preview.connection.isVideoMirrored)
        try switchCamera(of: session, to: Self.front)
        XCTAssertTrue(preview.connection.isVideoMirrored, "a front camera's preview is mirrored after the switch")
        try switchCamera(of: session, to: Self.back)
        XCTAssertFalse(preview.connection.isVideoMirrored, "a back camera's preview is not mirrored after the switch")
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// Seed Pattern 6: remove the camera, add the other, inside one configuration.
    private func switchCamera(of session: CaptureSession, to camera: CaptureDevice) throws {
        try switchCamera(of: session, to: CaptureDeviceInput(device: camera))
    }

    private func switchCamera(of session: CaptureSession, to input: CaptureDeviceInput) throws {
        session.beginConfiguration()
        if let old = session.inputs.first(where: { ($0 as? CaptureDeviceInput)?.device.mediaType == .video }) {
            session.removeInput(old)
        }
        try session.add(input)
        try withinBlocking(engineDeadline, "session.commitAndWait()") { try session.commitAndWait() }
    }
}

extension XCTestCase {
    /// The longest interval between two consecutive video frames of a movie, in seconds, as ffprobe reads it.
    func largestVideoGap(_ url: URL) throws -> Double {
        try videoGaps(url, over: 0).map(\.length).max() ?? .infinity
    }

    /// Checks that a movie's video packets come in strictly increasing decode time with a duration each, and that
    /// the movie was stopped cleanly into a plain MP4 (the copy from the fragmented file refuses a frame without
    /// time). Two frames of one moment, from two cameras at a switch, made a sample of no duration that ffprobe
    /// discards and mp4mux refused to copy.
    func assertVideoTimeOnlyGoesForward(_ url: URL, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                                      "packet=dts_time,duration_time,flags", "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
        let packets = result.stdout.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        let times = packets.compactMap { $0.first.flatMap(Double.init) }
        let backwards = zip(times, times.dropFirst()).filter { $1 <= $0 }
        XCTAssertEqual(backwards.map { "\($0.0)→\($0.1)" }, [], "video decode times not increasing", file: file, line: line)
        let discarded = packets.filter { $0.count > 2 && $0[2].contains("D") }.map { $0[0] }
        XCTAssertEqual(discarded, [], "video packets ffprobe discards", file: file, line: line)
        XCTAssertFalse(try topLevelBoxes(url).contains("moof"), "the movie stayed fragmented: its copy into a plain MP4 failed",
                       file: file, line: line)
    }

    /// Where a movie's video has gaps longer than `seconds` between consecutive frames: the time of the frame
    /// before each, and its length.
    func videoGaps(_ url: URL, over seconds: Double) throws -> [(at: Double, length: Double)] {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time",
                                                      "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        let times = result.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
        return zip(times.dropFirst(), times).map { (at: $1, length: $0 - $1) }.filter { $0.length > seconds }
    }
}
