import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

final class StreamOutputTests: XCTestCase {
    private func streamingSession(_ stream: CaptureStreamOutput, also others: [CaptureOutput] = [],
                                  microphone: CaptureDevice? = .testMicrophone) async throws -> CaptureSession {
        try await startSession(camera: .makeTestCamera(options: .init(maxFrameRate: 30)), microphone: microphone,
                               preset: .vga640x480, outputs: [stream] + others)
    }

    /// A streaming session with a frame output beside the stream, watched from now on: the frames it
    /// delivers (those before `framesBefore` came earlier) and the session's events.
    private func watchedStreamingSession(_ stream: CaptureStreamOutput) async throws
        -> (session: CaptureSession, frames: FrameLog, framesBefore: Int, events: SessionEventLog) {
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try await streamingSession(stream, also: [frames])
        return (session, log, log.count, SessionEventLog(session))
    }

    private func waitFor(_ stream: CaptureStreamOutput, _ name: String, within seconds: Double) async throws -> CaptureStreamOutput.State {
        try await firstElement(of: stream.stateUpdates(), within: seconds, "the stream going \(name)") { $0.name == name || $0.name == "failed" }
    }

    /// Packets of one stream as ffprobe reads them: (pts seconds, key frame).
    private func packets(_ url: URL, _ stream: String) throws -> [(time: Double, key: Bool)] {
        let result = try runTool("/usr/bin/ffprobe", ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time,flags",
                                                      "-of", "csv=p=0", url.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: ",")
            guard let time = fields.first.flatMap({ Double($0) }) else { return nil }
            return (time, fields.dropFirst().first?.contains("K") == true)
        }
    }

    /// How far audio and video moved apart in a received stream that was cut at one moment: the gap between
    /// the newest video and the newest audio timestamp (a player that joins mid-stream starts the video at the
    /// next key frame, so the start says nothing), and how much audio is missing from the audio timeline
    /// (AAC: 1024 samples at 48 kHz a packet), which a gap-free but drifting stream would show there.
    private func drift(_ url: URL) throws -> (endGap: Double, audioMissing: Double, seconds: Double) {
        let video = try packets(url, "v").map(\.time).sorted(), audio = try packets(url, "a").map(\.time).sorted()
        guard let v0 = video.first, let a0 = audio.first, let v1 = video.last, let a1 = audio.last else {
            throw CheckFailed(description: "the stream has no audio or no video packets")
        }
        return (v1 - a1, (a1 - a0) - Double(audio.count - 1) * 1024 / 48000, v1 - v0)
    }

    // MARK: URLs and plugins (no server needed)

    func testDestinationsAreReadFromTheURLAndMistakesNamed() throws {
        XCTAssertEqual(try StreamDestination("rtmp://host/live/key").kind, .rtmp)
        XCTAssertEqual(try StreamDestination("srt://host:9000").kind, .srt)
        XCTAssertTrue(try StreamDestination("srt://:9000?mode=listener").listens)
        XCTAssertEqual(try StreamDestination("rtsp://host:8554/cam").kind, .rtsp)
        XCTAssertEqual(try StreamDestination("/tmp/live.m3u8").kind, .hls)
        // WHIP: its endpoint's own URL, or whip:// and whips:// for it.
        XCTAssertEqual(try StreamDestination("https://ingest.example/whip/cam").kind, .whip)
        XCTAssertEqual(try StreamDestination("whip://127.0.0.1:8889/cam/whip").location, "http://127.0.0.1:8889/cam/whip")
        XCTAssertEqual(try StreamDestination("whips://ingest.example/whip").location, "https://ingest.example/whip")
        XCTAssertTrue(try StreamDestination("whip://host/whip").requiresOpus)
        for (bad, words) in [("ftp://host/x", "not ftp://"), ("rtmp://host/live", "application and a stream key"),
                             ("srt://host", "needs a port"), ("file:///tmp/x.mp4", "ending in .m3u8"), ("nonsense", "rtmp://")] {
            XCTAssertThrowsError(try StreamDestination(bad), bad) { error in
                XCTAssertTrue("\(error)".contains(words), "\(bad): \(error)")
            }
        }
        // A stream key is a secret: it stays out of logs and messages.
        XCTAssertFalse(try StreamDestination("rtmp://host/live/SECRETKEY").description.contains("SECRETKEY"))
    }

    func testAMissingPluginNamesItsDebianPackage() throws {
        XCTAssertThrowsError(try StreamDestination("rtsp://host/cam").checkInstalled { $0 != "rtspclientsink" }) { error in
            XCTAssertEqual("\(error)", "GStreamer element 'rtspclientsink' is not installed (apt install gstreamer1.0-rtsp)")
        }
        XCTAssertThrowsError(try StreamDestination("rtmp://h/a/k").checkInstalled { $0 != "rtmp2sink" }) { error in
            XCTAssertTrue("\(error)".contains("gstreamer1.0-plugins-bad"), "\(error)")
        }
    }

    func testTheBackoffGrowsIsCappedAndJittered() {
        let policy = CaptureStreamOutput.ReconnectPolicy(initialDelay: 0.5, maxDelay: 8, multiplier: 2, jitter: 0.2)
        XCTAssertEqual(policy.delay(beforeAttempt: 1, random: 0.5), 0.5, accuracy: 1e-9)
        XCTAssertEqual(policy.delay(beforeAttempt: 3, random: 0.5), 2, accuracy: 1e-9)
        XCTAssertEqual(policy.delay(beforeAttempt: 30, random: 0.5), 8, accuracy: 1e-9)
        XCTAssertEqual(policy.delay(beforeAttempt: 30, random: 1), 8, accuracy: 1e-9, "the cap holds with the jitter")
        XCTAssertEqual(policy.delay(beforeAttempt: 2, random: 0), 0.8, accuracy: 1e-9)
        XCTAssertEqual(policy.delay(beforeAttempt: 2, random: 1), 1.2, accuracy: 1e-9)
        let delays = Set((0..<20).map { _ in policy.delay(beforeAttempt: 2) })
        XCTAssertGreaterThan(delays.count, 1, "publishers cut off together must not retry together")
    }

    /// What the sinks themselves say, as the property gives it (quoted and escaped): a sink that has sent
    /// nothing says 0, not nothing (which made the stream count what left the encoder instead).
    func testSinkStatisticsAreReadFromTheSerializedStructure() throws {
        for sink in ["rtmp2sink location=rtmp://127.0.0.1:1/live/key", "srtsink uri=srt://127.0.0.1:1"] {
            let pipeline = try Pipeline.launch("fakesrc ! \(sink) name=sink")
            defer { pipeline.shutDown() }
            let stats = try XCTUnwrap(pipeline.element(named: "sink")?.property("stats"))
            XCTAssertEqual(SinkStatistics.bytesSent(in: stats), 0, "\(sink): \(stats)")
        }
        XCTAssertEqual(SinkStatistics.bytesSent(in: #""GstRtmpConnectionStats\,\ in-bytes-total\=\(guint64\)10\,\ out-bytes-total\=\(guint64\)4096\;""#), 4096)
        XCTAssertEqual(SinkStatistics.bytesSent(in: "application/x-srt-statistics, packets-sent=(gint64)3, bytes-sent-total=(guint64)3948;"), 3948)
        XCTAssertNil(SinkStatistics.bytesSent(in: "application/x-srt-statistics;"))
    }

    // MARK: Real servers on loopback

    /// nginx-rtmp takes the stream; ffmpeg pulls it back: H.264 Main 4:2:0 and AAC, a key frame each second
    /// as asked, audio and video together over 15 s.
    func testRTMPToNginxPlaysBackConstrainedWithKeyFramesAtTheInterval() async throws {
        let folder = try temporaryFolder()
        let server = try NginxRTMPServer(folder: folder)
        defer { server.stop() }
        let stream = CaptureStreamOutput()
        stream.keyFrameInterval = 1
        let session = try await streamingSession(stream)
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: server.url("cam"))
        let state = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(state, .live, "\(state)")
        let pulled = folder.appendingPathComponent("pulled.flv")
        let pull = try runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", server.url("cam"), "-t", "15", "-c", "copy", "-y", pulled.path], timeout: 40)
        XCTAssertEqual(pull.status, 0, pull.stderr)
        let live = stream.statistics
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)

        let probed = try probe(pulled)
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        XCTAssertEqual(probed.stream("video")?["pix_fmt"] as? String, "yuv420p")
        XCTAssertEqual(probed.stream("video")?["profile"] as? String, "Main")
        // The interval in frames (30 at 30 fps): a frame the loaded machine delivers late moves a key frame
        // in time, never in count.
        let video = try packets(pulled, "v").sorted { $0.time < $1.time }
        let keyIndices = video.indices.filter { video[$0].key }
        let framesBetween = zip(keyIndices, keyIndices.dropFirst()).map { $1 - $0 }
        XCTAssertGreaterThanOrEqual(framesBetween.count, 12, "key frames at \(keyIndices)")
        XCTAssertEqual(Set(framesBetween), [30], "frames between key frames: \(framesBetween)")
        let drift = try drift(pulled)
        XCTAssertGreaterThan(drift.seconds, 13)
        XCTAssertLessThan(abs(drift.endGap), 0.05, "audio and video drifted apart: \(drift)")
        XCTAssertLessThan(abs(drift.audioMissing), 0.05, "audio and video drifted apart: \(drift)")
        XCTAssertTrue(try ffmpegDecodes(pulled))
        XCTAssertGreaterThan(live.bytesSent, 100_000, "\(live)")
        XCTAssertGreaterThan(live.videoFramesSent, 400, "\(live)")
        XCTAssertGreaterThan(live.bitRate, 100_000, "\(live)")
        XCTAssertEqual(live.reconnects, 0)
    }

    /// An RTMP server that is not there refuses: the stream retries by itself, the session's other outputs
    /// keep their frames, and once the server runs the stream goes live.
    func testRTMPRefusedRetriesUntilTheServerComesWithoutDisturbingTheSession() async throws {
        let folder = try temporaryFolder()
        let server = try NginxRTMPServer(folder: folder)
        server.stop()
        let stream = CaptureStreamOutput()
        stream.reconnectPolicy = .init(initialDelay: 0.3, maxDelay: 1)
        let (session, log, before, events) = try await watchedStreamingSession(stream)
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: server.url("late"))
        let reconnecting = try await waitFor(stream, "reconnecting", within: 10)
        guard case .reconnecting(let attempt, let next, _) = reconnecting else { return XCTFail("\(reconnecting)") }
        XCTAssertEqual(attempt, 1)
        XCTAssertLessThan(next.timeIntervalSinceNow, 1.5)
        try await Task.sleep(for: .seconds(2))
        try server.start()
        defer { server.stop() }
        let back = Date()
        let state = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(state, .live)
        let toLive = Date().timeIntervalSince(back)
        XCTAssertLessThan(toLive, 2 + 1.2, "server back → live took \(toLive) s")
        let during = Array(log.all.dropFirst(before))
        XCTAssertLessThan(FrameLog.longestGap(during), 0.2, "the frame output stalled while the stream was refused")
        XCTAssertGreaterThanOrEqual(stream.statistics.reconnects, 1)
        // Each refusal was the stream's to handle (its state said reconnecting), not a failure of the session.
        XCTAssertTrue(events.runtimeErrors.isEmpty, "\(events.runtimeErrors)")
        stream.stopStreaming()
    }

    /// A server that accepts the TCP connection and never answers the RTMP handshake took nothing: the stream
    /// is never called live (frames leaving the encoder are not bytes the server took), after connectTimeout
    /// it retries, and meanwhile the session's other outputs get every frame.
    func testAServerThatNeverAnswersIsNeverCalledLive() async throws {
        let listener = try SilentTCPListener()
        defer { listener.close() }
        let stream = CaptureStreamOutput()
        stream.connectTimeout = 3
        stream.reconnectPolicy = .init(initialDelay: 0.2, maxDelay: 0.5)
        let (session, log, before, events) = try await watchedStreamingSession(stream)
        defer { Task { await session.stop() } }
        let states = Locked<[String]>([])
        let watcher = Task {
            for await state in stream.stateUpdates() { states.withLock { $0.append(state.name) } }
        }
        defer { watcher.cancel() }
        try stream.startStreaming(to: "rtmp://127.0.0.1:\(listener.port)/live/key")
        let reconnecting = try await waitFor(stream, "reconnecting", within: 8)
        guard case .reconnecting(_, _, let reason) = reconnecting else { return XCTFail("\(reconnecting)") }
        XCTAssertTrue(reason.contains("took no data"), reason)
        XCTAssertFalse(states.withLock { $0 }.contains("live"), "\(states.withLock { $0 })")
        XCTAssertEqual(stream.statistics.bytesSent, 0)
        XCTAssertEqual(stream.statistics.liveSeconds, 0)
        let during = Array(log.all.dropFirst(before))
        // By arrival: the test camera's timestamps run on without a gap after its thread was held.
        let longestWait = zip(during, during.dropFirst()).map { $1.arrival.timeIntervalSince($0.arrival) }.max() ?? .infinity
        XCTAssertLessThan(longestWait, 1, "the camera was held while the server hung (for connectTimeout, 3 s)")
        XCTAssertLessThan(FrameLog.longestGap(during), 0.2, "the frame output stalled while the server hung")
        XCTAssertTrue(events.interruptions.isEmpty && events.runtimeErrors.isEmpty, "\(events.all.map(\.event))")
        stream.stopStreaming()
    }

    /// With a limit on attempts, a server that keeps refusing ends in `.failed`, and the session runs on.
    func testAServerThatKeepsRefusingEndsFailedAfterThePolicysAttempts() async throws {
        let port = try freeLoopbackPort()
        let stream = CaptureStreamOutput()
        stream.reconnectPolicy = .init(initialDelay: 0.1, maxDelay: 0.2, maxAttempts: 2)
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try await streamingSession(stream, also: [frames])
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: "rtmp://127.0.0.1:\(port)/live/none")
        let end = try await waitFor(stream, "failed", within: 10)
        guard case .failed(let error) = end else { return XCTFail("\(end)") }
        XCTAssertTrue("\(error)".contains("Connection refused"), "\(error)")
        XCTAssertFalse(stream.isStreaming)
        XCTAssertEqual(stream.statistics.reconnects, 3, "the first connection and two retries")
        let before = log.count
        let delivered = await log.waitFor(before + 10, timeout: 3)
        XCTAssertTrue(delivered, "the session stopped delivering frames")
    }

    /// RTSP publishing with RECORD to a gst-rtsp-server: what it received plays back as H.264 4:2:0.
    func testRTSPRecordToAServerPlaysBack() async throws {
        let folder = try temporaryFolder()
        let server = try RTSPRecordServer(folder: folder)
        defer { server.kill() }
        let stream = CaptureStreamOutput()
        let session = try await streamingSession(stream, microphone: nil)
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: server.url("cam"))
        let state = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(state, .live, "\(state)")
        try await Task.sleep(for: .seconds(3))
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)
        try await Task.sleep(for: .seconds(1))
        let probed = try probe(server.output)
        XCTAssertEqual(probed.codecs, ["h264"])
        XCTAssertEqual(probed.stream("video")?["pix_fmt"] as? String, "yuv420p")
        XCTAssertGreaterThan(probed.videoFrames ?? 0, 45, "\(probed.videoFrames ?? 0) frames reached the server")
    }

    /// RTSP publishing with RECORD, video and the microphone's audio: the server receives both streams (the H.264
    /// as it was sent, the AAC) and writes them into one file that plays back.
    func testRTSPRecordWithAudioToAServerPlaysBack() async throws {
        try await publishWithAudioOverRTSP(.aac, codecName: "aac", secondsPerPacket: 1024 / 48000)
    }

    /// The same with Opus, which RTP carries too (20 ms a packet, opusenc's default).
    func testRTSPRecordWithOpusToAServerPlaysBack() async throws {
        try await publishWithAudioOverRTSP(.opus, codecName: "opus", secondsPerPacket: 0.02)
    }

    /// Publishes the test camera and microphone for 3 s to the server's two-stream mount and checks what it wrote.
    private func publishWithAudioOverRTSP(_ codec: CaptureStreamOutput.AudioCodec, codecName: String, secondsPerPacket: Double,
                                          file: StaticString = #filePath, line: UInt = #line) async throws {
        let folder = try temporaryFolder()
        let server = try RTSPRecordServer(folder: folder)
        defer { server.kill() }
        let stream = CaptureStreamOutput()
        stream.audioCodec = codec
        let session = try await streamingSession(stream, microphone: .testMicrophone)
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: server.url("av"))
        let state = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(state, .live, "\(state)\n\(server.logText)", file: file, line: line)
        try await Task.sleep(for: .seconds(3))
        let sent = stream.statistics
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)
        try await Task.sleep(for: .seconds(1))
        XCTAssertGreaterThan(sent.audioBuffersSent, 90, "\(sent)", file: file, line: line)
        let probed = try probe(server.output)
        XCTAssertEqual(probed.codecs.sorted(), [codecName, "h264"].sorted(), server.logText, file: file, line: line)
        XCTAssertEqual(probed.stream("video")?["pix_fmt"] as? String, "yuv420p", file: file, line: line)
        XCTAssertGreaterThan(probed.videoFrames ?? 0, 45, "\(probed.videoFrames ?? 0) frames reached the server", file: file, line: line)
        let audio = (probed.stream("audio")?["duration"] as? String).flatMap(Double.init) ?? 0
        XCTAssertGreaterThan(audio, 2, "\(audio) s of audio reached the server", file: file, line: line)
        // Counted, not only declared.
        let audioPackets = try packets(server.output, "a").count
        XCTAssertGreaterThan(Double(audioPackets) * secondsPerPacket, 2, "\(audioPackets) audio packets reached the server", file: file, line: line)
    }

    /// The SRT listener is killed and started again: the stream goes reconnecting → live by itself and the
    /// new listener receives video that decodes.
    func testSRTListenerKilledAndRestartedGetsTheStreamBack() async throws {
        guard FileManager.default.isExecutableFile(atPath: SRTListener.path) else {
            throw TestEnvironment.missing("srt-live-transmit is not installed (apt install srt-tools)")
        }
        let folder = try temporaryFolder()
        let port = try freeLoopbackPort(udp: true)
        var listener = try SRTListener(port: port, output: folder.appendingPathComponent("first.ts"))
        defer { listener.kill() }
        let stream = CaptureStreamOutput()
        stream.reconnectPolicy = .init(initialDelay: 0.3, maxDelay: 1)
        let frames = CaptureVideoDataOutput()
        let log = FrameLog(frames)
        let session = try await streamingSession(stream, also: [frames])
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: "srt://127.0.0.1:\(port)")
        let first = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(first, .live, "\(first)")
        try await Task.sleep(for: .seconds(3))
        let before = log.count
        listener.kill()
        let lost = try await waitFor(stream, "reconnecting", within: 10)
        XCTAssertEqual(lost.name, "reconnecting", "\(lost)")
        listener = try SRTListener(port: port, output: folder.appendingPathComponent("second.ts"))
        let back = Date()
        let again = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(again, .live, "\(again)")
        let toLive = Date().timeIntervalSince(back)
        try await Task.sleep(for: .seconds(3))
        let during = Array(log.all.dropFirst(before))
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)
        listener.kill()

        XCTAssertLessThan(toLive, 2 + 1.2, "listener back → live took \(toLive) s")
        XCTAssertLessThan(FrameLog.longestGap(during), 0.2, "the frame output stalled while the stream reconnected")
        for file in ["first.ts", "second.ts"] {
            let url = folder.appendingPathComponent(file)
            let probed = try probe(url)
            XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"], file)
            XCTAssertEqual(probed.stream("video")?["pix_fmt"] as? String, "yuv420p", file)
            XCTAssertGreaterThan(probed.videoFrames ?? 0, 45, file)
        }
        // The new connection starts with a key frame and decodes from its first byte. (Its last packets may be
        // cut: srt-live-transmit loses what it buffered when it is stopped.)
        let second = folder.appendingPathComponent("second.ts")
        XCTAssertEqual(try packets(second, "v").first?.key, true, "the stream after the reconnect does not start with a key frame")
        let decoded = try runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", second.path, "-t", "2", "-f", "null", "-"])
        XCTAssertTrue(decoded.status == 0 && decoded.stderr.isEmpty, "the stream after the reconnect does not decode: \(decoded.stderr.prefix(600))")
        let stats = stream.statistics
        XCTAssertGreaterThanOrEqual(stats.reconnects, 1)
        XCTAssertGreaterThan(stats.bytesSent, 50_000)
    }

    /// Opus where the protocol carries it: over SRT the listener's MPEG-TS holds Opus with the H.264; for
    /// RTMP (FLV) and HLS it is refused before anything starts, naming AAC.
    func testOpusTravelsOverSRTAndIsRefusedWhereItCannot() async throws {
        guard FileManager.default.isExecutableFile(atPath: SRTListener.path) else {
            throw TestEnvironment.missing("srt-live-transmit is not installed (apt install srt-tools)")
        }
        let folder = try temporaryFolder()
        let stream = CaptureStreamOutput()
        stream.audioCodec = .opus
        for refused in ["rtmp://127.0.0.1/live/key", folder.appendingPathComponent("live.m3u8").path] {
            XCTAssertThrowsError(try stream.checkDestination(refused), refused) { error in
                XCTAssertTrue("\(error)".contains("AAC"), "\(error)")
            }
        }
        let port = try freeLoopbackPort(udp: true)
        let listener = try SRTListener(port: port, output: folder.appendingPathComponent("opus.ts"))
        defer { listener.kill() }
        let session = try await streamingSession(stream, also: [])
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: "srt://127.0.0.1:\(port)")
        let live = try await waitFor(stream, "live", within: 10)
        XCTAssertEqual(live, .live, "\(live)")
        try await Task.sleep(for: .seconds(3))
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)
        listener.kill()
        let probed = try probe(folder.appendingPathComponent("opus.ts"))
        XCTAssertEqual(probed.codecs.sorted(), ["h264", "opus"])
        XCTAssertGreaterThan(probed.videoFrames ?? 0, 45)
    }

    /// HLS: the playlist and its segments appear, old segments go as new ones come, ffprobe plays it.
    func testHLSPlaylistAndSegmentsAppearAndRoll() async throws {
        let folder = try temporaryFolder()
        let playlist = folder.appendingPathComponent("live.m3u8")
        let stream = CaptureStreamOutput()
        stream.keyFrameInterval = 1
        let session = try await streamingSession(stream)
        defer { Task { await session.stop() } }
        try stream.startStreaming(to: playlist.path)
        _ = try await waitFor(stream, "live", within: 10)
        try await Task.sleep(for: .seconds(10))
        let segments = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".ts") }.sorted()
        let text = try String(contentsOf: playlist, encoding: .utf8)
        let probed = try probe(playlist, countFrames: false)
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)

        XCTAssertTrue(text.contains("#EXTINF"), text)
        // max-files (playlist length + 2) finished segments, and the one being written.
        XCTAssertLessThanOrEqual(segments.count, 8, "old segments are deleted: \(segments)")
        XCTAssertFalse(segments.contains("live-00000.ts"), "the first segment rolled away: \(segments)")
        XCTAssertGreaterThanOrEqual(segments.count, 4, "\(segments)")
        XCTAssertEqual(probed.codecs.sorted(), ["aac", "h264"])
        let closed = try String(contentsOf: playlist, encoding: .utf8)
        XCTAssertTrue(closed.contains("#EXT-X-ENDLIST"), "a stopped stream closes its playlist")
        // The stop waits for the last segment to be finished and listed (the drain used to end when the
        // end-of-stream reached hlssink2, before it had written the segment).
        let last = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".ts") }.max())
        XCTAssertTrue(closed.contains(last), "\(last) is not in the closed playlist:\n\(closed)")
    }

    /// While the camera is interrupted the session's filler (black frames, silence) flows through the tee:
    /// the stream stays live and viewers see black for the gap, then the camera again.
    func testTheStreamGoesOnWithBlackFramesWhileTheCameraIsInterrupted() async throws {
        let folder = try temporaryFolder()
        let playlist = folder.appendingPathComponent("gap.m3u8")
        let stream = CaptureStreamOutput(), driver = InterruptionDriver()
        stream.keyFrameInterval = 1
        let session = try await streamingSession(stream, also: [driver])
        defer { Task { await session.stop() } }
        let seen = Locked<[String]>([])
        let updates = stream.stateUpdates()
        let watcher = Task { for await state in updates { seen.withLock { $0.append(state.name) } } }
        defer { watcher.cancel() }
        try stream.startStreaming(to: playlist.path)
        _ = try await waitFor(stream, "live", within: 10)
        try await Task.sleep(for: .seconds(1.5))
        // The camera goes away as v4l2src does: its end-of-stream runs through the tee first.
        try await driver.interrupt(.videoDeviceUnplugged, pushEndOfStream: true)
        try await Task.sleep(for: .seconds(1.5))
        XCTAssertEqual(stream.state, .live)
        try await driver.endInterruption(.videoDeviceUnplugged)
        try await Task.sleep(for: .seconds(1.5))
        stream.stopStreaming()
        _ = try await waitFor(stream, "idle", within: 5)

        for _ in 0..<100 where seen.withLock({ $0.last }) != "idle" { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(seen.withLock { $0 }, ["idle", "connecting", "live", "idle"], "the stream never left live during the gap")
        let raw = folder.appendingPathComponent("lumas.raw")
        let decoded = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-i", playlist.path, "-an",
                                                       "-vf", "scale=1:1,format=gray", "-f", "rawvideo", raw.path])
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
        let lumas = [UInt8](try Data(contentsOf: raw))
        let black = lumas.filter { $0 < 24 }.count
        XCTAssertEqual(Double(black) / 30, 1.5, accuracy: 0.35, "\(black) black frames of \(lumas.count)")
        XCTAssertGreaterThan(lumas.first ?? 0, 40)
        XCTAssertGreaterThan(lumas.last ?? 0, 40, "the camera's frames after recovery are streamed")
    }

    // MARK: The CLI

    /// `gcapture stream` publishes to nginx while recording the same session, prints its states and what it
    /// sent, and exits 0 at the end of --duration; the movie is finalized.
    func testStreamCommandPublishesAndRecords() throws {
        let folder = try temporaryFolder()
        let server = try NginxRTMPServer(folder: folder)
        defer { server.stop() }
        let movie = folder.appendingPathComponent("also.mp4")
        let run = try runProduct("gcapture", ["stream", server.url("cli"), "--camera", "test", "--microphone", "test-microphone",
                                              "--preset", "vga640x480", "--duration", "4", "--record", movie.path, "--json"], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        let events = run.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let states = events.filter { $0["event"] as? String == "streamState" }.compactMap { $0["state"] as? String }
        XCTAssertTrue(states.contains("live"), "\(states)")
        let finished = try XCTUnwrap(events.last { $0["event"] as? String == "streamFinished" }, run.stdout)
        XCTAssertGreaterThan(finished["bytesSent"] as? Int ?? 0, 50_000, "\(finished)")
        XCTAssertGreaterThan(finished["videoFrames"] as? Int ?? 0, 60, "\(finished)")
        XCTAssertEqual(try probe(movie).codecs.sorted(), ["aac", "h264"])
    }

    /// A run that ends without having been live once published nothing: it says why (the server's last
    /// refusal, the stream key hidden) and exits 1, where it used to say nothing and exit 0.
    func testStreamCommandThatNeverWentLiveFails() throws {
        let port = try freeLoopbackPort()
        let run = try runProduct("gcapture", ["stream", "rtmp://127.0.0.1:\(port)/live/secret-key", "--camera", "test",
                                              "--microphone", "none", "--duration", "2", "--json"], timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("Error: the stream never went live at rtmp://127.0.0.1:\(port)/live/***: ")
                      && run.stderr.contains("Connection refused"), run.stderr)
        XCTAssertFalse(run.stderr.contains("secret-key") || run.stdout.contains("secret-key"), "the stream key was printed")
        let events = run.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let finished = try XCTUnwrap(events.last { $0["event"] as? String == "streamFinished" }, run.stdout)
        XCTAssertTrue((finished["error"] as? String)?.contains("never went live") ?? false, "\(finished)")
    }

    func testStreamCommandNamesTheMistakeInTheURL() throws {
        for (url, words) in [("ftp://example.com/live", "not ftp://"), ("rtmp://example.com/live", "stream key"),
                             ("/no/such/folder/live.m3u8", "does not exist")] {
            let run = try runProduct("gcapture", ["stream", url, "--duration", "1"], timeout: 30)
            XCTAssertNotEqual(run.status, 0, url)
            XCTAssertTrue(run.stderr.contains(words), "\(url): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").filter { $0.hasPrefix("Error") }.count, 1, run.stderr)
        }
    }
}
