import Foundation
@testable import GCapture
import GStreamerKit
import XCTest

/// Does to a running session what its interruption machinery does (issue 11), so that the outputs' side
/// can be tested on a real graph: on the session's queue the device's source is unplugged and a live filler
/// put in front of its tee (black frames in the camera's caps, or silence in the session's audio format,
/// each buffer marked as a gap), then every output hears sessionWasInterrupted; at the end a fresh source of
/// the same device is swapped back in and every output hears sessionInterruptionEnded. Added to the session
/// as an output (it has no branch) to reach the session's queue and graph.
final class InterruptionDriver: CaptureOutput, @unchecked Sendable {
    private let joined = Locked<OutputContext?>(nil)
    /// The device each interrupted slot had, with its format.
    private let interrupted = Locked<[Bool: (device: CaptureDevice, selection: FormatSelection?)]>([:])
    /// Filler buffers pushed so far.
    let fillerBuffers = Locked(0)

    override func didJoin(_ context: OutputContext, branch: Bin?) { joined.withLock { $0 = context } }
    override func didDetach() { joined.withLock { $0 = nil } }

    /// The source in the slot is unplugged, the filler takes its place, the outputs hear of it.
    /// `pushEndOfStream`: the dying source's end-of-stream first goes through the tee, as v4l2src's and
    /// pulsesrc's do when their device goes away. `hooksAfter`: seconds the filler runs before the outputs
    /// hear of the interruption (the session may classify the failure after the filler is in). `fillerAfter`:
    /// seconds with no source at all before the filler comes (the session's reaction time).
    func interrupt(_ reason: CaptureSession.InterruptionReason, pushEndOfStream: Bool = false, hooksAfter: Double = 0,
                   fillerAfter: Double = 0) async throws {
        let video = reason.affectsVideo
        try await onSessionQueue("interrupting the \(video ? "camera" : "microphone")") { graph in
            let slot: SessionGraph.Slot = video ? .video : .audio
            // A stalled camera was unplugged already (see stall()).
            let stalled = self.interrupted.withLock { $0[video] }
            guard let failing = (video ? graph.videoSource : graph.audioSource).map({ ($0.device, $0.selection) }) ?? stalled else {
                throw CheckFailed(description: "the session has no \(video ? "camera" : "microphone") to interrupt")
            }
            if pushEndOfStream, let pad = (video ? graph.videoSource : graph.audioSource)?.bin.staticPad("src") {
                _ = pad.peer?.send(.endOfStream())
            }
            self.interrupted.withLock { $0[video] = failing }
            if fillerAfter > 0 {
                try graph.setSource(nil, for: slot)
                usleep(UInt32(fillerAfter * 1e6))
            }
            try graph.setSource(self.filler(for: failing.0, selection: failing.1, name: graph.makeSourceName(slot)), for: slot)
            if hooksAfter > 0 { usleep(UInt32(hooksAfter * 1e6)) }
            for output in graph.members { output.sessionWasInterrupted(reason) }
        }
    }

    /// The camera stops delivering without a word (a wedged driver): its source leaves the graph and
    /// nothing takes its place, until `interrupt` (the session's watchdog) puts the filler in.
    func stall() async throws {
        try await onSessionQueue("stalling the camera") { graph in
            guard let camera = graph.videoSource else { throw CheckFailed(description: "the session has no camera") }
            self.interrupted.withLock { $0[true] = (camera.device, camera.selection) }
            try graph.setSource(nil, for: .video)
        }
    }

    /// The device is back: a fresh source of it replaces the filler, the outputs hear the end.
    func endInterruption(_ reason: CaptureSession.InterruptionReason) async throws {
        let video = reason.affectsVideo
        try await onSessionQueue("ending the interruption") { graph in
            guard let (device, selection) = self.interrupted.withLock({ $0.removeValue(forKey: video) }) else {
                throw CheckFailed(description: "nothing was interrupted")
            }
            let unit = video
                ? try SourceBuilder.videoSource(for: device, selection: selection!, name: graph.makeSourceName(.video))
                : try SourceBuilder.audioSource(for: device, name: graph.makeSourceName(.audio))
            try graph.setSource(unit, for: video ? .video : .audio)
            for output in graph.members { output.sessionInterruptionEnded(reason) }
        }
    }

    private func filler(for device: CaptureDevice, selection: FormatSelection?, name: String) throws -> SourceUnit {
        let description = device.mediaType == .video
            ? "videotestsrc is-live=true pattern=black ! capsfilter name=caps caps=\"\(selection!.caps)\""
            : "audiotestsrc is-live=true wave=silence ! capsfilter name=caps caps=\"\(SourceBuilder.audioCaps)\""
        let bin = try Bin.parse(description)
        try bin.set("name", name)
        bin.element(named: "caps")?.staticPad("src")?.addProbe(.buffer) { [fillerBuffers] info in
            info.markBufferAsGap()
            fillerBuffers.withLock { $0 += 1 }
            return .ok
        }
        return SourceUnit(device: device, selection: selection, bin: bin)
    }

    private func onSessionQueue(_ what: String, _ body: @escaping @Sendable (SessionGraph) throws -> Void) async throws {
        guard let context = joined.withLock({ $0 }) else {
            throw CheckFailed(description: "the interruption driver is not in a running session")
        }
        try await within(10, what) {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                context.onSessionQueue { graph in
                    // The driver plays a device, so it needs the whole graph (its sources), not an output's view.
                    guard let graph = graph as? SessionGraph else {
                        return continuation.resume(throwing: CheckFailed(description: "the session stopped"))
                    }
                    do { try body(graph); continuation.resume() } catch { continuation.resume(throwing: error) }
                }
            }
        }
    }
}
