import ArgumentParser
import Foundation
import GCapture

struct FramesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frames",
        abstract: "Capture frames for a while and report what arrived (count, rate, size, format, latency).")

    @OptionGroup var logging: LoggingOptions

    @Option(help: "Camera id (see `gcapture devices`); default: the first real camera, else `test`.")
    var camera: String?

    @Option(help: "Session preset: \(CaptureSession.Preset.allCases.map(\.rawValue).joined(separator: ", ")).")
    var preset: CaptureSession.Preset = .high

    @Option(help: "Seconds to capture.")
    var duration: Double = 2

    @Option(help: "Sensor noise of the test camera, ± 8-bit steps.")
    var noise: Int = 0

    @Flag(help: "Print one JSON object per line (started, finished).")
    var json = false

    func validate() throws {
        guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be between 0 and 3600 seconds") }
    }

    func run() async throws {
        let report = try await FrameCapture(camera: camera, preset: preset, duration: duration, noise: noise).run { started in
            if json {
                JSONLine.print(["event": "started", "camera": started.camera, "preset": preset.rawValue,
                                "startToFirstFrameMs": started.startMilliseconds])
            } else {
                print("capturing from \(started.camera) for \(duration) s (first frame after \(String(format: "%.1f", started.startMilliseconds)) ms)")
            }
        }
        if json {
            JSONLine.print(["event": "finished", "frames": report.frames, "dropped": report.dropped,
                            "fps": report.framesPerSecond, "width": report.width, "height": report.height,
                            "pixelFormat": report.pixelFormat, "seconds": report.seconds])
        } else {
            print("\(report.frames) frames in \(String(format: "%.2f", report.seconds)) s (\(String(format: "%.1f", report.framesPerSecond)) fps), "
                  + "\(report.width)x\(report.height) \(report.pixelFormat), \(report.dropped) dropped")
        }
        CaptureRuntime.shutDownForLeakReport()
    }
}

extension CaptureSession.Preset: ExpressibleByArgument {}

/// Runs a session with one frame output for a fixed time.
struct FrameCapture {
    struct Started { var camera: String; var startMilliseconds: Double }
    struct Report { var frames: Int; var dropped: Int; var seconds: Double; var framesPerSecond: Double
                    var width: Int; var height: Int; var pixelFormat: String }

    var camera: String?
    var preset: CaptureSession.Preset
    var duration: Double
    var noise: Int

    func run(onStart: (Started) -> Void) async throws -> Report {
        let chosen = try CameraChoice.device(camera, noise: noise)
        let session = CaptureSession(name: "gcapture-frames")
        let output = CaptureVideoDataOutput()
        session.beginConfiguration()
        try session.addInput(CaptureDeviceInput(device: chosen))
        try session.addOutput(output)
        session.sessionPreset = preset
        try session.commitConfiguration()

        let frames = output.sampleBuffers()
        let clock = ContinuousClock()
        let startedAt = clock.now
        try await session.start()
        onStart(Started(camera: chosen.description, startMilliseconds: milliseconds(clock.now - startedAt)))

        let counting = Task { () -> (Int, SampleBuffer?, Double?, Double?) in
            var count = 0, last: SampleBuffer?
            var first: Double?, final: Double?
            for await frame in frames {
                count += 1
                if first == nil { first = frame.presentationTime }
                final = frame.presentationTime
                last = frame
            }
            return (count, last, first, final)
        }
        try await Task.sleep(for: .milliseconds(Int(duration * 1000)))
        await session.stop()
        counting.cancel()
        let (count, last, first, final) = await counting.value
        let span = (final ?? 0) - (first ?? 0)
        return Report(frames: count, dropped: output.droppedFrameCount, seconds: duration,
                      framesPerSecond: count > 1 && span > 0 ? Double(count - 1) / span : 0,
                      width: last?.width ?? 0, height: last?.height ?? 0, pixelFormat: last?.pixelFormat ?? "none")
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

/// One JSON object per line, flushed at once: a program reading our stdout through a pipe must see each
/// event when it happens, not when a buffer fills or we exit.
enum JSONLine {
    static func print(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        Swift.print(String(decoding: data, as: UTF8.self))
        fflush(nil)
    }
}
