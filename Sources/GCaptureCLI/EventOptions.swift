import ArgumentParser
import GCapture

/// The options of event recording (`trigger`, SIGUSR2), shared by `run` and `serve`.
struct EventOptions: ParsableArguments {
    @Option(parsing: .unconditional,
            help: "Seconds each recording and event clip begins before it was started: the session's last seconds stay in memory (H.264 and AAC) while it runs, \(NumberRanges.preRoll.accepted) (default: 0).",
            transform: NumberRanges.preRoll.parser)
    var preRoll: Double = 0

    @Option(parsing: .unconditional,
            help: "Seconds an event's clip goes on after its last trigger, \(NumberRanges.postRoll.accepted) (default: \(Int(CaptureEventRecorder.defaultPostRoll))).",
            transform: NumberRanges.postRoll.parser)
    var postRoll: Double = CaptureEventRecorder.defaultPostRoll

    @Option(parsing: .unconditional,
            help: "Seconds after an event's last trigger within which another goes on in the same clip (the quiet part paused when longer than --post-roll), \(NumberRanges.eventGap.accepted) (default: the post-roll).",
            transform: NumberRanges.eventGap.parser)
    var eventGap: Double?

    @Option(parsing: .unconditional,
            help: "Trigger an event every this many seconds (a schedule), \(NumberRanges.triggerInterval.accepted).",
            transform: NumberRanges.triggerInterval.parser)
    var triggerEvery: Double?

    @Flag(help: "Detect motion in the picture: each motion is an event (its clip held while the motion goes on), told by motionBegan and motionEnded.")
    var motion = false
}
