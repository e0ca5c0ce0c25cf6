import Dispatch
import Foundation
import GStreamerKit

/// Receives a stream's state changes on the output's `delegateQueue`, in order.
public protocol CaptureStreamOutputDelegate: AnyObject, Sendable {
    func streamOutput(_ output: CaptureStreamOutput, didChangeState state: CaptureStreamOutput.State)
}

/// Publishes the session's video (H.264, 4:2:0, a profile players accept, a key frame every
/// `keyFrameInterval` seconds) and audio (AAC, or Opus over SRT and RTSP) live: to an RTMP server (rtmp://),
/// over SRT (srt://, calling a server or, with ?mode=listener, waiting for players), to an RTSP server that
/// accepts RECORD (rtsp://), or as HLS files for a web server (a playlist path ending in .m3u8). No AVFoundation
/// counterpart.
///
/// A supervisor keeps it up: when the server goes away or refuses, only this output's branch is cut off
/// (the session and its other outputs run on), and it is rebuilt after a capped, jittered backoff, starting
/// with a key frame; rtmp2sink never reconnects by itself, and srtsink's own reconnecting would hide the loss.
/// `state` and `stateUpdates()` say connecting, live, reconnecting (and when the next attempt is) or failed.
public final class CaptureStreamOutput: CaptureOutput, @unchecked Sendable {
    // @unchecked Sendable: inherited from CaptureOutput; its vars are read and written under `lock`.
    /// The H.264 profile, pinned with caps on the encoder's output.
    public enum Profile: String, Sendable, Codable, CaseIterable {
        case main
        case constrainedBaseline = "constrained-baseline"
    }

    /// The audio codec: AAC goes everywhere; Opus only where the container carries it (SRT's MPEG-TS,
    /// RTSP's RTP), not in FLV (RTMP) nor in HLS's segments, which players read as AAC.
    public enum AudioCodec: String, Sendable, Codable, CaseIterable {
        case aac
        case opus
    }

    private struct Settings {
        var videoBitRate: Int?
        var audioBitRate = 128_000
        var audioCodec = AudioCodec.aac
        var keyFrameInterval = 2.0
        var profile = Profile.main
        var videoEncoder: String?
        var policy = ReconnectPolicy.default
        var connectTimeout = 10.0
        var stallTimeout = 5.0
    }

    /// One published stream, from startStreaming to stopStreaming; it outlives its connections.
    private struct Publication {
        let destination: StreamDestination
        var encoding: StreamEncoding?
        /// Identifies the connection (the attached branch), so that late work for one never touches the next.
        var connection: UInt64 = 0
        var attached = false
        var attempt = 0
        var retry: DispatchWorkItem?
        var stopping = false
        /// This connection's counts, folded into the totals when it ends.
        var counters = ConnectionCounters()
        /// WHIP only: the connection's peer and server session.
        var whip: WHIPPublisher?
        var connectedAt: Date?
        var lastProgress = Date()
        var bytesAtLastProgress: UInt64 = 0
        var samples: [(time: Date, bytes: UInt64)] = []
    }

    /// Guards the state below (stored properties, which the weak delegate needs).
    private let lock = Lock()
    private var settings = Settings()
    private var context: OutputContext?
    private var publication: Publication?
    private var currentState = State.idle
    private var totals = Statistics()
    private var sink: Element?
    private let states = Broadcast<State>()
    private let workQueue = DispatchQueue(label: "gcapture.stream")
    /// The output's listener on the session's periodic tick while it publishes (no timer of its own).
    private var monitor: UUID?
    public let delegateQueue = DispatchQueue(label: "gcapture.stream.delegate")
    public weak var delegate: (any CaptureStreamOutputDelegate)? {
        get { locked { storedDelegate } } set { locked { storedDelegate = newValue } }
    }
    private weak var storedDelegate: (any CaptureStreamOutputDelegate)?

    public override init() {}

    private func locked<R>(_ body: () -> R) -> R {
        lock.withLock { body() }
    }

    // MARK: Settings (take effect at the next connection)

    /// Video bits per second; nil picks one from the frame size (720p: 1.8 Mbit/s, 1080p: 4 Mbit/s), or takes
    /// a running recording's when the stream joins its encode (one encode for both; see StreamingLive).
    public var videoBitRate: Int? { get { locked { settings.videoBitRate } } set { locked { settings.videoBitRate = newValue } } }
    /// AAC bits per second. Default 128 000.
    public var audioCodec: AudioCodec { get { locked { settings.audioCodec } } set { locked { settings.audioCodec = newValue } } }
    public var audioBitRate: Int { get { locked { settings.audioBitRate } } set { locked { settings.audioBitRate = max(8000, newValue) } } }
    /// Seconds between key frames: how long a player joining mid-stream waits for a picture, and HLS's
    /// segment length. Default 2.
    public var keyFrameInterval: Double {
        get { locked { settings.keyFrameInterval } } set { locked { settings.keyFrameInterval = min(max(0.1, newValue), 60) } }
    }
    /// Default main, which every server and player takes; constrained baseline for the oldest decoders.
    public var profile: Profile { get { locked { settings.profile } } set { locked { settings.profile = newValue } } }
    /// The H.264 encoder element; nil picks as the movie output does (hardware first, else x264enc).
    public var videoEncoder: String? { get { locked { settings.videoEncoder } } set { locked { settings.videoEncoder = newValue } } }
    public var reconnectPolicy: ReconnectPolicy { get { locked { settings.policy } } set { locked { settings.policy = newValue } } }
    /// Seconds a connection may take to start sending before it counts as failed. Default 10.
    public var connectTimeout: Double { get { locked { settings.connectTimeout } } set { locked { settings.connectTimeout = max(0.5, newValue) } } }
    /// Seconds a live connection may send nothing (a server that stopped reading) before it counts as lost. Default 5.
    public var stallTimeout: Double { get { locked { settings.stallTimeout } } set { locked { settings.stallTimeout = max(0.5, newValue) } } }

    // MARK: State

    public var state: State { locked { currentState } }
    /// Whether a stream is published (in any state but idle and failed).
    public var isStreaming: Bool { locked { publication != nil } }
    /// Where the stream goes, with its stream key and passwords left out.
    public var destinationDescription: String? { locked { publication?.destination.description } }
    /// The encoder of the current connection.
    public var activeVideoEncoder: String? { locked { publication?.encoding?.videoEncoder.factory } }

    /// The current state, then each change, until the stream consuming it is dropped.
    public func stateUpdates() -> AsyncStream<State> {
        let updates = states.makeStream()
        let current = state
        return AsyncStream { continuation in
            continuation.yield(current)
            let relay = Task {
                var first = true
                for await state in updates {
                    // A change between subscribing and reading the current state arrives twice: once is enough.
                    if first, state == current { first = false; continue }
                    first = false
                    continuation.yield(state)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in relay.cancel() }
        }
    }

    /// The totals so far, the current connection included.
    public var statistics: Statistics {
        locked {
            var figures = totals
            if let current = publication, current.attached {
                let counts = current.counters.snapshot
                if current.connectedAt != nil {
                    figures.videoFramesSent += counts.videoFrames
                    figures.audioBuffersSent += counts.audioBuffers
                    figures.liveSeconds += Date().timeIntervalSince(current.connectedAt!)
                }
                figures.droppedFrames += max(0, counts.framesIn - counts.videoFrames - inFlight)
                figures.bytesSent += current.bytesAtLastProgress
                figures.bitRate = Self.bitRate(current.samples)
            }
            return figures
        }
    }

    /// Frames between the branch's input and its parser's output at any moment (its input queue holds a
    /// few): not counted as dropped while the connection runs.
    private let inFlight = 8

    private static func bitRate(_ samples: [(time: Date, bytes: UInt64)]) -> Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time, last.bytes >= first.bytes else { return 0 }
        return Double(last.bytes - first.bytes) * 8 / last.time.timeIntervalSince(first.time)
    }

    // MARK: Publishing

    /// Starts publishing to `location` (rtmp://host/app/key, srt://host:port[?mode=listener],
    /// rtsp://host:port/path, or /path/to/stream.m3u8). The session must be running. Returns at once: the
    /// state goes connecting, then live; a refused or lost connection is retried by the supervisor.
    /// Throws for what cannot work at all: a URL that is not one of those, a missing plugin (naming its
    /// Debian package), a stream already published.
    public func startStreaming(to location: String) throws(CaptureError) {
        let destination = try checkDestination(location)
        let claimed: Result<OutputContext, CaptureError> = locked {
            guard publication == nil else { return .failure(.invalidSettings("the stream output publishes already; stop it first")) }
            guard let context = self.context else { return .failure(.sessionNotRunning) }
            publication = Publication(destination: destination)
            totals = Statistics()
            return .success(context)
        }
        let context = try claimed.get()
        Log.session.info("streaming to \(destination)")
        connect(context: context)
    }

    /// Checks what startStreaming would refuse about `location` without a session: the URL, the plugins
    /// it needs (naming their Debian package), HLS's folder, the H.264 encoder.
    @discardableResult
    public func checkDestination(_ location: String) throws(CaptureError) -> StreamDestination {
        let destination = try StreamDestination(location)
        try destination.checkInstalled()
        if audioCodec == .opus || destination.requiresOpus {
            guard destination.carriesOpus else {
                throw .invalidSettings("Opus audio does not travel in \(destination.kind == .rtmp ? "RTMP's FLV" : "HLS's segments"); use AAC there, or Opus over srt:// or rtsp://")
            }
            guard GStreamer.hasElement("opusenc") else { throw .missingPackage(element: "opusenc", package: ElementPackages.package(providing: "opusenc")!) }
            guard GStreamer.hasElement("opusparse") else { throw .missingPackage(element: "opusparse", package: ElementPackages.package(providing: "opusparse")!) }
        }
        if destination.kind == .hls { try destination.checkPlaylistFolder() }
        _ = try H264Encoder.choose(videoEncoder)
        return destination
    }

    /// Stops publishing: the stream ends cleanly (HLS's playlist is closed, an RTMP server hears the end).
    /// Returns at once; the state goes idle when the branch is gone.
    public func stopStreaming() {
        let (context, connection) = locked { () -> (OutputContext?, UInt64?) in
            guard publication != nil, publication?.stopping == false else { return (nil, nil) }
            publication?.stopping = true
            publication?.retry?.cancel()
            return (self.context, publication?.connection)
        }
        guard let connection else { return }
        guard let context else { return finish(state: .idle) }
        context.onSessionQueue { graph in
            if self.isCurrent(connection) { graph?.detachBranch(of: self, drain: self.drainsOnDetach) }
            self.endConnection(connection, lost: false)
            self.finish(state: .idle)
        }
    }

    // MARK: Connections

    private func isCurrent(_ connection: UInt64) -> Bool { locked { publication?.connection == connection && publication?.attached == true } }

    /// Builds and attaches a new branch on the session's queue.
    private func connect(context: OutputContext) {
        context.onSessionQueue { graph in
            guard let graph else { return self.finish(state: .failed(.sessionNotRunning)) }
            guard let destination = self.locked({ self.publication?.stopping == false ? self.publication?.destination : nil }) else { return }
            do throws(CaptureError) {
                try self.attach(to: graph, destination: destination)
                self.setState(.connecting)
                self.startMonitor()
            } catch {
                // What cannot be built now will not build at the next attempt either.
                Log.session.warning("the stream to \(destination) cannot be built: \(error)")
                self.finish(state: .failed(error))
            }
        }
    }

    private func encoding(for destination: StreamDestination, in graph: any OutputGraph) throws(CaptureError) -> StreamEncoding {
        let settings = locked { self.settings }
        let selection = graph.videoSelection
        let width = selection?.format.width ?? 1280, height = selection?.format.height ?? 720
        return StreamEncoding(destination: destination, profile: settings.profile,
                              videoBitRate: settings.videoBitRate ?? max(500_000, width * height * 2),
                              audioBitRate: settings.audioBitRate, audioCodec: destination.requiresOpus ? .opus : settings.audioCodec,
                              frameRate: Int((selection?.frameRate.doubleValue ?? 30).rounded()),
                              keyFrameInterval: settings.keyFrameInterval,
                              withAudio: graph.hasSource(.audio) && destination.carriesAudio,
                              videoEncoder: try H264Encoder.choose(settings.videoEncoder),
                              cameraPixelFormat: selection?.format.pixelFormat,
                              frameSize: selection.map { VideoEncode.Size(width: $0.format.width, height: $0.format.height) },
                              bitRateIsDefault: settings.videoBitRate == nil, videoEncoderIsDefault: settings.videoEncoder == nil)
    }

    /// On the session queue: the branch for one connection, with its counters, linked to the running tees.
    private func attach(to graph: any OutputGraph, destination: StreamDestination) throws(CaptureError) {
        let branch = try StreamConnectionBranch(encoding: try encoding(for: destination, in: graph), for: self, in: graph)
        locked {
            publication?.connection += 1
            publication?.encoding = branch.encoding
            publication?.counters = branch.counters
            publication?.connectedAt = nil
            publication?.lastProgress = Date()
            publication?.bytesAtLastProgress = 0
            publication?.samples = []
            publication?.attached = true
            self.sink = branch.sink
        }
        let whip = destination.kind == .whip
            ? try WHIPPublisher(withAudio: branch.encoding.withAudio, profile: branch.encoding.profile, encoder: branch.sharedEncoder) : nil
        whip?.takeFrames(from: branch.bin)
        do throws(CaptureError) {
            try graph.attachBranch(branch.bin, of: self, inputs: branch.inputs, encodedVideo: branch.sharedEncoder)
        } catch {
            locked { publication?.attached = false; self.sink = nil }
            whip?.close()
            throw error
        }
        if let whip { negotiate(whip, connection: locked { publication?.connection ?? 0 }, destination: destination) }
    }

    /// WHIP: the offer, the server's answer and ICE, off the session's queue; a refusal is a lost connection
    /// like any other, retried by the supervisor.
    private func negotiate(_ whip: WHIPPublisher, connection: UInt64, destination: StreamDestination) {
        locked { publication?.whip = whip }
        let timeout = connectTimeout
        workQueue.async {
            do throws(CaptureError) {
                guard let endpoint = URL(string: destination.location) else { throw .invalidSettings("\(destination) is not a URL") }
                try whip.connect(to: endpoint, timeout: timeout)
            } catch {
                let reason = error.description
                guard let context = self.locked({ self.context }) else { return }
                context.onSessionQueue { graph in
                    guard self.isCurrent(connection) else { return }
                    graph?.detachBranch(of: self, drain: false)
                    self.connectionLost(connection, reason: reason)
                }
            }
        }
    }

    /// Folds a connection's counts into the totals; `lost` counts a reconnect.
    private func endConnection(_ connection: UInt64, lost: Bool) {
        locked {
            guard let current = publication, current.connection == connection, current.attached else { return }
            let counts = current.counters.snapshot
            if let since = current.connectedAt {
                totals.videoFramesSent += counts.videoFrames
                totals.audioBuffersSent += counts.audioBuffers
                totals.liveSeconds += Date().timeIntervalSince(since)
                totals.droppedFrames += max(0, counts.framesIn - counts.videoFrames)
            } else {
                // Nothing of this connection reached a server: every frame it took was lost.
                totals.droppedFrames += counts.framesIn
            }
            totals.bytesSent += current.bytesAtLastProgress
            if lost { totals.reconnects += 1 }
            publication?.attached = false
            if let whip = publication?.whip { workQueue.async { whip.close() } }
            publication?.whip = nil
            sink = nil
        }
    }

    /// The connection failed (the session has cut its branch off already, or the monitor did): retry after
    /// the policy's delay, or give up.
    private func connectionLost(_ connection: UInt64, reason: String) {
        endConnection(connection, lost: true)
        let plan: (attempt: Int, delay: Double, context: OutputContext)? = locked {
            guard var current = publication, !current.stopping, let context else { return nil }
            current.attempt += 1
            publication = current
            if let limit = settings.policy.maxAttempts, current.attempt > limit { return (current.attempt, -1, context) }
            return (current.attempt, settings.policy.delay(beforeAttempt: current.attempt), context)
        }
        guard let plan else { return }
        let destination = locked { publication?.destination.description } ?? "the server"
        guard plan.delay >= 0 else {
            let error = CaptureError.outputFailed(output: "the stream to \(destination)",
                                                  underlying: GStreamerError(kind: .gError, message: reason))
            return finish(state: .failed(error))
        }
        Log.session.warning("the stream to \(destination) was lost (\(reason)); attempt \(plan.attempt) in \(String(format: "%.2f", plan.delay)) s")
        setState(.reconnecting(attempt: plan.attempt, nextRetry: Date().addingTimeInterval(plan.delay), reason: reason))
        let retry = DispatchWorkItem { [weak self] in
            guard let self, self.locked({ self.publication?.stopping == false }) else { return }
            self.connect(context: plan.context)
        }
        locked { publication?.retry = retry }
        workQueue.asyncAfter(deadline: .now() + plan.delay, execute: retry)
    }

    private func finish(state: State) {
        let connection = locked { publication?.connection }
        if let connection { endConnection(connection, lost: false) }
        locked {
            publication?.retry?.cancel()
            publication = nil
            if let monitor { SystemPressureMonitor.shared.remove(monitor) }
            monitor = nil
        }
        setState(state)
    }

    private func setState(_ state: State) {
        let (changed, delegate) = locked { () -> (Bool, (any CaptureStreamOutputDelegate)?) in
            guard currentState != state else { return (false, nil) }
            currentState = state
            return (true, storedDelegate)
        }
        guard changed else { return }
        Log.session.info("stream: \(state)")
        states.yield(state)
        if let delegate { delegateQueue.async { delegate.streamOutput(self, didChangeState: state) } }
    }

    // MARK: Monitor (every 250 ms on the work queue)

    /// On the tick the running session already has (SystemPressureMonitor's shared timer, every 250 ms).
    private func startMonitor() {
        locked {
            guard monitor == nil else { return }
            monitor = SystemPressureMonitor.shared.add { [weak self] _ in
                guard let self else { return }
                self.workQueue.async { self.check() }
            }
        }
    }

    /// Live once bytes leave for the server; lost when a connection sends nothing for too long (a server
    /// that accepts and never reads, a connection attempt that hangs): what the sink's own errors miss.
    private func check() {
        let now = Date()
        // The WHIP peer's state is read outside the lock (webrtcbin's own locks).
        let whip = locked { publication?.whip }
        let whipState = (connected: whip?.isConnected ?? false, lost: whip?.lostReason)
        let verdict: (connection: UInt64, becameLive: Bool, lostReason: String?, context: OutputContext?)? = locked {
            guard var current = publication, current.attached, !current.stopping else { return nil }
            let counts = current.counters.snapshot
            // The sinks that count what they send are asked; HLS files and the RTSP client are counted here.
            // WHIP's frames leave once its connection is up; until then they go nowhere.
            let isWHIP = current.whip != nil && current.whip === whip
            let sending = current.whip == nil || isWHIP && whipState.connected
            let bytes = sink?.property("stats").flatMap(SinkStatistics.bytesSent) ?? (counts.videoFrames > 0 && sending ? counts.encodedBytes : 0)
            var becameLive = false
            var lost: String?
            if isWHIP, let reason = whipState.lost {
                lost = reason
            } else if bytes > current.bytesAtLastProgress {
                current.bytesAtLastProgress = bytes
                current.lastProgress = now
                if current.connectedAt == nil, counts.videoFrames > 0 {
                    current.connectedAt = now
                    current.attempt = 0
                    becameLive = true
                }
            } else if current.connectedAt == nil, now.timeIntervalSince(current.lastProgress) > settings.connectTimeout {
                lost = "the server took no data for \(Int(settings.connectTimeout)) s"
            } else if current.connectedAt != nil, now.timeIntervalSince(current.lastProgress) > settings.stallTimeout {
                lost = "the server stopped taking data for \(Int(settings.stallTimeout)) s"
            }
            current.samples.append((now, bytes))
            current.samples.removeAll { now.timeIntervalSince($0.time) > 1.0 }
            publication = current
            return (current.connection, becameLive, lost, context)
        }
        guard let verdict else { return }
        if verdict.becameLive { setState(.live) }
        if let reason = verdict.lostReason, let context = verdict.context {
            context.onSessionQueue { graph in
                guard self.isCurrent(verdict.connection) else { return }
                graph?.detachBranch(of: self, drain: false)
                self.connectionLost(verdict.connection, reason: reason)
            }
        }
    }

    // MARK: The session's hooks

    /// Only a live stream has a server to end cleanly: one still connecting (or reconnecting) would hold the
    /// session's queue until the drain timed out, its sink stuck on a connection that never comes, and with
    /// it every stop behind it (a recording's, the session's).
    override var drainsOnDetach: Bool { state == .live }

    /// RTSP sends its media over RTP the moment it is encoded, so the frames are out as soon as the encoder
    /// has flushed; rtspclientsink's own end then waits for RTP's goodbye (RTCP BYE), which rtpsession
    /// schedules at a randomised RTCP interval, seconds away. Stopping that stream waited 5 s and more in one
    /// stop out of six; after 2 s the branch is stopped (TEARDOWN) with every frame already sent.
    override var drainLimit: Duration {
        locked { publication?.destination.kind } == .rtsp ? .seconds(2) : super.drainLimit
    }

    override func didJoin(_ context: OutputContext, branch: Bin?) {
        locked { self.context = context }
    }

    override func didDetach() { didDetach(drained: true) }

    /// The session stopped or the output was removed: the stream ends with it.
    override func didDetach(drained: Bool) {
        locked { context = nil }
        if isStreaming { finish(state: .idle) }
    }

    /// The supervisor reconnects; `state` says so, and `.failed` when the policy gives up.
    override var recoversFromBranchFailures: Bool { true }

    /// The branch failed (refused, connection lost, server gone): the session has detached it already.
    override func didFail(_ error: GStreamerError) {
        guard let connection = locked({ publication?.attached == true ? publication?.connection : nil }) else { return }
        connectionLost(connection, reason: error.message)
    }
}
