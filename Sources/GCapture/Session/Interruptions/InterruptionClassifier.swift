import Foundation
import GStreamerKit

/// Decides whether a source's failure is an interruption the session can wait out (the camera unplugged,
/// held by another program, the audio server gone), and which. The one place that reads GStreamer's and the
/// kernel's words for this: everything it does not recognise stays a runtime error, as before.
enum InterruptionClassifier {
    typealias Reason = CaptureSession.InterruptionReason

    /// GstResourceError codes (gst/gsterror.h); GStreamerKit keeps the raw code.
    private enum ResourceCode: Int {
        case failed = 1, notFound = 3, busy = 4, openRead = 5, openReadWrite = 7, read = 9, settings = 13, noSpaceLeft = 14
    }

    private static let resourceDomain = "gst-resource-error-quark"

    /// The reason for the first error a device's source posted, or nil when it is not an interruption.
    static func reason(for error: GStreamerError, from device: CaptureDevice) -> Reason? {
        switch device.backend {
        case .v4l2:
            return cameraReason(error)
        case .provided where device.mediaType == .video:
            return cameraReason(error)
        case .pulse, .provided:
            return microphoneReason(error)
        case .testCamera, .testMicrophone, .firstAvailableCamera, .composite:
            // Test sources are generated in-process: nothing outside can take them away (nor the composite of several
            // cameras, each interrupted in its own session). The first available
            // camera's source is black frames while it waits (SourceBuilder.videoSource).
            return nil
        }
    }

    /// A camera's error the words do not explain, told apart by asking the device itself: a camera whose node
    /// no longer opens (ENODEV: vivid disconnected while a handle is open; ENOENT: a USB camera gone from
    /// /dev) was unplugged, whatever v4l2src was doing then. Unplugged during a renegotiation, it fails the
    /// buffer pool's activation ("Failed to allocate required memory", as an injected streamon error also
    /// says), which ended the session (seen in the VM: a disconnect 6 s after start, under load).
    static func reasonAskingTheDevice(_ device: CaptureDevice) -> Reason? {
        guard device.mediaType == .video, case .v4l2 = device.backend, let node = device.nodePath else { return nil }
        guard let error = V4L2Node.openError(node) else { return nil }
        return error == ENODEV || error == ENOENT ? .videoDeviceUnplugged : nil
    }

    /// The reason for a device the device monitor (udev) says went away.
    static func reasonForRemoval(of device: CaptureDevice) -> Reason {
        device.mediaType == .video ? .videoDeviceUnplugged : .audioDeviceUnplugged
    }

    /// v4l2src, as GStreamer 1.22 reports it (verified with vivid, see the testbed's README):
    /// - unplugged while streaming: RESOURCE_ERROR READ "Could not read from resource." with a poll error
    ///   (POLLERR; the errno text is stale), or NO_SPACE_LEFT "Failed to allocate a buffer" from its create
    ///   (the same vb2 queue error, when that message wins the race), or an ioctl answering ENODEV;
    /// - opened while unplugged: OPEN_READ_WRITE / NOT_FOUND with ENODEV or ENOENT;
    /// - another process streams from it: RESOURCE_ERROR BUSY "Device '/dev/video0' is busy", S_FMT
    ///   answering EBUSY ("Device or resource busy").
    private static func cameraReason(_ error: GStreamerError) -> Reason? {
        let debug = error.debug ?? ""
        if debug.contains("Device or resource busy") { return .videoDeviceInUseByAnotherClient }
        guard error.domain == resourceDomain, let code = ResourceCode(rawValue: error.code) else {
            return mentionsNoDevice(debug) ? .videoDeviceUnplugged : nil
        }
        switch code {
        case .busy:
            return .videoDeviceInUseByAnotherClient
        case .read:
            // A read that failed for any other cause (a driver bug answering EIO) is not an unplug the
            // session can wait out.
            return debug.contains("poll error") || mentionsNoDevice(debug) ? .videoDeviceUnplugged : nil
        case .noSpaceLeft:
            // The buffer pool's acquire failing inside v4l2src's create: vb2's queue went into error. Its
            // poll usually reports it first (READ above), but not always: under load this came first.
            return debug.contains("gst_v4l2src_create") ? .videoDeviceUnplugged : nil
        case .notFound, .openRead, .openReadWrite, .settings, .failed:
            return mentionsNoDevice(debug) || mentionsNoDevice(error.message) ? .videoDeviceUnplugged : nil
        }
    }

    /// pulsesrc (and the pulse service of PipeWire), as measured with the tests' real PulseAudio server:
    /// - server killed while recording: RESOURCE_ERROR FAILED "Disconnected: Connection terminated";
    /// - no server when (re)opening: "Failed to connect: Connection refused";
    /// - the source removed from the server: the stream fails with "No such entity" or "Entity killed".
    private static func microphoneReason(_ error: GStreamerError) -> Reason? {
        guard error.domain == resourceDomain else { return nil }
        let message = error.message
        if message.contains("No such entity") || message.contains("Entity killed") { return .audioDeviceUnplugged }
        if message.hasPrefix("Disconnected") || message.hasPrefix("Failed to connect:")
            || message.contains("Connection terminated") || message.contains("Connection refused") {
            return .audioServerUnavailable
        }
        if error.code == ResourceCode.busy.rawValue || message.contains("Device or resource busy") {
            return .audioDeviceInUseByAnotherClient
        }
        return nil
    }

    private static func mentionsNoDevice(_ text: String) -> Bool {
        text.contains("No such device") || text.contains("No such file or directory")
    }
}
