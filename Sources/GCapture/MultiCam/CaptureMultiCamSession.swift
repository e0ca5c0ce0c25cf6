import Dispatch
import Foundation

/// Several cameras at once (AVCaptureMultiCamSession). Inputs and outputs are added without connections and
/// each output is connected to one camera's video port (and, for sound, a microphone's audio port):
///
///     let session = CaptureMultiCamSession()
///     session.beginConfiguration()
///     for (camera, movie) in zip([front, document], [frontMovie, documentMovie]) {
///         let input = try CaptureDeviceInput(device: camera)
///         try session.addInputWithNoConnections(input)
///         try session.addOutputWithNoConnections(movie)
///         try session.addConnection(CaptureConnection(inputPorts: input.ports(for: .video, sourceDeviceType: nil,
///                                                                                sourceDevicePosition: .unspecified),
///                                                     output: movie))
///     }
///     try session.commitAndWait()
///     try await session.start()
///
/// Each camera runs in a capture session of its own (one GStreamer pipeline per camera, on its own queue), so an
/// unplugged or stalled camera interrupts only the outputs connected to it, and comes back by itself as a
/// single session's camera does; the other cameras' outputs never notice. A configuration whose
/// `hardwareCost` or `systemPressureCost` is over 1.0 is refused at commit, as AVFoundation refuses it.
public final class CaptureMultiCamSession: Sendable {
    /// Whether several cameras can run at once here: on Linux each camera streams in a pipeline of its own, so
    /// always. Whether a given set of cameras fits the machine is what `hardwareCost` says.
    public static var isMultiCamSupported: Bool { true }

    /// One camera's event, and the camera it concerns.
    public struct Event: Sendable {
        public let camera: CaptureDevice
        public let event: CaptureSession.Event
    }

    /// The userInfo key of the camera (a CaptureDevice) in the notifications the session posts for one
    /// camera (CaptureSession's names, with this session as object).
    public static let deviceUserInfoKey = "device"

    struct Configuration {
        var inputs: [CaptureInput] = []
        var outputs: [CaptureOutput] = []
        var connections: [CaptureConnection] = []
        var presets: [ObjectIdentifier: CaptureSession.Preset] = [:]
    }

    private struct State {
        var committed = Configuration()
        var staged: Configuration?
        var depth = 0
        var isRunning = false
        /// Per camera input that has connections, its own session.
        var cameras: [ObjectIdentifier: CameraSession] = [:]
    }

    public let name: String
    private let state = Locked(State())
    private let work: WorkQueue
    private let errors = Broadcast<CaptureSession.RuntimeError>()
    private let cameraEvents = Broadcast<Event>()
    /// Where the cost is read from: /sys (a test points it at a copy of a USB camera's sysfs).
    let sysfs: String

    public convenience init(name: String? = nil) {
        self.init(name: name, sysfs: "/sys")
    }

    init(name: String?, sysfs: String) {
        self.name = name ?? "multicam"
        self.sysfs = sysfs
        work = WorkQueue(label: "gcapture.\(self.name)")
    }

    deinit {
        for camera in state.withLock({ $0.cameras.values }) { camera.relay.cancel() }
    }

    // MARK: Inputs, outputs, connections

    public var inputs: [CaptureInput] { current.inputs }
    public var outputs: [CaptureOutput] { current.outputs }
    public var connections: [CaptureConnection] { current.connections }
    private var current: Configuration { state.withLock { $0.staged ?? $0.committed } }

    public func canAddInput(_ input: CaptureInput) -> Bool { addingInputProblem(input) == nil }

    /// Adds an input without connecting it to any output (AVCaptureMultiCamSession.addInputWithNoConnections).
    /// Outside begin/commitConfiguration the change is committed at once.
    public func addInputWithNoConnections(_ input: CaptureInput) throws(CaptureError) {
        if let problem = addingInputProblem(input) { throw .cannotAddInput(problem) }
        try mutate { $0.inputs.append(input) }
    }

    private func addingInputProblem(_ input: CaptureInput) -> String? {
        let current = current
        if current.inputs.contains(input) { return "\(input) is already in the session" }
        guard let device = (input as? CaptureDeviceInput)?.device else { return nil }
        if current.inputs.contains(where: { ($0 as? CaptureDeviceInput)?.device == device }) {
            return "\(device) is already an input of the session: a camera streams to one pipeline at a time"
        }
        return nil
    }

    public func canAddOutput(_ output: CaptureOutput) -> Bool { !outputs.contains(output) }

    /// Adds an output without connecting it (AVCaptureMultiCamSession.addOutputWithNoConnections): it gets
    /// nothing until a connection feeds it.
    public func addOutputWithNoConnections(_ output: CaptureOutput) throws(CaptureError) {
        guard canAddOutput(output) else { throw .cannotAddOutput("\(output.displayName) is already in the session") }
        try mutate { $0.outputs.append(output) }
    }

    public func canAddConnection(_ connection: CaptureConnection) -> Bool { addingConnectionProblem(connection) == nil }

    /// Connects input ports to an output (AVCaptureSession.addConnection): one camera's video port, or one
    /// microphone's audio port, per connection; an output takes at most one of each.
    public func addConnection(_ connection: CaptureConnection) throws(CaptureError) {
        if let problem = addingConnectionProblem(connection) { throw .cannotAddConnection(problem) }
        try mutate { $0.connections.append(connection) }
    }

    private func addingConnectionProblem(_ connection: CaptureConnection) -> String? {
        let current = current
        guard let output = connection.output else { return "the connection has no output: make it with init(inputPorts:output:)" }
        guard current.outputs.contains(output) else { return "\(output.displayName) is not an output of the session: add it first" }
        guard let port = connection.inputPorts.first, connection.inputPorts.count == 1 else {
            return "a connection carries one input port (it has \(connection.inputPorts.count))"
        }
        guard current.inputs.contains(port.input) else { return "\(port.input) is not an input of the session: add it first" }
        if current.connections.contains(connection) { return "the connection is already in the session" }
        if let taken = current.connections.first(where: { $0.output == output && $0.inputPorts.first?.mediaType == port.mediaType }) {
            return "\(output.displayName) already takes \(port.mediaType.rawValue) from \(taken.inputPorts.first?.description ?? "another port")"
        }
        return nil
    }

    public func removeInput(_ input: CaptureInput) throws(CaptureError) {
        try mutate { configuration in
            configuration.inputs.removeAll { $0 == input }
            configuration.connections.removeAll { $0.inputPorts.contains { $0.input == input } }
            configuration.presets[ObjectIdentifier(input)] = nil
        }
    }

    public func removeOutput(_ output: CaptureOutput) throws(CaptureError) {
        try mutate { configuration in
            configuration.outputs.removeAll { $0 == output }
            configuration.connections.removeAll { $0.output == output }
        }
    }

    public func removeConnection(_ connection: CaptureConnection) throws(CaptureError) {
        try mutate { $0.connections.removeAll { $0 == connection } }
    }

    /// The size and rate a camera streams at (a single session's `sessionPreset`, per camera; `.high` unless
    /// set). Takes effect at commit, like every change.
    public func setSessionPreset(_ preset: CaptureSession.Preset, for input: CaptureDeviceInput) throws(CaptureError) {
        try mutate { $0.presets[ObjectIdentifier(input)] = preset }
    }

    public func sessionPreset(for input: CaptureDeviceInput) -> CaptureSession.Preset {
        current.presets[ObjectIdentifier(input)] ?? .high
    }

    // MARK: Cost

    /// The largest share of a USB bus's isochronous bandwidth that the connected cameras reserve together (see
    /// MultiCamCost); 0 when no camera is on USB. Over 1.0 the configuration is refused at commit.
    public var hardwareCost: Double { (try? cost(of: current))?.hardwareCost ?? 0 }

    /// The share of this machine's processors the connected cameras' frames keep busy when each is recorded.
    /// Over 1.0 the configuration is refused at commit.
    public var systemPressureCost: Double { (try? cost(of: current))?.systemPressureCost ?? 0 }

    private func cost(of configuration: Configuration) throws(CaptureError) -> MultiCamCost {
        let cameras = try configuration.plan().map { plan throws(CaptureError) in
            let device = plan.camera.device
            let selection = try FormatSelector.select(plan.preset, from: device.formats, deviceName: device.description)
            return MultiCamCost.Camera(device: device, format: selection.format, frameRate: selection.frameRate.doubleValue)
        }
        return MultiCamCost(cameras: cameras, sysfs: sysfs)
    }

    // MARK: Configuration

    public func beginConfiguration() {
        state.withLock { state in
            if state.depth == 0 { state.staged = state.committed }
            state.depth += 1
        }
    }

    /// Applies the batch (see CaptureSession.commitConfiguration); a batch that cannot be applied is reported
    /// through runtimeErrors() and the previous configuration stays in force. Blocks until applied.
    public func commitConfiguration() {
        do { try commitAndWait() } catch { errors.yield(CaptureSession.RuntimeError(error: error, output: nil, isFatal: false)) }
    }

    /// commitConfiguration that throws why the batch was not applied; blocks until applied.
    public func commitAndWait() throws(CaptureError) {
        guard let staged = endConfiguration() else { return }
        try work.sync { () throws(CaptureError) in try self.apply(staged) }
    }

    /// commitAndWait() without blocking the caller.
    public func commit() async throws(CaptureError) {
        guard let staged = endConfiguration() else { return }
        try await work.run { () throws(CaptureError) in try self.apply(staged) }
    }

    private func endConfiguration() -> Configuration? {
        state.withLock { state in
            guard state.depth > 0 else { return nil }
            state.depth -= 1
            guard state.depth == 0 else { return nil }
            defer { state.staged = nil }
            return state.staged
        }
    }

    private func mutate(_ change: (inout Configuration) -> Void) throws(CaptureError) {
        let implicit = state.withLock { state -> Bool in
            let implicit = state.depth == 0
            if implicit { state.staged = state.committed; state.depth = 1 }
            change(&state.staged!)
            return implicit
        }
        if implicit { try commitAndWait() }
    }

    /// On the work queue: checks the whole batch, then brings every camera's session to its part of it. A camera's
    /// session that cannot take its part puts every camera back as it was.
    private func apply(_ configuration: Configuration) throws(CaptureError) {
        let cost = try cost(of: configuration)
        guard cost.hardwareCost <= 1, cost.systemPressureCost <= 1 else {
            throw .hardwareCostOverage(cost: max(cost.hardwareCost, cost.systemPressureCost), reason: cost.overageReason)
        }
        let plans = try configuration.plan()
        let previous = try state.withLock { $0.committed }.plan()
        do {
            try reconcile(to: plans)
        } catch {
            try? reconcile(to: previous)
            throw error
        }
        state.withLock { $0.committed = configuration }
    }

    /// Makes the cameras' sessions hold what the plans say: outputs that move leave their old camera before any
    /// joins a new one (an output is in one pipeline at a time); a camera no longer connected stops.
    private func reconcile(to plans: [CameraPlan]) throws(CaptureError) {
        let wanted = Dictionary(uniqueKeysWithValues: plans.map { (ObjectIdentifier($0.camera), $0) })
        let existing = state.withLock { $0.cameras }
        for (key, camera) in existing {
            guard let plan = wanted[key] else {
                camera.session.stopRunning()
                camera.relay.cancel()
                state.withLock { _ = $0.cameras.removeValue(forKey: key) }
                continue
            }
            let staying = camera.session.outputs.filter(plan.outputs.contains)
            if staying.count != camera.session.outputs.count {
                try camera.session.commitAndWait(inputs: camera.session.inputs, outputs: staying, preset: camera.session.sessionPreset)
            }
        }
        let running = state.withLock { $0.isRunning }
        for plan in plans {
            let key = ObjectIdentifier(plan.camera)
            let camera = existing[key] ?? makeCameraSession(for: plan.camera, number: state.withLock { $0.cameras.count } + 1)
            state.withLock { $0.cameras[key] = camera }
            try camera.session.commitAndWait(inputs: [plan.camera] + (plan.microphone.map { [$0] } ?? []),
                                             outputs: plan.outputs, preset: plan.preset)
            if running, !camera.session.isRunning { try camera.session.startAndWait() }
        }
    }

    private func makeCameraSession(for input: CaptureDeviceInput, number: Int) -> CameraSession {
        let session = CaptureSession(name: "\(name)-camera\(number)")
        let events = session.events()
        let camera = input.device
        let relay = Task { [weak self] in
            for await event in events { self?.relay(event, from: camera) }
        }
        return CameraSession(input: input, session: session, relay: relay)
    }

    /// One camera's event, told as the multi-camera session's: in events(), runtimeErrors() and CaptureSession's
    /// notifications with this session as object and the camera under deviceUserInfoKey.
    private func relay(_ event: CaptureSession.Event, from camera: CaptureDevice) {
        cameraEvents.yield(Event(camera: camera, event: event))
        var userInfo: [String: Any] = [Self.deviceUserInfoKey: camera]
        let name: Notification.Name
        switch event {
        case .runtimeError(let error):
            errors.yield(error)
            name = CaptureSession.runtimeErrorNotification
            userInfo[CaptureSession.runtimeErrorUserInfoKey] = error
        case .wasInterrupted(let reason):
            name = CaptureSession.wasInterruptedNotification
            userInfo[CaptureSessionInterruptionReasonKey] = reason.rawValue
        case .interruptionEnded(let reason):
            name = CaptureSession.interruptionEndedNotification
            userInfo[CaptureSessionInterruptionReasonKey] = reason.rawValue
        case .didStartRunning, .didStopRunning, .systemPressureChanged:
            return
        }
        NotificationCenter.default.post(name: name, object: self, userInfo: userInfo)
    }

    // MARK: Running

    public var isRunning: Bool { state.withLock { $0.isRunning } }

    /// Starts every connected camera at once and returns when each has given its first frame. If one cannot
    /// start, the others are stopped again and the error names the camera.
    public func start() async throws(CaptureError) {
        try await work.run { () throws(CaptureError) in try self.startOnQueue() }
    }

    /// start() that blocks the calling thread.
    public func startAndWait() throws(CaptureError) {
        try work.sync { () throws(CaptureError) in try self.startOnQueue() }
    }

    /// Stops every camera, finalizing the outputs that write files.
    public func stop() async {
        await work.run { self.stopOnQueue() }
    }

    /// stop() that blocks the calling thread.
    public func stopRunning() {
        work.sync { self.stopOnQueue() }
    }

    private func startOnQueue() throws(CaptureError) {
        guard !isRunning else { return }
        let cameras = state.withLock { Array($0.cameras.values) }
        let failures = Self.eachAtOnce(cameras) { camera throws(CaptureError) in try camera.session.startAndWait() }
        if let failure = failures.first {
            _ = Self.eachAtOnce(cameras) { camera in camera.session.stopRunning() }
            throw .startFailed(reason: "\(failure.camera.input.device) did not start: \(failure.error)", underlying: nil)
        }
        state.withLock { $0.isRunning = true }
    }

    private func stopOnQueue() {
        state.withLock { $0.isRunning = false }
        _ = Self.eachAtOnce(state.withLock { Array($0.cameras.values) }) { camera in camera.session.stopRunning() }
    }

    /// Runs `body` for every camera at the same time, each on a thread of its own (a start waits for the
    /// camera's first frame: cameras started one after another would add their waits), and returns when all
    /// have; the failures, in the cameras' order.
    private static func eachAtOnce(_ cameras: [CameraSession],
                                   _ body: @escaping @Sendable (CameraSession) throws(CaptureError) -> Void)
        -> [(camera: CameraSession, error: CaptureError)] {
        let failures = Locked<[Int: CaptureError]>([:])
        let group = DispatchGroup()
        for (index, camera) in cameras.enumerated() {
            DispatchQueue.global().async(group: group) {
                do throws(CaptureError) { try body(camera) } catch { failures.withLock { $0[index] = error } }
            }
        }
        group.wait()
        return failures.withLock { $0 }.sorted { $0.key < $1.key }.map { (cameras[$0.key], $0.value) }
    }

    // MARK: What happens to each camera

    /// Every camera's events from now on (one stream per call): interruptions name their camera.
    public func events() -> AsyncStream<Event> { cameraEvents.makeStream() }

    /// Runtime errors of the session and of every camera, from now on.
    public func runtimeErrors() -> AsyncStream<CaptureSession.RuntimeError> { errors.makeStream() }

    /// Whether any camera is interrupted now.
    public var isInterrupted: Bool { state.withLock { Array($0.cameras.values) }.contains { $0.session.isInterrupted } }

    /// Why a camera's outputs are interrupted now (empty: the camera delivers, or it is not connected).
    public func interruptionReasons(for input: CaptureDeviceInput) -> [CaptureSession.InterruptionReason] {
        state.withLock { $0.cameras[ObjectIdentifier(input)] }?.session.interruptionReasons ?? []
    }

    /// The session that runs one camera: for what a single session offers (its graph, pressure, figures).
    func cameraSession(for input: CaptureDeviceInput) -> CaptureSession? {
        state.withLock { $0.cameras[ObjectIdentifier(input)] }?.session
    }
}

/// One camera of a multi-camera session: its own session, and the task that relays that session's events.
struct CameraSession: Sendable {
    let input: CaptureDeviceInput
    let session: CaptureSession
    let relay: Task<Void, Never>
}
