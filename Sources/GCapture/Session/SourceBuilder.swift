import CImaging
import Foundation
import GStreamerKit
import Synchronization

/// A device's source part of the session graph: a bin with one "src" pad delivering pinned caps.
struct SourceUnit {
    let device: CaptureDevice
    let selection: FormatSelection?
    let bin: Bin
    /// A stand-in (black frames, silence) for an interrupted device.
    var isFiller = false
    /// How long the camera may deliver nothing before it counts as stalled (FrameStallWatchdog); nil for
    /// what is not a camera (a microphone, a filler).
    var stallTimeout: Duration?

    /// What identifies the source: a change means the source must be rebuilt.
    var key: String { Self.key(device: device, selection: selection) }

    /// The key of the source a device and format would get, before building it.
    static func key(device: CaptureDevice, selection: FormatSelection?) -> String {
        device.uniqueID + "|" + (selection?.caps ?? "audio")
    }
}

enum SourceBuilder {
    /// Audio leaves every source in one format, so encoders downstream never renegotiate.
    static let audioCaps = "audio/x-raw,format=S16LE,rate=48000,channels=2,layout=interleaved"
    /// Bytes of one sample frame in `audioCaps` (two 16-bit channels).
    static let audioFrameBytes = 4

    /// `stallTimeout`: how long the camera may deliver nothing before it counts as stalled
    /// (FrameStallWatchdog; default from the frame rate).
    static func videoSource(for device: CaptureDevice, selection: FormatSelection, name: String,
                            stallTimeout: Duration? = nil) throws(CaptureError) -> SourceUnit {
        let description: String
        switch device.backend {
        case .testCamera(let options):
            description = "videotestsrc name=camera is-live=true pattern=\(options.pattern.rawValue) horizontal-speed=\(options.motion) "
                + "! capsfilter name=caps caps=\"\(selection.caps)\""
        case .v4l2(let path):
            // A driver without VIDIOC_CROPCAP (vivid's webcam input, some USB cameras) states no pixel aspect
            // ratio; left open, a scaling branch downstream (the motion output's) lets v4l2src fixate it to
            // 1/2147483647 and videoscale fails ("integer overflow"). Square pixels first, else the camera's own.
            description = "v4l2src device=\(path) ! capsfilter name=caps "
                + "caps=\"\(selection.caps),pixel-aspect-ratio=1/1; \(selection.caps)\""
                + (selection.format.isCompressed ? " ! jpegdec ! videoconvert" : "")
        case .provided:
            description = "capsfilter name=caps caps=\"\(selection.caps)\""
                + (selection.format.isCompressed ? " ! jpegdec ! videoconvert" : "")
        case .composite(let composite):
            description = composite.launchDescription(caps: selection.caps)
        case .testMicrophone, .pulse:
            throw .cannotAddInput("\(device) is a microphone, not a camera")
        case .firstAvailableCamera:
            // No camera yet (the session resolves it to one present): black frames while the session waits,
            // as for an unplugged camera, until a camera appears (SourceRecovery).
            return try filler(for: device, selection: selection, name: name)
        }
        let bin = try makeBin(description, name: name, device: device)
        if case .composite(let composite) = device.backend { composite.attach(bin) }
        if case .v4l2 = device.backend, !selection.format.isCompressed {
            // A V4L2 camera's frames leave in the driver's memory: copied only by the outputs that keep them
            // (DeviceFrameCopy). An output joining later (a recording) sends a reconfigure up the tee, and
            // v4l2src would set its format again (S_FMT) while frames of it are still in the outputs: the
            // driver answers "busy" and the camera fails. Its caps are pinned here, so nothing can change.
            bin.element(named: "caps")?.staticPad("src")?.dropReconfigureFromDownstream()
        }
        if case .testCamera(let options) = device.backend {
            TestCameraStalls.install(on: bin, uniqueID: device.uniqueID)
            // First, so that the camera's watch, the scene and the stamp see the time the frame says it was taken.
            if options.deliveryDelay > 0 { addDeliveryDelay(options.deliveryDelay, to: bin) }
            // Probes run in the order added: the scene, then the noise over it, then the stamp over both.
            if let scene = options.scene { addScene(scene, to: bin, caps: selection.caps) }
            if options.noiseLevel > 0 { addSensorNoise(to: bin, options: options, caps: selection.caps) }
            // Last, so the stamp stays legible.
            if options.stampsCaptureTime { addCaptureTimeStamp(to: bin, caps: selection.caps) }
        }
        return SourceUnit(device: device, selection: selection, bin: bin,
                          stallTimeout: stallTimeout ?? FrameStallWatchdog.defaultTimeout(frameRate: selection.frameRate))
    }

    static func audioSource(for device: CaptureDevice, name: String) throws(CaptureError) -> SourceUnit {
        let description: String
        switch device.backend {
        case .testMicrophone(let options):
            description = "audiotestsrc is-live=true wave=sine freq=\(options.frequency) volume=\(options.volume) "
                + "! audioconvert ! audioresample ! capsfilter caps=\"\(audioCaps)\""
        case .provided:
            description = "audioconvert ! audioresample ! capsfilter caps=\"\(audioCaps)\""
        case .pulse(let source):
            // 48 kHz asked of the server itself: otherwise pulsesrc picks 44.1 kHz and we resample.
            let device = source == "default" ? "" : "device=\"\(source)\" "
            description = "pulsesrc \(device)! audio/x-raw,rate=48000,channels=2 ! audioconvert ! audioresample "
                + "! capsfilter caps=\"\(audioCaps)\""
        default:
            throw .cannotAddInput("\(device) is not a microphone")
        }
        let bin = try makeBin(description, name: name, device: device)
        return SourceUnit(device: device, selection: nil, bin: bin)
    }

    /// One sentence for a device that could not be opened: which device, and why in the user's terms
    /// where the cause is known (the audio server's own words otherwise).
    static func openFailure(of device: CaptureDevice, _ error: GStreamerError) -> String {
        let kind = device.mediaType == .audio ? "the microphone" : "the camera"
        return "\(kind) \(device.description) cannot be opened: " + (explanation(of: error, from: device) ?? "\(error)")
    }

    /// What a source's error means for the user, when it is one the source's element is known to give.
    /// `sysfs`: where a camera's USB bus is read (a test points it at a copy).
    static func explanation(of error: GStreamerError, from device: CaptureDevice, sysfs: String = "/sys") -> String? {
        if case .v4l2 = device.backend, let bus = MultiCamCost.usbBus(of: device, sysfs: sysfs), refusedToStream(error) {
            // uvcvideo reserves the camera's isochronous bandwidth at VIDIOC_STREAMON and answers ENOSPC when the
            // bus has not enough left; v4l2src says only that its buffer pool did not activate.
            return "USB bus \(bus.number) has not enough bandwidth left for it (the kernel refused to start its stream, as it "
                + "does when other cameras on the bus take the rest): choose a smaller size or a lower frame rate, use MJPEG, "
                + "or plug it into another USB bus (\(error.message))"
        }
        guard case .pulse(let source) = device.backend else {
            return error.kind == .timeout ? error.message : nil
        }
        // pulsesrc: "Failed to connect: ..." when the server cannot be reached (while opening), "Failed to
        // connect stream: No such entity" when it has no such source (once playing).
        let server = getenv("PULSE_SERVER").map { "the PulseAudio server at \(String(cString: $0))" } ?? "the PulseAudio server"
        if error.message.hasPrefix("Failed to connect stream") {
            return source == "default" ? "\(server) has no default source"
                : "\(server) has no source named '\(source)' (see `pactl list short sources`)"
        }
        if error.message.hasPrefix("Failed to connect") {
            return "\(server) does not answer; is it running? (\(error.message))"
        }
        if error.kind == .timeout { return "\(server) delivered no audio from '\(source)' (\(error.message))" }
        return nil
    }

    /// v4l2src's words for a stream the driver would not start (VIDIOC_STREAMON failed): its buffer pool did not
    /// activate ("Failed to allocate required memory.", "Buffer pool activation failed"). Not its "Failed to
    /// allocate a buffer" of a camera unplugged while streaming.
    private static func refusedToStream(_ error: GStreamerError) -> Bool {
        error.message.hasPrefix("Failed to allocate required memory") || (error.debug ?? "").contains("Buffer pool activation failed")
    }

    /// Parses the source's elements into a bin named `name`; a provider's device (pulsesrc, pipewiresrc...)
    /// is made by GStreamer and put in front.
    private static func makeBin(_ description: String, name: String, device: CaptureDevice) throws(CaptureError) -> Bin {
        do {
            let elements = try Bin.parse(description)
            guard case .provided(let provided) = device.backend else {
                try elements.set("name", name)
                return elements
            }
            let bin = Bin(name: name)
            let source = try provided.makeElement()
            try bin.add([source, elements])
            try source.link(to: elements)
            guard let output = elements.staticPad("src") else {
                throw GStreamerError(kind: .link, message: "source of \(device) has no output")
            }
            try bin.addGhostPad(named: "src", target: output)
            return bin
        } catch let error as GStreamerError {
            if error.kind == .missingElement || (error.kind == .parse && error.message.contains("no element")) {
                throw .missingPlugin(error.message)
            }
            throw .deviceFailed(device: device.description, underlying: error)
        } catch {
            throw .configurationFailed(reason: "cannot build the source of \(device): \(error)", underlying: nil)
        }
    }

    /// Frames stamped `delay` seconds before they are delivered, as a camera stamps them with the time the
    /// driver took them in: they leave as they are made, with a time that much in the past.
    private static func addDeliveryDelay(_ delay: Double, to bin: Bin) {
        guard let pad = bin.element(named: "caps")?.staticPad("sink") else { return }
        let shift = ClockTime(delay * 1e9)
        pad.addProbe(.buffer) { info in
            // A copy: the pooled frame's struct is what readers of its earlier uses read (ThreadSanitizer saw that).
            if let pts = info.bufferPTS { info.replaceBufferWithRetimedCopy(pts: pts - min(pts, shift), duration: info.bufferDuration ?? 0) }
            return .ok
        }
    }

    /// A sensor's noise, added to every sample of the test camera's frames before anyone sees them.
    private static func addSensorNoise(to bin: Bin, options: TestCameraOptions, caps: String) {
        guard let filter = bin.element(named: "caps"), let pad = filter.staticPad("src"),
              let layout = (try? Caps(caps)).flatMap(VideoInfo.init(caps:)) else { return }
        let generator = NoiseGenerator(seed: options.noiseSeed, amplitude: options.noiseLevel, layout: layout)
        pad.addProbe(.buffer) { info in
            generator.apply(to: info)
            return .ok
        }
    }
}

extension SourceBuilder {
    /// Each frame's capture time written into its pixels (CaptureTimeStamp), before anyone sees the frame.
    fileprivate static func addCaptureTimeStamp(to bin: Bin, caps: String) {
        guard let filter = bin.element(named: "caps"), let pad = filter.staticPad("src"),
              let layout = (try? Caps(caps)).flatMap(VideoInfo.init(caps:)) else { return }
        let cell = CaptureTimeStamp.cellSize(forWidth: layout.width)
        // Luma sample spacing in the first plane: 1 for planar NV12/I420, 2 for packed YUY2.
        let step = max(1, layout.planeRowBytes[0] / layout.width)
        let rows = min(cell, layout.planeHeights[0])
        pad.addProbe(.buffer) { info in
            guard let time = info.bufferClockTime else { return .ok }
            let cells = CaptureTimeStamp.cells(milliseconds: UInt32(truncatingIfNeeded: time / 1_000_000))
            info.withWritableBuffer { buffer in
                _ = buffer.withMappedBytes { bytes in
                    let last = layout.offsets[0] + layout.strides[0] * (rows - 1) + (cells.count * cell - 1) * step
                    guard cells.count * cell <= layout.width, last < bytes.count else { return }
                    for row in 0..<rows {
                        let start = layout.offsets[0] + layout.strides[0] * row
                        for (index, white) in cells.enumerated() {
                            let value: UInt8 = white ? 235 : 16
                            for x in index * cell..<(index + 1) * cell { bytes[start + x * step] = value }
                        }
                    }
                }
            }
            return .ok
        }
    }
}

extension SourceBuilder {
    /// The test camera's scripted scene (TestCameraOptions.Scene) drawn into each frame's luma.
    fileprivate static func addScene(_ scene: TestCameraOptions.Scene, to bin: Bin, caps: String) {
        guard let filter = bin.element(named: "caps"), let pad = filter.staticPad("src"),
              let layout = (try? Caps(caps)).flatMap(VideoInfo.init(caps:)) else { return }
        let painter = ScenePainter(scene: scene, layout: layout)
        pad.addProbe(.buffer) { info in
            painter.paint(info)
            return .ok
        }
    }
}

/// Paints a scene by the time since the source's first frame (its timestamps: a live source's running time).
private final class ScenePainter: Sendable {
    private let scene: TestCameraOptions.Scene
    private let layout: VideoInfo
    /// Luma sample spacing in the first plane: 1 for planar NV12/I420, 2 for packed YUY2.
    private let step: Int
    /// The object's luma samples: first column and row, columns and rows.
    private let object: (x: Int, y: Int, width: Int, height: Int)?
    private let firstPresentationTime = Atomic<UInt64>(.max)

    init(scene: TestCameraOptions.Scene, layout: VideoInfo) {
        self.scene = scene
        self.layout = layout
        step = max(1, layout.planeRowBytes[0] / max(1, layout.width))
        let width = layout.width, height = layout.planeHeights[0]
        object = scene.object.flatMap { object in
            let rect = object.rect.standardized.intersection(CGRect(x: 0, y: 0, width: 1, height: 1))
            guard !rect.isNull, !rect.isEmpty else { return nil }
            let left = Int((rect.minX * Double(width)).rounded()), right = Int((rect.maxX * Double(width)).rounded())
            let top = Int((rect.minY * Double(height)).rounded()), bottom = Int((rect.maxY * Double(height)).rounded())
            guard right > left, bottom > top else { return nil }
            return (left, top, right - left, bottom - top)
        }
    }

    func paint(_ info: Pad.ProbeInfo) {
        guard let pts = info.bufferPTS else { return }
        // The first frame's time, set once: a later frame never moves it.
        _ = firstPresentationTime.compareExchange(expected: .max, desired: UInt64(pts), ordering: .relaxed)
        let first = firstPresentationTime.load(ordering: .relaxed)
        let elapsed = UInt64(pts) > first ? Double(UInt64(pts) - first) / 1e9 : 0
        let showsObject = scene.object.map { elapsed >= $0.appearsAfter } ?? false
        let brightness = Int((scene.brightnessRamp * elapsed).rounded(.towardZero))
        guard (showsObject && object != nil) || brightness != 0 else { return }
        info.withWritableBuffer { buffer in
            _ = buffer.withMappedBytes { bytes in
                guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                      layout.offsets[0] + layout.strides[0] * (layout.planeHeights[0] - 1) + layout.planeRowBytes[0] <= bytes.count
                else { return }
                let luma = base + layout.offsets[0]
                if showsObject, let object, let value = scene.object?.luma {
                    CImaging_fill_luma(luma + object.y * layout.strides[0] + object.x * step, layout.strides[0],
                                       Int32(step), Int32(object.width), Int32(object.height), value)
                }
                CImaging_offset_luma(luma, layout.strides[0], Int32(step), Int32(layout.width),
                                     Int32(layout.planeHeights[0]), Int32(brightness))
            }
        }
    }
}

/// Uniform noise on the first plane (luma for NV12/I420, every sample for packed YUY2), different in
/// every frame, reproducible from its seed.
private final class NoiseGenerator: Sendable {
    private let state: Locked<UInt32>
    private let amplitude: Int
    private let layout: VideoInfo

    init(seed: UInt32, amplitude: Int, layout: VideoInfo) {
        state = Locked(seed == 0 ? 1 : seed)
        self.amplitude = amplitude
        self.layout = layout
    }

    func apply(to info: Pad.ProbeInfo) {
        info.withWritableBuffer { buffer in
            state.withLock { seed in
                buffer.addUniformNoise(offset: layout.offsets[0], rowBytes: layout.planeRowBytes[0],
                                       rows: layout.planeHeights[0], stride: layout.strides[0],
                                       amplitude: amplitude, state: &seed)
            }
        }
    }
}
