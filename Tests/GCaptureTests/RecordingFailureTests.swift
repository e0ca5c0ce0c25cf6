import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// Recordings when something goes wrong: a microphone that cannot be opened, a branch that cannot drain in
/// time, an encoder that falls behind, limits. What the program says and what ffprobe finds must agree.
final class RecordingFailureTests: XCTestCase {
    private func startSession(microphone: CaptureDevice?, preset: CaptureSession.Preset = .vga640x480,
                              outputs: [CaptureOutput]) async throws -> CaptureSession {
        try await startSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), microphone: microphone,
                               preset: preset, outputs: outputs)
    }

    /// A pulse source the server does not have fails only once playing; the start must wait for it and
    /// name the microphone, and so must adding it to a running session.
    func testAMicrophoneTheAudioServerDoesNotHaveFailsTheStartNamingIt() async throws {
        let server = try PulseAudioServer()
        defer { server.stop() }
        let missing = try XCTUnwrap(CaptureDevice.device(withUniqueID: "pulse:gcapture_nosuch"))
        do {
            let session = try await startSession(microphone: missing, outputs: [CaptureMovieFileOutput()])
            try await within(engineDeadline, "session.stop()") { await session.stop() }
            XCTFail("a session with a microphone that does not exist started")
        } catch let error as CaptureError {
            let text = "\(error)"
            XCTAssertTrue(text.contains("microphone") && text.contains("pulse:gcapture_nosuch") && text.contains("no source named"), text)
            XCTAssertFalse(text.contains("Test Camera"), "the camera is not to blame: \(text)")
        }

        let session = try await startSession(microphone: nil, outputs: [CaptureMovieFileOutput()])
        XCTAssertThrowsError(try session.add(CaptureDeviceInput(device: missing))) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("pulse:gcapture_nosuch") && text.contains("no source named"), text)
        }
        XCTAssertTrue(session.isRunning)
        XCTAssertFalse(session.inputs.contains { $0.mediaType == .audio })
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// No audio server at all: a stale socket nobody listens on. The error names the microphone and the
    /// server, not the camera.
    func testNoAudioServerFailsTheStartNamingTheServer() async throws {
        guard GStreamer.hasElement("pulsesrc") else { throw TestEnvironment.missing("pulsesrc (gstreamer1.0-pulseaudio) is not installed") }
        let folder = try temporaryFolder()
        let socketPath = folder.appendingPathComponent("dead-server").path
        // A socket file whose server has gone: bound, never listened on, closed.
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(socketPath.utf8.prefix(raw.count - 1)) + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        close(descriptor)
        XCTAssertEqual(bound, 0)
        let previous = getenv("PULSE_SERVER").map { String(cString: $0) }
        setenv("PULSE_SERVER", "unix:" + socketPath, 1)
        defer { if let previous { setenv("PULSE_SERVER", previous, 1) } else { unsetenv("PULSE_SERVER") } }

        let microphone = try XCTUnwrap(CaptureDevice.device(withUniqueID: "pulse:default"))
        do {
            let session = try await startSession(microphone: microphone, outputs: [CaptureMovieFileOutput()])
            try await within(engineDeadline, "session.stop()") { await session.stop() }
            XCTFail("a session whose audio server is missing started")
        } catch let error as CaptureError {
            let text = "\(error)"
            XCTAssertTrue(text.contains("microphone") && text.contains("PulseAudio server at unix:\(socketPath)")
                          && text.contains("does not answer"), text)
            XCTAssertFalse(text.contains("Test Camera"), "the camera is not to blame: \(text)")
        }
    }

    /// The session stops while the movie's muxer is stuck: the drain times out, and the movie is rebuilt
    /// from the crash-recovery sidecar (which did drain) instead of the sidecar being deleted beside a
    /// movie that was never finalized.
    func testAStopWhoseDrainTimesOutRecoversTheMovieFromTheSidecar() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let session = try await startSession(microphone: .testMicrophone, outputs: [movie])
        let url = folder.appendingPathComponent("stuck.mp4")
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .milliseconds(1200))
        // From now on the muxer's video input holds its next buffer 4.5 s (longer than the 3 s drain):
        // its queue fills meanwhile, the sidecar's branch runs on.
        let muxInput = try XCTUnwrap(movie.recordingBin?.element(named: "mux")?.staticPad("video_0")?.peer)
        let stuck = FirstTime()
        muxInput.addProbe(.buffer) { _ in
            if stuck.claim() { Thread.sleep(forTimeInterval: 4.5) }
            return .ok
        }
        try await Task.sleep(for: .milliseconds(500))
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        try await assertFinishedWithoutError(waiter, timeout: 20, "the recovered movie")
        XCTAssertFalse(FileManager.default.fileExists(atPath: MovieRecovery.sidecarURL(for: url).path), "the sidecar went into the movie")
        let probed = try probe(url)
        XCTAssertEqual(probed.duration, 1.7, accuracy: 0.25, "every frame up to the stop, not only those before the muxer stuck")
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// The encoder falls behind by more than the input queue holds, so the leaky queue drops frames: the
    /// statistics count what reached the file.
    func testStatisticsCountTheFramesInTheFile() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let session = try await startSession(microphone: nil, outputs: [movie])
        let url = folder.appendingPathComponent("behind.mp4")
        let waiter = await startRecording(movie, to: url)
        try await Task.sleep(for: .milliseconds(500))
        // 1.6 s stuck in front of the encoder: the 1 s input queue overflows and drops about 18 frames.
        let encoderInput = try XCTUnwrap(movie.recordingVideoEncoderElement?.staticPad("sink"))
        let stuck = FirstTime()
        encoderInput.addProbe(.buffer) { _ in
            if stuck.claim() { Thread.sleep(forTimeInterval: 1.6) }
            return .ok
        }
        try await Task.sleep(for: .milliseconds(2500))
        movie.stopRecording()
        try await assertFinishedWithoutError(waiter)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        let stats = movie.lastStatistics
        let probed = try probe(url)
        let frames = try XCTUnwrap(probed.videoFrames)
        XCTAssertLessThan(frames, 80, "the encoder's stall cost frames (3 s at 30 fps is 90)")
        XCTAssertEqual(stats.frames, frames, "statistics say \(stats.frames) frames, the file has \(frames)")
        XCTAssertGreaterThan(stats.droppedFrames, 10)
        XCTAssertEqual(stats.duration, probed.duration, accuracy: 1.0 / 30 + 0.001)
    }

    /// Few, small frames: the MP4's own overhead (a fragment every 250 ms) weighs most, and the limit
    /// still holds for the fragmented and the defragmented movie.
    func testTheSizeLimitHoldsAtALowFrameRateAndBitRate() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.videoBitRate = 100_000
        movie.maxRecordedFileSize = 60_000
        let session = CaptureSession()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: .makeTestCamera(options: .init(maxFrameRate: 5))))
        try session.add(movie)
        session.sessionPreset = .vga640x480
        try withinBlocking(engineDeadline, "session.commitAndWait()") { try session.commitAndWait() }
        try await within(engineDeadline, "session.start()") { try await session.start() }
        for defragments in [false, true] {
            movie.defragmentsMovieOnStop = defragments
            let url = folder.appendingPathComponent("slow-\(defragments).mp4")
            let finished = await recordUntilItEnds(movie, to: url)
            XCTAssertEqual(finished?.error, .maximumFileSizeReached)
            let size = try fileSize(url)
            let probed = try probe(url)
            XCTAssertLessThanOrEqual(size, 60_000, "defragmented: \(defragments)")
            // It stops before the first frame that would pass the limit (a key frame here weighs up to 5 KB),
            // and its estimate of the container's share is over by less than 600 bytes.
            let largestFrame = try largestPacket(url)
            XCTAssertGreaterThanOrEqual(size, 60_000 - largestFrame - 600, "defragmented: \(defragments)")
            XCTAssertGreaterThan(probed.duration, 1)
            XCTAssertTrue(try ffmpegDecodes(url))
        }
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }

    /// Fragments of 100 ms with audio: mp4mux cuts each track's fragment when its time is used up and the
    /// video's at each key frame too, and the many fragments' boxes weigh; the fragmented file (what stays
    /// when defragmenting is off, fails, or the process dies) stays within the limit, by less than a frame.
    func testTheSizeLimitHoldsWithShortFragmentsAndAudio() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.defragmentsMovieOnStop = false
        movie.movieFragmentInterval = 0.1
        movie.videoBitRate = 300_000
        movie.maxRecordedFileSize = 150_000
        let session = try await startSession(microphone: .testMicrophone, outputs: [movie])
        let url = folder.appendingPathComponent("short-fragments.mp4")
        let finished = await recordUntilItEnds(movie, to: url)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(finished?.error, .maximumFileSizeReached)
        let size = try fileSize(url)
        XCTAssertGreaterThan(try topLevelBoxes(url).filter { $0 == "moof" }.count, 20, "a fragment each 100 ms")
        XCTAssertLessThanOrEqual(size, 150_000)
        let largestFrame = try largestPacket(url)
        XCTAssertGreaterThanOrEqual(size, 150_000 - 3 * largestFrame, "stopped more than a few frames early")
        XCTAssertTrue(try ffmpegDecodes(url))
    }

    /// The size limit holds for the fragmented movie too (kept when defragmenting is off), and the
    /// duration limit to a frame, through the library.
    func testLimitsHoldForTheFragmentedMovie() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        movie.defragmentsMovieOnStop = false
        movie.maxRecordedFileSize = 400_000
        let session = try await startSession(microphone: .testMicrophone, preset: .hd1280x720, outputs: [movie])
        let sized = folder.appendingPathComponent("sized.mp4")
        let finished = await recordUntilItEnds(movie, to: sized, timeout: 20)
        XCTAssertEqual(finished?.error, .maximumFileSizeReached)
        let size = try fileSize(sized)
        XCTAssertTrue(try topLevelBoxes(sized).contains("moof"))
        XCTAssertLessThanOrEqual(size, 400_000)
        XCTAssertGreaterThanOrEqual(size, 360_000, "undershot by more than 10%")
        XCTAssertTrue(try ffmpegDecodes(sized))

        movie.maxRecordedFileSize = nil
        movie.maxRecordedDuration = 0.7
        let timed = folder.appendingPathComponent("timed.mp4")
        let timedFinish = await recordUntilItEnds(movie, to: timed, timeout: 20)
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(timedFinish?.error, .maximumDurationReached)
        let probed = try probe(timed)
        XCTAssertEqual(probed.duration, 0.7, accuracy: 1.0 / 30)
        XCTAssertEqual(probed.videoFrames, 21)
        XCTAssertEqual(movie.lastStatistics.frames, 21)
        XCTAssertTrue(try ffmpegDecodes(timed))
    }

    /// A recording stops by itself, with `.diskSpaceLimitReached`, once the disk it writes to has less free space
    /// than `minFreeDiskSpaceLimit` (checked on the session's tick, every 250 ms, and not by the movie's own
    /// timeline), and what it wrote plays. A limit above the disk's whole free space is reached at once.
    func testARecordingStopsWhenItsDiskHasLessFreeSpaceThanTheLimit() async throws {
        let folder = try temporaryFolder()
        var info = statvfs()
        XCTAssertEqual(statvfs(folder.path, &info), 0)
        let free = Int64(info.f_bavail) * Int64(info.f_frsize)
        let movie = CaptureMovieFileOutput()
        movie.minFreeDiskSpaceLimit = free + 1_000_000_000_000
        let session = try await startSession(preset: .vga640x480, outputs: [movie])
        let url = folder.appendingPathComponent("disk-limit.mp4")
        let started = ContinuousClock.now
        let finished = await recordUntilItEnds(movie, to: url, timeout: 10)
        let took = ContinuousClock.now - started
        try await within(engineDeadline, "session.stop()") { await session.stop() }
        XCTAssertEqual(finished?.error, .diskSpaceLimitReached)
        XCTAssertLessThan(took, .seconds(2), "a limit already reached ends the recording at the next tick")
        XCTAssertTrue(try ffmpegDecodes(url), "the movie up to the limit does not play")
    }
}

extension RecordingFailureTests {
    /// A microphone that opened but sends nothing once recording (a stalled source): the movie must still
    /// open in every player, without an empty audio track, fragmented or not.
    func testAMicrophoneThatSendsNothingLeavesAMovieThatPlays() async throws {
        let folder = try temporaryFolder()
        let movie = CaptureMovieFileOutput()
        let session = try await startSession(microphone: .testMicrophone, outputs: [movie])
        for defragments in [true, false] {
            movie.defragmentsMovieOnStop = defragments
            let url = folder.appendingPathComponent("silent-\(defragments).mp4")
            let waiter = RecordingWaiter()
            movie.startRecording(to: url, recordingDelegate: waiter)
            // Nothing the microphone sends reaches the recording's audio input.
            let deadline = Date().addingTimeInterval(5)
            while movie.recordingBin == nil, waiter.finished == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            let audioInput = try XCTUnwrap(movie.recordingBin?.element(named: "audio_in")?.staticPad("sink"))
            audioInput.addProbe(.buffer) { _ in .drop }
            let started = await waiter.waitForStart()
            XCTAssertTrue(started)
            try await Task.sleep(for: .milliseconds(1500))
            movie.stopRecording()
            let finished = await waiter.waitForFinish()
            XCTAssertNotNil(finished)
            let probed = try probe(url)
            XCTAssertEqual(probed.duration, 1.5, accuracy: 0.3, "defragmented: \(defragments)")
            XCTAssertTrue(try ffmpegDecodes(url), "defragmented: \(defragments)")
        }
        try await within(engineDeadline, "session.stop()") { await session.stop() }
    }
}
