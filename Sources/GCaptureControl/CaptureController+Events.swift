import Foundation
import GCapture
import GCaptureDescription

extension CaptureController {
    // MARK: Events

    /// `trigger`: starts an event's clip, named by the movie naming rule (it begins with the movie output's
    /// pre-roll), or extends the one going on. Answers at once; the clip's course is told by the
    /// eventStarted, eventExtended and eventEnded events.
    func triggerEvent(source: String) throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        guard let movie = capture.movieOutput else { throw ControlFailure("this set-up records no movies (it has no movie output)") }
        if let recording { throw ControlFailure("recording to \(recording.url.path) (`record start`): `record stop` first, then trigger") }
        let recorder = eventRecorderForSettings(movie)
        let outcome: CaptureEventRecorder.TriggerOutcome
        do { outcome = try recorder.trigger(.init(source: source)) } catch { throw ControlFailure(error.description) }
        switch outcome {
        case .began(let url): return ControlReply(fields: ["path": url.path, "event": "began"], text: "event clip \(url.path)")
        case .extended(let url): return ControlReply(fields: ["path": url.path, "event": "extended"], text: "event clip \(url.path) goes on")
        case .queued: return ControlReply(fields: ["event": "queued"], text: "the next event clip starts once the last one is finished")
        }
    }

    /// The recorder for the post-roll and gap in force: one made with others (before a reload) is replaced
    /// between events.
    private func eventRecorderForSettings(_ movie: CaptureMovieFileOutput) -> CaptureEventRecorder {
        let gap = max(settings.postRoll, settings.eventGap ?? 0)
        if let eventRecorder, eventRecorder.currentClip != nil || (eventRecorder.postRoll == settings.postRoll && eventRecorder.eventGap == gap) {
            return eventRecorder
        }
        let files = outputFiles(settings.movieNaming, in: settings.movieFolder)
        let recorder = CaptureEventRecorder(movieOutput: movie, postRoll: settings.postRoll, eventGap: gap) { try files.next() }
        let stream = recorder.events(), events = events
        eventReports?.cancel()
        eventReports = Task {
            for await event in stream { Self.report(event, events: events) }
        }
        if capture.motionTriggersEvents, let motion = capture.motionOutput { recorder.follow(motion) }
        eventRecorder = recorder
        return recorder
    }

    /// The motion output's events as motionBegan/motionEnded; when it triggers events, the recorder follows it
    /// from the start of the run.
    func followMotion() {
        guard let motion = capture.motionOutput else { return }
        let stream = motion.events(), events = events, now = motionNow
        motionReports = Task {
            for await event in stream {
                switch event {
                case .motionBegan(let found):
                    let fields = Self.fields(found)
                    now.withLock { $0 = fields["box"] as? [Double] }
                    events.emit("motionBegan", fields, text: "motion at \(Self.describe(found.boundingBox))")
                case .motionEnded(let found):
                    now.withLock { $0 = nil }
                    events.emit("motionEnded", Self.fields(found), text: nil)
                }
            }
        }
        if capture.motionTriggersEvents, let movie = capture.movieOutput { _ = eventRecorderForSettings(movie) }
    }

    private nonisolated static func fields(_ motion: CaptureMotionOutput.Motion) -> ControlFields {
        let box = motion.boundingBox
        return ["box": box.controlFraction, "score": motion.score, "time": motion.presentationTime]
    }

    private nonisolated static func describe(_ box: CGRect) -> String {
        String(format: "x %.2f y %.2f, %.2f × %.2f", box.minX, box.minY, box.width, box.height)
    }

    nonisolated static func report(_ event: CaptureEventRecorder.Event, events: ControlEvents) {
        switch event {
        case .began(let clip):
            events.emit("eventStarted", ["path": clip.url.path, "trigger": clip.triggers.first?.source ?? NSNull()],
                         text: "event: recording \(clip.url.path) (\(clip.triggers.first?.source ?? "trigger"))")
        case .extended(let clip, let trigger):
            events.emit("eventExtended", ["path": clip.url.path, "trigger": trigger.source, "triggers": clip.triggers.count], text: nil)
        case .ended(let clip, let record, let error):
            events.emit("eventEnded", ["path": clip.url.path, "record": EventClipRecord.url(forClip: clip.url).path,
                                       "duration": record.duration ?? 0, "preRoll": record.preRoll,
                                       "triggers": record.triggers.map(\.source), "complete": record.complete,
                                       "error": error.map { $0.description } ?? NSNull()],
                         text: "event \(record.complete ? "recorded" : "failed") \(clip.url.path): \(String(format: "%.2f", record.duration ?? 0)) s, "
                            + "\(record.triggers.count) trigger\(record.triggers.count == 1 ? "" : "s")" + (error.map { " (\($0))" } ?? ""))
        }
    }

    /// The schedule in force: a trigger every `settings.triggerInterval` seconds from now (none without one).
    func scheduleTriggers() {
        eventSchedule?.cancel()
        eventSchedule = nil
        guard let interval = settings.triggerInterval, interval > 0, capture.movieOutput != nil else { return }
        let events = events
        eventSchedule = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int(interval * 1000)))
                guard !Task.isCancelled, let self else { return }
                if case .failure(let error) = await self.perform(.trigger(source: "schedule"), trigger: "schedule") {
                    events.emit("triggerFailed", ["error": error.message, "trigger": "schedule"], text: "scheduled trigger failed: \(error.message)")
                }
            }
        }
    }

    /// At the end of the run: the clip going on is finished (its post-roll cut short), and no trigger is taken.
    func endEvents() async {
        eventSchedule?.cancel()
        motionReports?.cancel()
        capture.motionOutput?.onMotionBegan = nil
        await eventRecorder?.endEvent(closing: true)
        // Its last event told before the run's end.
        try? await Task.sleep(for: .milliseconds(50))
        eventReports?.cancel()
    }
}

extension CGRect {
    /// `[x, y, width, height]` as the protocol writes a normalized rectangle (plain Doubles: JSON takes no CGFloat).
    var controlFraction: [Double] { [minX, minY, width, height].map { Double($0) } }
}
