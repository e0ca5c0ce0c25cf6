import ArgumentParser
import Dispatch
import Foundation
import GCapture
import GCaptureControl
import GCaptureSupport

struct StreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Publish the camera and microphone live: RTMP, SRT, RTSP or HLS files, reconnecting by itself.",
        discussion: """
        URL is rtmp://host/app/key (nginx-rtmp, SRS, a CDN's ingest), srt://host:port (a caller; add ?mode=listener to wait for players instead), rtsp://host:port/path (a server that takes RECORD, such as MediaMTX), a WHIP endpoint (https://host/…/whip, or whip://host:port/path for plain HTTP: WebRTC, as OBS publishes to MediaMTX, Janus, LiveKit or a CDN's ingest; audio is then Opus), or a playlist path ending in .m3u8 for HLS files beside it, for a web server to serve. Video is H.264 Main 4:2:0 with a key frame every --key-interval seconds, audio AAC.

        When the server goes away or refuses, the stream is retried after a growing, capped delay and goes live again when the server is back; each state (connecting, live, reconnecting, failed) is printed. With --record, the same session writes a movie too, from the same H.264 encode as the stream (at the movie's bit rate) unless --bitrate asks the stream for another rate.

        \(StopSignals.helpText)

        Examples:
          gcapture stream rtmp://localhost/live/cam --duration 60
          gcapture stream "srt://192.168.1.10:9000" --microphone none --bitrate 2500
          gcapture stream /var/www/live/cam.m3u8 --record cam.mp4
        """)

    @OptionGroup var logging: LoggingOptions

    @Argument(help: "Where to publish: rtmp://, rtmps://, srt://, rtsp://, a WHIP endpoint (https://, whip://) or a playlist path ending in .m3u8.")
    var url: String

    @OptionGroup var device: CameraOptions<LiveStreaming>

    @Option(help: DeviceChoice.microphoneHelp(none: "for video only"))
    var microphone: String?

    static let bitRateRange = NumberRange(100...100_000, "kbit/s")
    static let durationRange = NumberRange(0.1...2_592_000.0, "seconds")
    static let keyIntervalRange = NumberRange(0.1...60.0, "seconds")

    @Option(parsing: .unconditional, help: "Video bit rate, \(bitRateRange.accepted); default: from the frame size (720p: 1800).",
            transform: bitRateRange.parser)
    var bitrate: Int?

    @Option(parsing: .unconditional, help: "Seconds between key frames, \(keyIntervalRange.accepted) (default: 2).", transform: keyIntervalRange.parser)
    var keyInterval: Double = 2

    @Option(help: "H.264 profile: `main` (default) or `constrained-baseline`.")
    var profile: CaptureStreamOutput.Profile = .main

    @Option(help: "Audio codec: `aac` (default) or `opus` (over srt:// and rtsp:// only; WHIP always sends Opus).")
    var audioCodec: CaptureStreamOutput.AudioCodec = .aac

    @Option(parsing: .unconditional, help: "Seconds to publish, \(durationRange.accepted); without it, until Ctrl-C or another signal.",
            transform: durationRange.parser)
    var duration: Double?

    @Option(help: "Also record the session to this movie (.mp4, or .mkv).")
    var record: String?

    @Flag(help: MovieDestination.overwriteHelp)
    var overwrite = false

    @Flag(help: "Print one JSON object per line: streamState (at each change), progress (each second), streamFinished.")
    var json = false

    func run() async throws {
        StopSignals.shared.install()
        let stream = CaptureStreamOutput()
        stream.videoBitRate = bitrate.map { $0 * 1000 }
        stream.keyFrameInterval = keyInterval
        stream.profile = profile
        stream.audioCodec = audioCodec
        // The URL first: a mistake in it is the user's to fix before any device is opened.
        try ValidationError.fromSettings { () throws(CaptureError) in _ = try stream.checkDestination(url) }
        let movieDestination = try record.map { try MovieDestination($0, option: "--record") }
        try movieDestination?.makeRoom(overwrite: overwrite, option: "--record")
        let movieURL = movieDestination?.url
        let cameraChoice = try device.cameraChoice()
        let microphoneChoice = try DeviceChoice.microphone(microphone)
        let camera = cameraChoice.device, microphone = microphoneChoice?.device

        let session = CaptureSession(name: "gcapture-stream")
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: camera))
        if let microphone { try session.add(CaptureDeviceInput(device: microphone)) }
        try session.add(stream)
        let movie = movieDestination.map { destination in
            let movie = CaptureMovieFileOutput()
            movie.fileType = destination.fileType
            // The recording keeps to --duration itself, however long the stream takes to stop.
            movie.maxRecordedDuration = duration
            return movie
        }
        if let movie { try session.add(movie) }
        session.sessionPreset = device.preset
        try session.commitAndWait()
        let interruptions = InterruptionReporter(session, json: json)
        defer { withExtendedLifetime(interruptions) {} }
        try await session.start()

        let events = EventPrinter(json: json)
        let states = stream.stateUpdates()
        let recorder = RecordingObserver()
        if let movie, let movieURL {
            // The recording first: the encode the two share then has the movie's bit rate and key frames.
            movie.startRecording(to: movieURL, recordingDelegate: recorder)
            _ = await waitUntil(seconds: 5) { !recorder.isIdle }
        }
        do {
            try stream.startStreaming(to: url)
        } catch {
            await session.stop()
            throw error
        }
        // With the stream key hidden.
        let destination = stream.destinationDescription ?? url
        events.emit(["event": "streamStarted", "destination": destination, "camera": camera.description,
                     "microphone": microphone?.description ?? "none", "videoEncoder": stream.activeVideoEncoder ?? NSNull()]
                        .merging(DeviceChoice.startedFields([cameraChoice, microphoneChoice])) { $1 },
                    text: "streaming \(camera.localizedName)" + (microphone.map { " and \($0.localizedName)" } ?? "")
                        + " to \(destination)")

        let stopped = Locked(false)
        StopSignals.shared.onStop { _ in stopped.withLock { $0 = true } }
        let started = Date()
        // Why the server did not take the stream, the last time it did not.
        let lastRefusal = Locked<String?>(nil)
        let printer = Task {
            for await state in states {
                if case .reconnecting(_, _, let reason) = state { lastRefusal.withLock { $0 = reason } }
                var object: [String: Any] = state.eventFields
                object["event"] = "streamState"
                events.emit(object, text: "stream: \(state)")
            }
        }
        var failure: CaptureError?
        while true {
            try? await Task.sleep(for: .milliseconds(250))
            if stopped.withLock({ $0 }) { break }
            if let duration, Date().timeIntervalSince(started) >= duration { break }
            if case .failed(let error) = stream.state { failure = error; break }
            if let error = recorder.takeFailure() {
                failure = error
                break
            }
            events.streamProgress(stream, elapsed: Date().timeIntervalSince(started))
        }
        stream.stopStreaming()
        movie?.stopRecording()
        _ = await waitUntil(seconds: 5) { stream.state == .idle || stream.state.name == "failed" }
        // The movie is finished when its delegate says so: copied to a plain MP4, durable, its recovery sidecar
        // removed. isRecording turns false before that, and a run that ended then left the sidecar and the
        // fragmented file behind (seen under ThreadSanitizer, where the copy is slow). As `record` does, this
        // waits for as long as settling takes: the engine tells the delegate of every file it started.
        while recorder.hasFileOpen { try? await Task.sleep(for: .milliseconds(50)) }
        if failure == nil { failure = recorder.takeFailure() }
        await session.stop()
        printer.cancel()
        let stats = stream.statistics
        // Retrying is right while the run lasts (the server may come); a run that ends without having been
        // live once published nothing, and says so.
        var ending: (any Error)? = failure
        if failure == nil, stats.liveSeconds == 0, stats.bytesSent == 0 {
            ending = CommandFailure("the stream never went live at \(destination): "
                                    + (lastRefusal.withLock { $0 } ?? "the server did not take it in time"))
        }
        var finished: [String: Any] = ["event": "streamFinished", "seconds": Date().timeIntervalSince(started), "liveSeconds": stats.liveSeconds,
                                       "bytesSent": stats.bytesSent, "videoFrames": stats.videoFramesSent, "audioBuffers": stats.audioBuffersSent,
                                       "dropped": stats.droppedFrames, "reconnects": stats.reconnects,
                                       "error": ending.map { "\($0)" } ?? NSNull()]
        if let movieURL { finished["recording"] = movieURL.path }
        if let signal = StopSignals.shared.receivedName { finished["stoppedBy"] = signal }
        events.emit(finished, text: "stream finished: " + String(format: "%.1f s live, %.1f MB sent, %d frames, %d dropped, %d reconnects",
                                                                   stats.liveSeconds, Double(stats.bytesSent) / 1e6, stats.videoFramesSent,
                                                                   stats.droppedFrames, stats.reconnects)
                        + (movieURL.map { ", recorded \($0.path)" } ?? ""))
        if let ending { throw ending }
    }

    private func waitUntil(seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return true
    }
}

extension CaptureStreamOutput.Profile: ExpressibleByArgument {}
extension CaptureStreamOutput.AudioCodec: ExpressibleByArgument {}

extension EventPrinter {
    func streamProgress(_ stream: CaptureStreamOutput, elapsed: Double) {
        let stats = stream.statistics
        if json {
            // One line a second is enough for a log.
            guard Int(elapsed * 4) % 4 == 0 else { return }
            emit(["event": "progress", "elapsed": elapsed, "state": stream.state.name, "bytesSent": stats.bytesSent,
                  "videoFrames": stats.videoFramesSent, "dropped": stats.droppedFrames, "bitRate": stats.bitRate,
                  "reconnects": stats.reconnects], text: "")
        } else {
            let state = stream.state.name.padding(toLength: 12, withPad: " ", startingAt: 0)
            Console.progress(String(format: "%6.1f s  ", elapsed) + state
                             + String(format: " %7.0f kbit/s  %d frames  %d dropped  %d reconnects", stats.bitRate / 1000,
                                      stats.videoFramesSent, stats.droppedFrames, stats.reconnects))
        }
    }
}
