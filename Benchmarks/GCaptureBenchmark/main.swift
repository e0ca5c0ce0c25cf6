import Foundation
import GStreamerKit

// gcapture-bench: the capture engine and the plain GStreamer pipeline it amounts to, side by side in one run,
// reported as engine / plain ratios. Progress goes to stderr; the table (or --json) to stdout.

struct Options {
    enum Part: String { case latency, frames, photo, record, soak, v4l2, interruptions, preview, stream, `switch`, serve, preroll, motion, library, webrtc, multicam
        case motionVersus = "motion-vs", switchTest = "switch-test" }

    var seconds = 10.0
    var rounds = 3
    // 15 pairs gave medians from 1.19x to 1.51x on this noisy 2-core machine; 40 settle within a few percent.
    var latencyRounds = 40
    var photoShots = 40
    var burstRounds = 1
    var libraryAssets = 100_000
    var soakMinutes = 30.0
    var json = false
    var only: Part?

    static let usage = """
        usage: gcapture-bench [--seconds S] [--rounds N] [--latency-rounds N] [--photo-shots N] [--burst-rounds N]
                              [--only latency|frames|photo|record] [--json]
               gcapture-bench --only soak [--soak-minutes M] [--json]
               gcapture-bench --only v4l2 [--seconds S] [--rounds N] [--json]     (where /dev/video0 is a camera)
               gcapture-bench --only interruptions [--rounds N] [--json]          (where /dev/video0 is vivid)
               gcapture-bench --only preview [--seconds S] [--rounds N] [--json]  (on DISPLAY, else its own Xvfb)
               gcapture-bench --only stream [--seconds S] [--rounds N] [--json]   (needs nginx + libnginx-mod-rtmp)
               gcapture-bench --only switch [--rounds N] [--json]                 (where /dev/video0 and 1 are vivid)
               gcapture-bench --only switch-test [--rounds N] [--json]            (the same between two test cameras, anywhere)
               gcapture-bench --only multicam [--seconds S] [--rounds N] [--json] (where /dev/video0-3 are vivid)
               gcapture-bench --only serve [--seconds S] [--rounds N] [--json]    (the web page's live view, 1 and 10 viewers)
               gcapture-bench --only webrtc [--seconds S] [--rounds N] [--json]   (WebRTC against MJPEG: latency in Chromium, 1 and 10 viewers)
               gcapture-bench --only preroll [--seconds S] [--rounds N] [--json]  (a recording with a 5 s pre-roll ring and without)
               gcapture-bench --only motion [--seconds S] [--rounds N] [--json]   (a CaptureMotionOutput's CPU)
               gcapture-bench --only motion-vs [--seconds S] [--rounds N] [--json] (against motion 4.5.1; vivid, best two instances)
               gcapture-bench --only library [--assets N] [--rounds N] [--json]  (the photo library: 100,000 photos by default)

          --seconds S          seconds of 1080p30 frames per child process, of the photo burst and of each
                               recording (default 10)
          --rounds N           engine/plain child process pairs for the CPU and memory figures, and rounds of
                               recordings (engine, engine with photo and frame outputs, gst-launch-1.0 without
                               and with the sidecar, ffmpeg) (default 3)
          --latency-rounds N   engine/plain start → first frame pairs (default 40)
          --photo-shots N      photos one at a time per size, engine and camerabin, for shutter lag and
                               request → file (default 40)
          --burst-rounds N     rounds of the photo burst per size, each three child processes: photos, no
                               requests, on-demand floor (default 1)
          --only PART          run only the latency, the frames, the photo or the record part; `soak`
                               (never part of the default run) photographs 10 times a second and records
                               minute-long movies for --soak-minutes, and reports the growth of resident
                               memory after warm-up (goal < 2 MiB)
          --soak-minutes M     length of the soak (default 30)

        `--only v4l2` (never part of the default run; inside ../shared/testbed/v4l2-vm) measures the zero-shutter-lag
        ring on a real V4L2 camera's bounded pool against a hand-written copying ring in plain GStreamer.
        `--only interruptions` (the same) unplugs and silences vivid's camera under a running session: how soon
        the session says it was interrupted, and how soon it is back, against a plain v4l2src's start.
        `--only preview` (never part of the default run) compares the CPU of a CapturePreviewOutput's branch with a
        plain `queue ! videoconvert ! ximagesink` branch on the same source and tee.
        `--only stream` (never part of the default run) publishes 720p30 to an nginx-rtmp of its own on loopback:
        the CPU of `gcapture stream` against the equivalent gst-launch-1.0 publisher, and how soon a stream is
        live again once the server is back after a kill.
        `--only switch` (never part of the default run; two vivid cameras) switches a recording session between them 2×N times: the
        switch → the new camera's first frame against a plain v4l2src's start on it, and the gap across each switch.
        `--only switch-test` does the same between two test cameras of vivid's sizes and rates, against a plain
        videotestsrc's start: no device time on either side, so the difference is the engine's own work per switch.
        `--only multicam` (never part of the default run; four vivid cameras: n_devs=4 node_types=0x1,0x1,0x1,0x1) starts
        all four in a CaptureMultiCamSession against one alone: start → every camera's first frame (goal ≤ 1.5×) and the CPU
        of --seconds of capture (goal ≤ 4.2×), frames read in Swift.
        `--only serve` (never part of the default run) runs `gcapture serve` and compares its CPU with ten MJPEG viewers
        against one: the live view is encoded once, so ten should cost at most 1.2x one.
        `--only webrtc` (never part of the default run; needs chromium, chromedriver, python3-selenium, python3-gi) measures
        the live view glass to glass in headless Chromium, over WebRTC and over MJPEG, from the capture times the test
        camera stamps into its pictures (goal: WebRTC p95 ≤ 150 ms), and the server's CPU with ten WebRTC viewers against
        one (goal ≤ 1.3x).
        `--only preroll` (never part of the default run) records with a 5 s pre-roll ring and without: the recording's
        CPU, what waiting costs, the ring's size against bit rate × seconds, and trigger → event clip started.
        `--only motion` (never part of the default run) runs the 1080p30 session with and without a CaptureMotionOutput,
        alternating, and prints the difference of their CPU as a share of one core (goal ≤ 3 %).
        `--only motion-vs` (never part of the default run; inside ../shared/testbed/v4l2-vm, needs the motion package)
        runs a CaptureMotionOutput and motion (at 640x480 and at 640x360) on vivid's 640x480@25 webcam: the CPU of
        each over --seconds of a still picture (and of capturing only), and how soon each reports the square vivid
        shows when its show_square control is set. With two vivid instances (v4l2-vm --vivid-opts
        "n_devs=2 node_types=0x1,0x1 num_inputs=1,1 input_types=0x0,0x0") the two run at once, one per camera;
        with one, one after the other.
        `--only library` (never part of the default run) makes --assets small photos (100,000) in one folder and times
        the photo library's full index rebuild (goal ≤ 60 s), its index's size (≤ 50 MB), and the newest 100 fetched
        (≤ 20 ms at p95) beside the same answer by scanning the folder, as the web gallery did before the library;
        then one gallery page served by `gcapture serve` over that folder, first and half-way down (≤ 50 ms at p95),
        beside the folder-scanning listing /api/gallery.
          --json               print one JSON object with every figure instead of the table
        """

    /// nil when help was asked for.
    static func parse(_ arguments: [String]) throws(BenchmarkError) -> Options? {
        var options = Options()
        var remaining = arguments[...]
        func value(for flag: String) throws(BenchmarkError) -> String {
            guard let value = remaining.popFirst() else { throw .usage("\(flag) needs a value") }
            return value
        }
        func count(for flag: String) throws(BenchmarkError) -> Int {
            let text = try value(for: flag)
            guard let number = Int(text), number > 0 else { throw .usage("\(flag) must be a positive integer, not '\(text)'") }
            return number
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--seconds":
                let text = try value(for: argument)
                guard let seconds = Double(text), seconds > 0, seconds <= 3600 else {
                    throw .usage("--seconds must be between 0 and 3600, not '\(text)'")
                }
                options.seconds = seconds
            case "--rounds": options.rounds = try count(for: argument)
            case "--latency-rounds": options.latencyRounds = try count(for: argument)
            case "--photo-shots": options.photoShots = try count(for: argument)
            case "--burst-rounds": options.burstRounds = try count(for: argument)
            case "--assets": options.libraryAssets = try count(for: argument)
            case "--soak-minutes":
                let text = try value(for: argument)
                guard let minutes = Double(text), minutes >= 1, minutes <= 24 * 60 else {
                    throw .usage("--soak-minutes must be between 1 and 1440, not '\(text)'")
                }
                options.soakMinutes = minutes
            case "--json": options.json = true
            case "--only":
                let text = try value(for: argument)
                guard let part = Part(rawValue: text) else { throw .usage("--only takes latency, frames, photo, record, soak, v4l2, interruptions, preview, stream, switch, switch-test, serve, preroll, motion, motion-vs, library, webrtc or multicam, not '\(text)'") }
                options.only = part
            case "-h", "--help": return nil
            default: throw .usage("unknown argument '\(argument)'")
            }
        }
        return options
    }

    /// The soak takes half an hour and the V4L2 part needs a camera: they run only when asked for by name.
    func runs(_ part: Part) -> Bool { only == part || (only == nil && ![.soak, .v4l2, .interruptions, .preview, .stream, .switch, .switchTest, .serve, .preroll, .motion, .motionVersus, .library, .webrtc, .multicam].contains(part)) }
}

let arguments = Array(CommandLine.arguments.dropFirst())

// Hidden: one side of the frame delivery benchmark, a photo burst or a recording, in a process of its own.
if arguments.first == "child" {
    let childArguments = Array(arguments.dropFirst())
    if childArguments.first == PhotoBurst.childMode { exit(await PhotoBurst.childMain(childArguments)) }
    if childArguments.first == RecordingChild.childMode { exit(await RecordingChild.childMain(childArguments)) }
    if childArguments.first == LaunchedGraphChild.childMode { exit(await LaunchedGraphChild.childMain(childArguments)) }
    if childArguments.first?.hasPrefix("soak-") == true { exit(await SoakChild.childMain(childArguments)) }
    if childArguments.first?.hasPrefix("v4l2-") == true { exit(await V4L2RingChild.childMain(childArguments)) }
    if childArguments.first == PlainStartChild.childMode { exit(await PlainStartChild.childMain(childArguments)) }
    if childArguments.first == PreRollBenchmark.childMode { exit(await PreRollBenchmark.childMain(Array(childArguments.dropFirst()))) }
    if childArguments.first == MotionBenchmark.childMode { exit(await MotionBenchmark.childMain(Array(childArguments.dropFirst()))) }
    if childArguments.first == MotionVersusBenchmark.childMode { exit(await MotionVersusBenchmark.childMain(Array(childArguments.dropFirst()))) }
    if childArguments.first == PreviewBenchmark.childMode { exit(await PreviewBenchmark.childMain(Array(childArguments.dropFirst()))) }
    exit(await FrameChild.main(childArguments))
}

let options: Options
do {
    guard let parsed = try Options.parse(arguments) else {
        print(Options.usage)
        exit(0)
    }
    options = parsed
} catch {
    printError("gcapture-bench: \(error)\n\n\(Options.usage)")
    exit(2)
}

/// A part that reports on its own, outside the main table (it needs what the others do not: a display, a
/// media server, the built CLI): its figures as a table or JSON, then the program ends.
func reportAlone<Result: Encodable>(_ run: () async throws -> Result, table: (Result) -> String) async -> Never {
    do {
        let result = try await run()
        print(options.json ? String(decoding: try JSONEncoder().encode(result), as: UTF8.self) : table(result))
        exit(0)
    } catch {
        printError("gcapture-bench: \(error)")
        exit(1)
    }
}

switch options.only {
case .preview?:
    await reportAlone({ try PreviewBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: PreviewBenchmark.table)
case .motion?:
    await reportAlone({ try MotionBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: MotionBenchmark.table)
case .motionVersus?:
    await reportAlone({ try MotionVersusBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: MotionVersusBenchmark.table)
case .serve?:
    await reportAlone({ try ServeBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: ServeBenchmark.table)
case .webrtc?:
    await reportAlone({ try WebRTCBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: WebRTCBenchmark.table)
case .library?:
    await reportAlone({ try await LibraryBenchmark.run(assets: options.libraryAssets, rounds: options.rounds, progress: printError) },
                      table: LibraryBenchmark.table)
case .preroll?:
    await reportAlone({ try PreRollBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: PreRollBenchmark.table)
case .multicam?:
    await reportAlone({ try await MultiCamBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: MultiCamBenchmark.table)
case .stream?:
    await reportAlone({ try await StreamBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError) },
                      table: StreamBenchmark.table)
default:
    break
}

do {
    var report = BenchmarkReport(gstreamerVersion: GStreamer.version,
                                 processors: ProcessInfo.processInfo.activeProcessorCount,
                                 plainPipeline: Contestants.plainDescription)
    if options.runs(.latency) {
        report.latency = try await LatencyBenchmark.run(rounds: options.latencyRounds, progress: printError)
    }
    if options.runs(.frames) {
        report.frameDelivery = try FrameDeliveryBenchmark.run(seconds: options.seconds, rounds: options.rounds,
                                                              progress: printError)
    }
    if options.runs(.photo) {
        report.photo = try await PhotoBenchmark.run(shots: options.photoShots, burstSeconds: options.seconds,
                                                    burstRounds: options.burstRounds, progress: printError)
    }
    if options.runs(.record) {
        report.recording = try RecordingBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError)
    }
    if options.runs(.v4l2) {
        report.v4l2Ring = try V4L2RingBenchmark.run(seconds: options.seconds, rounds: options.rounds, progress: printError)
    }
    if options.runs(.interruptions) {
        report.interruptions = try await InterruptionBenchmark.run(rounds: options.rounds, progress: printError)
    }
    if options.runs(.switch) {
        report.switching = try await SwitchBenchmark.run(rounds: options.rounds, cameras: try SwitchBenchmark.v4l2Cameras(), progress: printError)
    }
    if options.runs(.switchTest) {
        report.switching = try await SwitchBenchmark.run(rounds: options.rounds, cameras: SwitchBenchmark.testCameras(), progress: printError)
    }
    if options.runs(.soak) {
        report.soak = try SoakBenchmark.run(minutes: options.soakMinutes, progress: printError)
    }
    print(options.json ? try report.json() : report.table())
} catch {
    printError("gcapture-bench: \(error)")
    exit(1)
}
