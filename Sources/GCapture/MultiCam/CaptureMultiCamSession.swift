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
        var layouts: [ObjectIdentifier: CompositeLayout] = [:]
    }

    private struct State {
        var batch = ConfigurationBatch(committed: Configuration())
        var isRunning = false
        /// Per camera input that has connections, its own session.
        var cameras: [ObjectIdentifier: CameraSession] = [:]
        /// Per output connected to several cameras, the session of their composite picture.
        var composites: [ObjectIdentifier: CompositeRig] = [:]
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
        for composite in state.withLock({ $0.composites.values }) { composite.relay.cancel() }
    }

    /// Sessions are numbered as they are made: a name is never given twice.
    private let sessionsMade = Locked(0)

    // MARK: Inputs, outputs, connections

    public var inputs: [CaptureInput] { current.inputs }
    public var outputs: [CaptureOutput] { current.outputs }
    public var connections: [CaptureConnection] { current.connections }
    private var current: Configuration { state.withLock { $0.batch.current } }

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

    /// Connects input ports to an output (AVCaptureSession.addConnection): one microphone's audio port, or
    /// one camera's video port, or several cameras' video ports for their composite picture (arranged as
    /// `setCompositeLayout(_:for:)` says); an output takes at most one connection of each medium.
    public func addConnection(_ connection: CaptureConnection) throws(CaptureError) {
        if let problem = addingConnectionProblem(connection) { throw .cannotAddConnection(problem) }
        try mutate { $0.connections.append(connection) }
    }

    private func addingConnectionProblem(_ connection: CaptureConnection) -> String? {
        let current = current
        guard let output = connection.output else { return "the connection has no output: make it with init(inputPorts:output:)" }
        guard current.outputs.contains(output) else { return "\(output.displayName) is not an output of the session: add it first" }
        guard let port = connection.inputPorts.first else { return "the connection has no input port" }
        if let missing = connection.inputPorts.first(where: { !current.inputs.contains($0.input) }) {
            return "\(missing.input) is not an input of the session: add it first"
        }
        if connection.inputPorts.count > 1 {
            guard connection.inputPorts.allSatisfy({ $0.mediaType == .video && $0.input is CaptureDeviceInput }) else {
                return "a connection of several ports carries cameras' video, for their composite picture; connect sound on its own"
            }
            guard Set(connection.inputPorts.map(\.input)).count == connection.inputPorts.count else {
                return "a camera appears twice in the connection's ports"
            }
        }
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

    /// How an output connected to several cameras arranges them (`.sideBySide` unless set). The composite picture
    /// takes its size and rate from the connection's first camera.
    public func setCompositeLayout(_ layout: CompositeLayout, for output: CaptureOutput) throws(CaptureError) {
        try mutate { $0.layouts[ObjectIdentifier(output)] = layout }
    }

    public func compositeLayout(for output: CaptureOutput) -> CompositeLayout {
        current.layouts[ObjectIdentifier(output)] ?? .sideBySide
    }

    // MARK: Cost

    /// The largest share of a USB bus's isochronous bandwidth that the connected cameras reserve together (see
    /// MultiCamCost); 0 when no camera is on USB. Over 1.0 the configuration is refused at commit.
    public var hardwareCost: Double { (try? cost(of: current.plan()))?.hardwareCost ?? 0 }

    /// The share of this machine's processors the connected cameras' frames keep busy when each is recorded.
    /// Over 1.0 the configuration is refused at commit.
    public var systemPressureCost: Double { (try? cost(of: current.plan()))?.systemPressureCost ?? 0 }

    private func cost(of plan: Plan) throws(CaptureError) -> MultiCamCost {
        let cameras = try plan.cameras.map { plan throws(CaptureError) in
            let device = plan.camera.device
            let selection = try FormatSelector.select(plan.preset, from: device.formats, deviceName: device.description)
            return MultiCamCost.Camera(device: device, format: selection.format, frameRate: selection.frameRate.doubleValue)
        }
        return MultiCamCost(cameras: cameras, sysfs: sysfs)
    }

    // MARK: Configuration

    public func beginConfiguration() {
        state.withLock { $0.batch.begin() }
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
        state.withLock { $0.batch.end() }
    }

    private func mutate(_ change: (inout Configuration) -> Void) throws(CaptureError) {
        let implicit = state.withLock { $0.batch.change(change) }
        if implicit { try commitAndWait() }
    }

    /// On the work queue: checks the whole batch, then brings every camera's session to its part of it. A camera's
    /// session that cannot take its part puts every camera back as it was.
    private func apply(_ configuration: Configuration) throws(CaptureError) {
        let plan = try configuration.plan()
        let cost = try cost(of: plan)
        guard cost.hardwareCost <= 1, cost.systemPressureCost <= 1 else {
            throw .hardwareCostOverage(cost: max(cost.hardwareCost, cost.systemPressureCost), reason: cost.overageReason)
        }
        let previous = state.withLock { $0.batch.committed }
        do {
            try reconcile(to: plan)
        } catch {
            if let before = try? previous.plan() { try? reconcile(to: before) }
            throw error
        }
        state.withLock { $0.batch.committed = configuration }
    }

    /// Makes the sessions hold what the plan says. Composites that go stop first (their feeds leave the cameras
    /// next); outputs that move leave their old camera before any joins a new one (an output is in one pipeline at a
    /// time); a camera no longer connected stops; composites start once their cameras run.
    private func reconcile(to plan: Plan) throws(CaptureError) {
        let (existingCameras, existingComposites, running) = state.withLock { ($0.cameras, $0.composites, $0.isRunning) }
        var composites: [ObjectIdentifier: CompositeRig] = [:]
        for composite in plan.composites {
            let key = ObjectIdentifier(composite.output)
            let geometry = try compositeGeometry(composite, in: plan)
            if let rig = existingComposites[key], rig.serves(composite, geometry) { composites[key] = rig; continue }
            composites[key] = try makeCompositeRig(composite, geometry)
        }
        for (key, rig) in existingComposites where composites[key] !== rig {
            Self.retire(rig.session)
            rig.relay.cancel()
            state.withLock { _ = $0.composites.removeValue(forKey: key) }
        }
        var cameraPlans = plan.cameras
        for rig in composites.values {
            for (camera, feed) in zip(rig.cameras, rig.feeds) {
                guard let index = cameraPlans.firstIndex(where: { $0.camera == camera }) else { continue }
                cameraPlans[index].outputs.append(feed)
            }
        }

        let wanted = Dictionary(uniqueKeysWithValues: cameraPlans.map { (ObjectIdentifier($0.camera), $0) })
        for (key, camera) in existingCameras {
            guard let plan = wanted[key] else {
                Self.retire(camera.session)
                camera.relay.cancel()
                state.withLock { _ = $0.cameras.removeValue(forKey: key) }
                continue
            }
            let staying = camera.session.outputs.filter(plan.outputs.contains)
            if staying.count != camera.session.outputs.count {
                try camera.session.commitAndWait(inputs: camera.session.inputs, outputs: staying, preset: camera.session.sessionPreset)
            }
        }
        for plan in cameraPlans {
            let key = ObjectIdentifier(plan.camera)
            let camera = existingCameras[key] ?? makeCameraSession(for: plan.camera)
            state.withLock { $0.cameras[key] = camera }
            try camera.session.commitAndWait(inputs: [plan.camera] + (plan.microphone.map { [$0] } ?? []),
                                             outputs: plan.outputs, preset: plan.preset)
            if running, !camera.session.isRunning { try camera.session.startAndWait() }
        }
        for composite in plan.composites {
            let key = ObjectIdentifier(composite.output)
            guard let rig = composites[key] else { continue }
            state.withLock { $0.composites[key] = rig }
            try rig.session.commitAndWait(inputs: [rig.input] + (composite.microphone.map { [$0] } ?? []),
                                          outputs: [composite.output], preset: .high)
            if running, !rig.session.isRunning { try rig.session.startAndWait() }
        }
    }

    /// A session no longer needed: stopped, and emptied so that its outputs leave the graph it prepared for a next
    /// start (an output is in one graph at a time).
    private static func retire(_ session: CaptureSession) {
        session.stopRunning()
        try? session.commitAndWait(inputs: [], outputs: [], preset: session.sessionPreset)
    }

    /// The composite's picture, from its first camera's format as the plan has it.
    private func compositeGeometry(_ composite: CompositePlan, in plan: Plan) throws(CaptureError) -> CompositeGeometry {
        let first = composite.cameras[0].device
        let preset = plan.cameras.first { $0.camera == composite.cameras[0] }?.preset ?? .high
        let selection = try FormatSelector.select(preset, from: first.formats, deviceName: first.description)
        return CompositeGeometry(composite.layout, cameras: composite.cameras.count, first: selection.format, frameRate: selection.frameRate)
    }

    private func nextSessionName(_ kind: String) -> String {
        let number = sessionsMade.withLock { count -> Int in count += 1; return count }
        return "\(name)-\(kind)\(number)"
    }

    private func makeCameraSession(for input: CaptureDeviceInput) -> CameraSession {
        let session = CaptureSession(name: nextSessionName("camera"))
        return CameraSession(input: input, session: session, relay: relayEvents(of: session, as: input.device))
    }

    private func makeCompositeRig(_ composite: CompositePlan, _ geometry: CompositeGeometry) throws(CaptureError) -> CompositeRig {
        let source = CompositeSource(geometry: geometry)
        let names = composite.cameras.map(\.device.localizedName).joined(separator: " and ")
        let sessionName = nextSessionName("composite")
        let format = CaptureDevice.Format(pixelFormat: "I420", width: geometry.width, height: geometry.height,
                                          videoSupportedFrameRateRanges: [.init(geometry.frameRate, geometry.frameRate)])
        // Never listed among the devices: it exists for the composite's own session.
        let device = CaptureDevice(uniqueID: sessionName, localizedName: "\(composite.layout.rawValue) of \(names)", modelID: "composite",
                                   manufacturer: "gcapture", deviceType: .external, position: .unspecified, mediaType: .video,
                                   nodePath: nil, formats: [format], backend: .composite(source))
        let session = CaptureSession(name: sessionName)
        return CompositeRig(output: composite.output, cameras: composite.cameras, layout: composite.layout, geometry: geometry,
                            input: try CaptureDeviceInput(device: device),
                            feeds: composite.cameras.indices.map { CompositeFeed(source, camera: $0) },
                            session: session, relay: relayEvents(of: session, as: device))
    }

    private func relayEvents(of session: CaptureSession, as camera: CaptureDevice) -> Task<Void, Never> {
        let events = session.events()
        return Task { [weak self] in
            for await event in events { self?.relay(event, from: camera) }
        }
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
        // The cameras first, then their composites, which wait for the cameras' frames.
        let (cameras, composites) = state.withLock { (Array($0.cameras.values), Array($0.composites.values)) }
        let stages: [[(name: String, session: CaptureSession)]] = [cameras.map { ("\($0.input.device)", $0.session) },
                                                                   composites.map { ("\($0.input.device)", $0.session) }]
        for stage in stages {
            let failures = Self.eachAtOnce(stage.map(\.session)) { session throws(CaptureError) in try session.startAndWait() }
            if let failure = failures.first {
                _ = Self.eachAtOnce((cameras.map(\.session) + composites.map(\.session))) { session in session.stopRunning() }
                throw .startFailed(reason: "\(stage[failure.index].name) did not start: \(failure.error)", underlying: nil)
            }
        }
        state.withLock { $0.isRunning = true }
    }

    private func stopOnQueue() {
        let (cameras, composites) = state.withLock { state in
            state.isRunning = false
            return (state.cameras.values.map(\.session), state.composites.values.map(\.session))
        }
        // Composites first: their movies finalize while the cameras still feed them.
        _ = Self.eachAtOnce(composites) { session in session.stopRunning() }
        _ = Self.eachAtOnce(cameras) { session in session.stopRunning() }
    }

    /// Runs `body` for every session at the same time, each on a thread of its own (a start waits for the
    /// camera's first frame: cameras started one after another would add their waits), and returns when all
    /// have; the failures, in the sessions' order. Threads of its own, not Dispatch's pool: on two cores the pool
    /// runs two blocking starts and gives the others a thread only after a while (measured: four vivid cameras'
    /// start 3.4 times one's through the pool, 3.0 times on threads of their own).
    private static func eachAtOnce(_ sessions: [CaptureSession],
                                   _ body: @escaping @Sendable (CaptureSession) throws(CaptureError) -> Void)
        -> [(index: Int, error: CaptureError)] {
        let failures = Locked<[Int: CaptureError]>([:])
        let group = DispatchGroup()
        for (index, session) in sessions.enumerated() {
            group.enter()
            let thread = Thread {
                do throws(CaptureError) { try body(session) } catch { failures.withLock { $0[index] = error } }
                group.leave()
            }
            thread.name = "gcapture.\(session.name).start"
            thread.start()
        }
        group.wait()
        return failures.withLock { $0 }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
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

/// An output's composite of several cameras: the session whose camera is the composite picture, and the feeds
/// each camera's session carries to it.
final class CompositeRig: Sendable {
    let output: CaptureOutput
    let cameras: [CaptureDeviceInput]
    let layout: CaptureMultiCamSession.CompositeLayout
    let geometry: CompositeGeometry
    /// The composite picture as the session's camera.
    let input: CaptureDeviceInput
    let feeds: [CompositeFeed]
    let session: CaptureSession
    let relay: Task<Void, Never>

    init(output: CaptureOutput, cameras: [CaptureDeviceInput], layout: CaptureMultiCamSession.CompositeLayout,
         geometry: CompositeGeometry, input: CaptureDeviceInput, feeds: [CompositeFeed], session: CaptureSession,
         relay: Task<Void, Never>) {
        (self.output, self.cameras, self.layout, self.geometry) = (output, cameras, layout, geometry)
        (self.input, self.feeds, self.session, self.relay) = (input, feeds, session, relay)
    }

    /// Whether it is what the plan asks: the same cameras in the same order, layout and picture.
    func serves(_ plan: CaptureMultiCamSession.CompositePlan, _ geometry: CompositeGeometry) -> Bool {
        plan.cameras == cameras && plan.layout == layout && geometry == self.geometry
    }
}
