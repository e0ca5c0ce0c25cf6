import ArgumentParser
import Foundation
import GCapture

struct FramesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frames",
        abstract: "Capture frames for a while and report what arrived (count, rate, size, format, latency).",
        discussion: StopSignals.helpText)

    static let durationRange = NumberRange(0.1...3600.0, "seconds")

    @OptionGroup var logging: LoggingOptions

    @OptionGroup var device: CameraOptions<HighestQuality>

    @Option(parsing: .unconditional, help: "Seconds to capture, \(durationRange.accepted) (default: 2).", transform: durationRange.parser)
    var duration: Double = 2

    @Flag(help: "Print one JSON object per line (started, interrupted, interruptionEnded, systemPressure, finished).")
    var json = false

    func run() async throws {
        StopSignals.shared.install()
        let report = try await FrameCapture(camera: device.camera, preset: device.preset, duration: duration, noise: device.noise, json: json).run { started in
            if json {
                JSONLine.print(["event": "started", "camera": started.camera, "preset": device.preset.rawValue,
                                "startToFirstFrameMs": started.startMilliseconds].merging(started.deviceFields) { $1 })
            } else {
                Console.write("capturing from \(started.camera) for \(duration) s (first frame after \(String(format: "%.1f", started.startMilliseconds)) ms)")
            }
        }
        let stopped = StopSignals.shared.receivedName
        if json {
            var finished: [String: Any] = ["event": "finished", "frames": report.frames, "dropped": report.dropped,
                                           "fps": report.framesPerSecond, "width": report.width, "height": report.height,
                                           "pixelFormat": report.pixelFormat, "seconds": report.seconds,
                                           "withheldForPressure": report.withheldForPressure]
            if let stopped { finished["stoppedBy"] = stopped }
            JSONLine.print(finished)
        } else {
            Console.write("\(report.frames) frames in \(String(format: "%.2f", report.seconds)) s (\(String(format: "%.1f", report.framesPerSecond)) fps), "
                          + "\(report.width)x\(report.height) \(report.pixelFormat), \(report.dropped) dropped"
                          + (report.withheldForPressure > 0 ? ", \(report.withheldForPressure) withheld for system pressure" : "")
                          + (stopped.map { " (stopped by \($0))" } ?? ""))
        }
        await CaptureRuntime.shutDownForLeakReport()
    }
}

extension CaptureSession.Preset: ExpressibleByArgument {}

/// Runs a session with one frame output for a fixed time.
struct FrameCapture {
    struct Started { var camera: String; var startMilliseconds: Double; var deviceFields: [String: Any] }
    struct Report { var frames: Int; var dropped: Int; var seconds: Double; var framesPerSecond: Double
                    var width: Int; var height: Int; var pixelFormat: String; var withheldForPressure = 0 }

    var camera: String?
    var preset: CaptureSession.Preset
    var duration: Double
    var noise: Int
    /// How interruptions and system pressure changes are reported (JSON events or lines on stderr).
    var json = false

    func run(onStart: (Started) -> Void) async throws -> Report {
        let choice = try DeviceChoice.camera(camera, noise: noise)
        let chosen = choice.device
        let session = CaptureSession(name: "gcapture-frames")
        let output = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: chosen))
        try session.add(output)
        session.sessionPreset = preset
        try session.commitAndWait()
        let interruptions = InterruptionReporter(session, json: json)
        defer { withExtendedLifetime(interruptions) {} }

        let frames = output.sampleBuffers()
        let pressure = PressureReport.follow(session, json: json)
        defer { pressure.cancel() }
        let clock = ContinuousClock()
        let startedAt = clock.now
        try await session.start()
        let running = clock.now
        onStart(Started(camera: chosen.description, startMilliseconds: (running - startedAt).inMilliseconds,
                        deviceFields: DeviceChoice.startedFields([choice])))

        // The rate is measured by when frames arrive, not by their timestamps: a camera that falls behind
        // (a live test pattern starved of CPU, vivid in a slow VM) still stamps them at its nominal rate.
        let counting = Task { () -> (Int, SampleBuffer?, ContinuousClock.Instant?, ContinuousClock.Instant?) in
            var count = 0, last: SampleBuffer?
            var first: ContinuousClock.Instant?, final: ContinuousClock.Instant?
            for await frame in frames {
                let arrival = clock.now
                count += 1
                if first == nil { first = arrival }
                final = arrival
                last = frame
            }
            return (count, last, first, final)
        }
        // A signal ends the capture early; the report then says what arrived until then.
        await StopSignals.shared.sleep(seconds: duration)
        let seconds = (clock.now - running).inSeconds
        let withheld = session.pressureWithheldFrameCount
        await session.stop()
        counting.cancel()
        let (count, last, first, final) = await counting.value
        let span = first.flatMap { first in final.map { ($0 - first).inSeconds } } ?? 0
        return Report(frames: count, dropped: output.droppedFrameCount, seconds: seconds,
                      framesPerSecond: count > 1 && span > 0 ? Double(count - 1) / span : 0,
                      width: last?.width ?? 0, height: last?.height ?? 0, pixelFormat: last?.pixelFormat ?? "none",
                      withheldForPressure: withheld)
    }
}
