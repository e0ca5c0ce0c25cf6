import Foundation
import GCapture
import GCaptureDescription
import GCaptureSupport

extension CaptureController {
    // MARK: Camera

    /// Swaps the camera on the running session; when the new one cannot be used the old one stays.
    func switchCamera(_ id: String) async throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        let input: CaptureDeviceInput
        do {
            let device = try CaptureDevice.requireDevice(withUniqueID: id)
            guard device.mediaType == .video else { throw ControlFailure("\(id) names a microphone, not a camera") }
            input = try CaptureDeviceInput(device: device)
        } catch let failure as ControlFailure {
            throw failure
        } catch {
            throw ControlFailure("\(error)")
        }
        let session = capture.session
        let old = cameraInput
        session.beginConfiguration()
        if let old { session.removeInput(old) }
        session.addInput(input)
        do {
            try await session.commit()
        } catch {
            throw ControlFailure("cannot switch to \(input.device.description), still using \(camera): \(error)")
        }
        camera = input.device.description
        events.emit("cameraSwitched", ["camera": camera], text: nil)
        return ControlReply(fields: ["camera": camera], text: "now using \(camera)")
    }

    /// The session's camera now.
    var cameraInput: CaptureDeviceInput? {
        capture.session.inputs.compactMap { $0 as? CaptureDeviceInput }.first { $0.device.mediaType == .video }
    }

    /// What the capture is doing now: the web page's status.
    public func status() -> ControlFields {
        var fields: ControlFields = [
            "camera": camera, "cameraID": cameraInput?.device.uniqueID ?? NSNull(), "microphone": capture.microphone ?? "none",
            "testDevice": !capture.notices.isEmpty, "photos": capture.photoOutput != nil, "movies": capture.movieOutput != nil,
            "running": capture.session.isRunning, "interruption": interruption.withLock { $0 } ?? NSNull(),
            "rotation": settings.rotation, "mirrored": settings.mirrored,
            "cameras": CaptureDevice.DiscoverySession(mediaType: .video).devices.map(\.uniqueID),
        ]
        // Where the motion output looks (the page draws it over the live view); an empty zone list: everywhere.
        fields["motion"] = capture.motionOutput.map { motion -> ControlFields in
            return ["zones": (motion.zones.isEmpty ? [CGRect(x: 0, y: 0, width: 1, height: 1)] : motion.zones).map(\.controlFraction),
                    "masks": motion.masks.map(\.controlFraction), "now": motionNow.withLock { $0 } ?? NSNull()]
        } ?? NSNull()
        if let recording, let movie = capture.movieOutput {
            fields["recording"] = ["path": recording.url.path, "elapsed": movie.recordedDuration, "paused": movie.isRecordingPaused] as ControlFields
        } else {
            fields["recording"] = NSNull()
        }
        return fields
    }

    // MARK: Settings

    func rotate(_ degrees: Int) throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        var new = settings
        new.rotation = degrees
        try apply(new)
        let later = recording != nil ? " (photos from now on; the movie being recorded keeps its rotation, the next one gets it)" : ""
        return ControlReply(fields: ["rotation": degrees, "appliesToCurrentRecording": false], text: "rotation \(degrees)°\(later)")
    }

    func mirror(_ mirrored: Bool) throws(ControlFailure) -> ControlReply {
        try refuseWhenStopping()
        var new = settings
        new.mirrored = mirrored
        try apply(new)
        return ControlReply(fields: ["mirrored": mirrored], text: "mirroring \(mirrored ? "on" : "off")")
    }

    /// Applies `new` on the live session: only what differs from the settings in force, without stopping
    /// anything. Everything is checked first, so a refused change leaves the settings as they were.
    /// Returns the names of the fields that changed. Rotation and mirroring apply to the next photo and
    /// the next recording (a movie's rotation is written when it starts).
    @discardableResult
    func apply(_ new: ControlledCaptureSettings) throws(ControlFailure) -> [String] {
        guard CaptureConnection.supportedVideoRotationAngles.contains(Double(new.rotation)) else {
            throw ControlFailure("rotation \(new.rotation) is not one of \(Rotation.accepted)")
        }
        for folder in Set([new.photoFolder, new.movieFolder]) where folder != settings.photoFolder && folder != settings.movieFolder {
            do { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) } catch {
                throw ControlFailure("cannot create the folder \(folder.path): \(error.localizedDescription)")
            }
        }
        let changed = settings.changes(to: new)
        if new.rotation != settings.rotation || new.mirrored != settings.mirrored { applyToConnections(new) }
        let reschedule = new.triggerInterval != settings.triggerInterval
        settings = new
        if reschedule { scheduleTriggers() }
        return changed
    }

    func applyToConnections(_ settings: ControlledCaptureSettings) {
        let connections = [capture.photoOutput?.connection, capture.movieOutput?.connection].compactMap { $0 }
        for connection in connections {
            connection.videoRotationAngle = Double(settings.rotation)
            connection.automaticallyAdjustsVideoMirroring = false
            connection.isVideoMirrored = settings.mirrored
        }
    }

    func nextFile(_ naming: FileNamePattern, in folder: URL) throws(ControlFailure) -> URL {
        do { return try outputFiles(naming, in: folder).next() } catch { throw ControlFailure("\(error)") }
    }

    /// The files handed out in `folder` by `naming`, one numbering for every command that names by it.
    func outputFiles(_ naming: FileNamePattern, in folder: URL) -> OutputFiles {
        let key = folder.path + "/" + naming.text
        let files = self.files[key] ?? OutputFiles(folder: folder, pattern: naming)
        self.files[key] = files
        return files
    }

    /// SIGHUP: the reload hook re-reads the set-up, and what changed is applied on the live session. The
    /// hook runs off this actor and off the cooperative pool, so commands are answered while a slow camera
    /// opens; a SIGHUP during a reload reloads once more after it.
    public func reload() async {
        guard !stopping else { return }
        guard !isReloading else { reloadAgain = true; return }
        isReloading = true
        defer { isReloading = false }
        repeat {
            reloadAgain = false
            do {
                let onReload = onReload, current = settings
                let new = try await Self.reloading.run { try onReload(current) }
                guard !stopping else { return }
                let changed = try apply(new.settings)
                events.emit("reloaded", new.eventFields(changed: changed), text: new.eventText(changed: changed))
            } catch {
                events.emit("reloadFailed", ["error": "\(error)"], text: "reload failed, the set-up runs on unchanged: \(error)")
            }
        } while reloadAgain && !stopping
    }

    private static let reloading = BlockingQueue(label: "gcapture.run.reload", qos: .userInitiated)
}
