// The seed documents' camera code (../shared/seeds/002_*.txt: the permission check, Patterns 1, 3, 4, 6 and
// 7; 004's mirroring fix), ported to gcapture by dropping the AV prefix. This file imports GCapture alone,
// and its methods keep the seeds' shape, so the compiler checks that the renaming is all a port needs. What
// Linux lacks is replaced, each marked LINUX: UIKit's button by a small stand-in at the end (PhotoKit's
// library is GCapturePhotos' PhotoLibrary, and a stand-in keeps what was saved for the tests to read at once), KVO's NSKeyValueObservation by the RotationCoordinator's own observation, and the preview
// layer's optional connection by the preview output's connection, which is always there. Left out: Pattern 2 (a
// SwiftUI preview) and Pattern 5 (interruption notifications do not exist yet). DEVICES marks the one
// other change: the seeds' device lookup `AVCaptureDevice.default(.builtInWideAngleCamera, for: .video,
// position:)` goes to the test cameras. It compiles in Swift 5 mode, the seeds' own; under Swift 6 the
// class needs `@unchecked Sendable` (tried: nothing else), as it does with AVFoundation, since its
// `sessionQueue.async { [self] in ... }` sends self to another queue.
import Foundation
import GCapture
import GCapturePhotos

// MARK: Mandatory First Steps, 2. Request Camera Permission (Linux decides by group membership: no prompt)

func requestCameraAccess() async -> Bool {
    let status = CaptureDevice.authorizationStatus(for: .video)

    switch status {
    case .authorized:
        return true
    case .notDetermined:
        return await CaptureDevice.requestAccess(for: .video)
    case .denied, .restricted:
        // Show settings prompt
        return false
    @unknown default:
        return false
    }
}

class CameraManager: NSObject {
    let session = CaptureSession()
    let photoOutput = CapturePhotoOutput()
    let movieOutput = CaptureMovieFileOutput()

    // CRITICAL: Dedicated serial queue for session work
    private let sessionQueue = DispatchQueue(label: "camera.session")
    private var currentRecordingURL: URL?
    private var readinessCoordinator: CapturePhotoOutputReadinessCoordinator!

    // LINUX: what the seeds give UIKit and PhotoKit.
    let shutterButton = ShutterButton()
    let library = SavedMedia()
    private var rotationCoordinator: CaptureDevice.RotationCoordinator?
    private var rotationObservation: CaptureDevice.RotationCoordinator.Observation?  // LINUX: NSKeyValueObservation?
    /// Pattern 6 sets up the coordinator again for the new camera when there is a preview.
    var previewLayer: CapturePreviewOutput?
    /// DEVICES: the cameras `AVCaptureDevice.default(.builtInWideAngleCamera, for: .video, position:)` finds.
    let cameras: [CaptureDevice]

    init(cameras: [CaptureDevice]) {
        self.cameras = cameras
    }

    /// TEST: reads what the session queue writes (Pattern 6 sets the rotation coordinator up again there), on
    /// that queue, as an app would after its session work; read from the test's own thread it is a data race.
    func onSessionQueue<T>(_ body: () -> T) -> T { sessionQueue.sync(execute: body) }

    // MARK: Pattern 1: Basic Session Setup

    func setupSession() {
        sessionQueue.async { [self] in
            session.beginConfiguration()
            defer { session.commitConfiguration() }

            // 1. Set session preset
            session.sessionPreset = .photo

            // 2. Add camera input
            guard let camera = defaultCamera(for: .video, position: .back),  // DEVICES
                  let input = try? CaptureDeviceInput(device: camera),
                  session.canAddInput(input) else {
                return
            }
            session.addInput(input)

            // 3. Add photo output
            guard session.canAddOutput(photoOutput) else { return }
            session.addOutput(photoOutput)

            // 4. Configure photo output
            // (isHighResolutionCaptureEnabled, deprecated since iOS 16, is left out: photos are always the
            // size of the session's format.)
            photoOutput.maxPhotoQualityPrioritization = .quality
        }
    }

    func startSession() {
        sessionQueue.async { [self] in
            if !session.isRunning {
                session.startRunning()  // Blocking call - never on main thread!
            }
        }
    }

    func stopSession() {
        sessionQueue.async { [self] in
            if session.isRunning {
                session.stopRunning()
            }
        }
    }

    // MARK: Pattern 3: Rotation Handling with RotationCoordinator

    func setupRotationCoordinator(device: CaptureDevice, previewLayer: CapturePreviewOutput) {
        // Create coordinator with device and preview layer
        rotationCoordinator = CaptureDevice.RotationCoordinator(
            device: device,
            previewLayer: previewLayer
        )

        // Observe preview rotation changes
        rotationObservation = rotationCoordinator?.observe(
            \.videoRotationAngleForHorizonLevelPreview,
            options: [.new]
        ) { [weak previewLayer] coordinator, _ in
            // Update preview layer rotation on main thread
            DispatchQueue.main.async {
                previewLayer?.connection.videoRotationAngle = coordinator.videoRotationAngleForHorizonLevelPreview  // LINUX: connection?
            }
        }

        // Set initial rotation
        previewLayer.connection.videoRotationAngle = rotationCoordinator!.videoRotationAngleForHorizonLevelPreview  // LINUX: connection?
    }

    func captureRotationAngle() -> CGFloat {
        // Use this angle when capturing photos
        rotationCoordinator?.videoRotationAngleForHorizonLevelCapture ?? 0
    }

    func captureRotatedPhoto() {
        let settings = CapturePhotoSettings()

        // Apply rotation angle from coordinator
        if let connection = photoOutput.connection(with: .video) {
            connection.videoRotationAngle = captureRotationAngle()
        }

        photoOutput.capturePhoto(with: settings, delegate: self)
    }

    // MARK: 004, "Crash on setVideoMirrored": mirroring (on the photo output's connection: no preview layer)

    func configureMirroring() {
        guard let conn = photoOutput.connection(with: .video),
              conn.isVideoMirroringSupported else { return }
        conn.automaticallyAdjustsVideoMirroring = false
        conn.isVideoMirrored = true
    }

    // MARK: Pattern 4: Responsive Capture Pipeline

    func enableResponsiveCapture() {
        // Check support first
        if photoOutput.isZeroShutterLagSupported {
            photoOutput.isZeroShutterLagEnabled = true  // Required for responsive capture

            if photoOutput.isResponsiveCaptureSupported {
                photoOutput.isResponsiveCaptureEnabled = true
            }
        }
        if photoOutput.isFastCapturePrioritizationSupported {
            photoOutput.isFastCapturePrioritizationEnabled = true
        }
        // Check support and enable deferred processing
        if photoOutput.isAutoDeferredPhotoDeliverySupported {
            photoOutput.isAutoDeferredPhotoDeliveryEnabled = true
        }
    }

    func setupReadinessCoordinator() {
        readinessCoordinator = CapturePhotoOutputReadinessCoordinator(photoOutput: photoOutput)
        readinessCoordinator.delegate = self
    }

    func capturePhoto() {
        var settings = CapturePhotoSettings()
        settings.photoQualityPrioritization = .balanced

        // Tell coordinator to track this capture BEFORE calling capturePhoto
        readinessCoordinator.startTrackingCaptureRequest(using: settings)

        photoOutput.capturePhoto(with: settings, delegate: self)
    }

    /// Pattern 4's deferred processing. gcapture defers only photos written to a file (their pending work
    /// survives a crash beside it), hence the one added line.
    func captureDeferredPhoto(to url: URL) {
        let settings = CapturePhotoSettings()
        settings.photoQualityPrioritization = .quality
        settings.fileURL = url  // gcapture: deferred delivery needs the file the final replaces
        photoOutput.capturePhoto(with: settings, delegate: self)
    }

    // MARK: Pattern 6: Camera Switching (Front/Back)

    func switchCamera() {
        sessionQueue.async { [self] in
            guard let currentInput = session.inputs.first as? CaptureDeviceInput else {
                return
            }

            let currentPosition = currentInput.device.position
            let newPosition: CaptureDevice.Position = currentPosition == .back ? .front : .back

            guard let newDevice = defaultCamera(  // DEVICES
                for: .video,
                position: newPosition
            ) else {
                return
            }

            session.beginConfiguration()
            defer { session.commitConfiguration() }

            // Remove old input
            session.removeInput(currentInput)

            // Add new input
            do {
                let newInput = try CaptureDeviceInput(device: newDevice)
                if session.canAddInput(newInput) {
                    session.addInput(newInput)
                    // Update rotation coordinator for new device
                    if let previewLayer = previewLayer {
                        setupRotationCoordinator(device: newDevice, previewLayer: previewLayer)
                    }
                } else {
                    // Fallback: restore old input
                    session.addInput(currentInput)
                }
            } catch {
                session.addInput(currentInput)
            }
        }
    }

    // MARK: Pattern 7: Video Recording

    func setupVideoRecording() {
        sessionQueue.async { [self] in
            session.beginConfiguration()
            defer { session.commitConfiguration() }

            // Set video preset
            session.sessionPreset = .high  // Or .hd1920x1080, .hd4K3840x2160

            // Add microphone input
            if let microphone = defaultMicrophone(),  // DEVICES: AVCaptureDevice.default(for: .audio)
               let audioInput = try? CaptureDeviceInput(device: microphone),
               session.canAddInput(audioInput) {
                session.addInput(audioInput)
            }

            // Add movie output
            if session.canAddOutput(movieOutput) {
                session.addOutput(movieOutput)
            }
        }
    }

    func startRecording() {
        guard !movieOutput.isRecording else { return }

        let outputURL = FileManager.default.temporaryDirectory
            .appendingPathComponent(UUID().uuidString)
            .appendingPathExtension("mov")

        currentRecordingURL = outputURL

        // Apply rotation
        if let connection = movieOutput.connection(with: .video) {
            connection.videoRotationAngle = captureRotationAngle()
        }

        movieOutput.startRecording(to: outputURL, recordingDelegate: self)
    }

    func stopRecording() {
        guard movieOutput.isRecording else { return }
        movieOutput.stopRecording()
    }

    // MARK: DEVICES

    private func defaultCamera(for mediaType: MediaType, position: CaptureDevice.Position) -> CaptureDevice? {
        cameras.first { $0.hasMediaType(mediaType) && $0.position == position }
    }

    private func defaultMicrophone() -> CaptureDevice? { CaptureDevice.testMicrophone }
}

extension CameraManager: CapturePhotoOutputReadinessCoordinatorDelegate {
    func readinessCoordinator(_ coordinator: CapturePhotoOutputReadinessCoordinator,
                              captureReadinessDidChange captureReadiness: CapturePhotoOutput.CaptureReadiness) {
        DispatchQueue.main.async {
            self.shutterButton.readinessSeen(captureReadiness)  // LINUX: for the test to read
            switch captureReadiness {
            case .ready:
                self.shutterButton.isEnabled = true
                self.shutterButton.alpha = 1.0

            case .notReadyMomentarily:
                // Brief delay - disable to prevent double-tap
                self.shutterButton.isEnabled = false

            case .notReadyWaitingForCapture:
                // Flash is firing - dim button
                self.shutterButton.alpha = 0.5

            case .notReadyWaitingForProcessing:
                // Processing previous photo - show spinner
                self.showProcessingIndicator()

            case .sessionNotRunning:
                self.shutterButton.isEnabled = false

            @unknown default:
                break
            }
        }
    }

    func showProcessingIndicator() { shutterButton.isEnabled = false }
}

extension CameraManager: CapturePhotoCaptureDelegate {
    // Called for BOTH regular photos AND deferred proxies
    func photoOutput(_ output: CapturePhotoOutput,
                     didFinishProcessingPhoto photo: CapturePhoto,
                     error: Error?) {
        guard error == nil else { return }

        // Non-deferred photo - save directly
        if !photo.isRawPhoto, let data = photo.fileDataRepresentation() {
            savePhotoToLibrary(data)
        }
    }

    // Called ONLY for deferred proxies - save to PhotoKit for later processing
    func photoOutput(_ output: CapturePhotoOutput,
                     didFinishCapturingDeferredPhotoProxy deferredPhotoProxy: CaptureDeferredPhotoProxy,
                     error: Error?) {
        guard error == nil else { return }

        // CRITICAL: Save proxy to library ASAP before app is backgrounded
        // App may be force-quit if memory pressure is high during backgrounding
        guard let proxyData = deferredPhotoProxy.fileDataRepresentation() else { return }

        Task {
            try await PhotoLibrary.shared().performChanges {
                let request = AssetCreationRequest.forAsset()
                // Use .photoProxy resource type - triggers deferred processing in Photos
                request.addResource(with: .photoProxy, data: proxyData, options: nil)
            }
        }
    }

    // The seeds leave its body out; this is PhotoKit's way, as the proxy's above.
    func savePhotoToLibrary(_ data: Data) {
        library.addPhoto(data)  // LINUX: what the test reads at once
        Task {
            try await PhotoLibrary.shared().performChanges {
                let request = AssetCreationRequest.forAsset()
                request.addResource(with: .photo, data: data, options: nil)
            }
        }
    }
}

extension CameraManager: CaptureFileOutputRecordingDelegate {
    func fileOutput(_ output: CaptureFileOutput,
                    didFinishRecordingTo outputFileURL: URL,
                    from connections: [CaptureConnection],
                    error: Error?) {
        if let error = error {
            print("Recording error: \(error)")
            library.addVideoError(error)  // LINUX: for the test to read
            return
        }

        // Video saved to outputFileURL
        saveVideoToPhotoLibrary(outputFileURL)
    }

    func saveVideoToPhotoLibrary(_ url: URL) { library.addVideo(url) }  // LINUX
}

// MARK: LINUX stand-ins for UIKit and PhotoKit

/// A shutter button's state (UIButton), with every readiness it was shown.
final class ShutterButton: @unchecked Sendable {
    private let lock = NSLock()
    private var _isEnabled = true, _alpha = 1.0, _seen: [CapturePhotoOutput.CaptureReadiness] = []
    var isEnabled: Bool { get { lock.withLock { _isEnabled } } set { lock.withLock { _isEnabled = newValue } } }
    var alpha: Double { get { lock.withLock { _alpha } } set { lock.withLock { _alpha = newValue } } }
    var readinessShown: [CapturePhotoOutput.CaptureReadiness] { lock.withLock { _seen } }
    func readinessSeen(_ readiness: CapturePhotoOutput.CaptureReadiness) { lock.withLock { _seen.append(readiness) } }
}

/// What the seeds hand to the photo library, kept for the tests to read at once (the photos go to the real
/// PhotoLibrary as well).
final class SavedMedia: @unchecked Sendable {
    private let lock = NSLock()
    private var _photos: [Data] = [], _videos: [URL] = [], _videoErrors: [String] = []
    var photos: [Data] { lock.withLock { _photos } }
    var videos: [URL] { lock.withLock { _videos } }
    var videoErrors: [String] { lock.withLock { _videoErrors } }
    func addPhoto(_ data: Data) { lock.withLock { _photos.append(data) } }
    func addVideo(_ url: URL) { lock.withLock { _videos.append(url) } }
    func addVideoError(_ error: Error) { lock.withLock { _videoErrors.append("\(error)") } }
}
