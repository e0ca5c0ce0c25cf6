import Foundation
import GCapture
import GCaptureDescription
import GCaptureSupport

extension CaptureController {
    // MARK: Photos

    /// A photo requested, its file named: taken in two steps so that requests are taken in the order they
    /// came (the frame, the rotation in force) while their encoding overlaps (the caller awaits `takePhoto`
    /// without holding up the next request).
    public struct PhotoTicket: Sendable {
        let watcher: PhotoWatcher
        let url: URL
        let trigger: String
    }

    public func requestPhoto(path: String?, trigger: String) throws(ControlFailure) -> PhotoTicket {
        try refuseWhenStopping()
        guard let photos = capture.photoOutput else { throw ControlFailure("this set-up takes no photos (it has no photo output)") }
        let url: URL
        if let path { url = try capture.paths.photo(path) } else { url = try nextFile(settings.photoNaming, in: settings.photoFolder) }
        photosInFlight += 1
        let watcher = PhotoWatcher()
        // The delegate form takes the request now, on this actor: the async form would take it only when
        // its task runs, after a `rotate` sent later had perhaps been applied.
        photos.capturePhoto(with: CapturePhotoSettings(photoQualityPrioritization: settings.photoQuality,
                                                       orientationHandling: settings.photoEXIFOrientation ? .exifOrientationOnly : .rotatePixels,
                                                       fileURL: url), delegate: watcher)
        return PhotoTicket(watcher: watcher, url: url, trigger: trigger)
    }

    /// Waits for the photo a ticket asked for and emits its event; the reply when it is written.
    public func takePhoto(_ ticket: PhotoTicket) async -> Result<ControlReply, ControlFailure> {
        let result = await ticket.watcher.result.wait(seconds: 60)
        photoFinished()
        switch result {
        case .success(let photo)?:
            let size = photo.resolvedSettings.photoDimensions
            let path = photo.fileURL?.path ?? ticket.url.path
            let fields: ControlFields = ["path": path, "width": size.width, "height": size.height,
                                         "rotation": photo.resolvedSettings.rotationAngle, "mirrored": photo.resolvedSettings.isMirrored,
                                         "shutterLagMs": photo.shutterLagMilliseconds, "trigger": ticket.trigger]
            if let album = settings.photoAlbum { await file(URL(fileURLWithPath: path), inAlbum: album) }
            // A person at a terminal already reads the reply to their own command.
            events.emit("photo", fields, text: ticket.trigger == "command" ? nil : "photo \(path) (\(size.width)x\(size.height), \(ticket.trigger))")
            return .success(ControlReply(fields: ["path": path, "width": size.width, "height": size.height],
                                         text: "photo \(path) (\(size.width)x\(size.height))"))
        case .failure(let error)?:
            return photoFailed(ticket, error.message)
        case nil:
            return photoFailed(ticket, "the photo was not written within 60 s")
        }
    }

    func photoFailed(_ ticket: PhotoTicket, _ message: String) -> Result<ControlReply, ControlFailure> {
        events.emit("photoFailed", ["path": ticket.url.path, "error": message, "trigger": ticket.trigger],
                     text: ticket.trigger == "command" ? nil : "photo failed (\(ticket.trigger)): \(message)")
        return .failure(ControlFailure(message))
    }

    func photoFinished() {
        photosInFlight -= 1
        guard photosInFlight == 0 else { return }
        let waiters = photosIdle
        photosIdle = []
        waiters.forEach { $0.resume() }
    }

    func photosWritten() async {
        guard photosInFlight > 0 else { return }
        await withCheckedContinuation { photosIdle.append($0) }
    }
}
