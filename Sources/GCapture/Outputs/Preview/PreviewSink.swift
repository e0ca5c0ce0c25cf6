import Foundation
import GStreamerKit

/// Which GStreamer video sink shows a preview, chosen in the order a Linux user expects: the compositor the
/// session runs under (Wayland, then X), else the screen itself (KMS) on a console with no desktop.
///
/// What each sink honours of CapturePreviewOutput's settings (GStreamer 1.22):
/// - waylandsink: keeps the aspect ratio itself (resize and resizeAspectFill are done by scaling or cropping
///   in the branch when the render rectangle gives the size); `fullscreen`; render rectangle; window handle.
/// - xvimagesink (only where the X server has the Xv extension; Xvfb has not): force-aspect-ratio; render
///   rectangle; window handle. No fullscreen of its own.
/// - ximagesink: draws frames at their own size into a window of that size; it cannot scale, so a render
///   rectangle's size (and the gravity within it) is done by scaling or cropping in the branch, and its place
///   is not honoured; window handle. No fullscreen of its own.
/// - glimagesink: force-aspect-ratio; render rectangle; window handle. No fullscreen of its own.
/// - kmssink: the whole screen, keeping the aspect ratio (fullscreen by nature); render rectangle.
struct PreviewSink: Sendable, Equatable {
    /// The gst-launch fragment that ends the preview branch.
    var description: String
    /// The sink's factory, when the branch ends in one element whose properties are known.
    var factory: String?
    /// The display the sink was chosen for (its `display` property), when the environment named one.
    var display: String?

    /// The X sinks in the order tried: Xv scales in the server; ximagesink needs nothing but X and costs the
    /// least CPU where there is no Xv (a virtual or remote display); glimagesink for a machine without the
    /// gstreamer1.0-x package. Each is tried by opening the display, so a missing plugin or extension falls
    /// through to the next.
    static let xSinks = ["xvimagesink", "ximagesink", "glimagesink"]

    /// Where kmssink looks for a screen.
    static let drmDevices = "/dev/dri"

    /// The sink for `named` (a factory or a gst-launch fragment of the user's), else the first that can open
    /// a display under `environment`; throws `noDisplay` naming everything tried.
    static func choose(named: String?, environment: [String: String],
                       opens: (_ factory: String, _ display: String?) -> Bool = PreviewSink.opens,
                       hasDRMDevice: () -> Bool = PreviewSink.hasDRMDevice) throws(CaptureError) -> PreviewSink {
        if let named {
            let trimmed = named.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { throw .invalidSettings("the preview's sink name is empty") }
            let isFactory = trimmed.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
            if isFactory {
                try checkVideoSink(trimmed)
                return PreviewSink(description: trimmed, factory: trimmed, display: nil)
            }
            return PreviewSink(description: trimmed, factory: nil, display: nil)
        }
        var tried: [String] = []
        func attempt(_ factory: String, display: String?) -> PreviewSink? {
            if opens(factory, display) { return PreviewSink(description: factory, factory: factory, display: display) }
            tried.append(GStreamer.hasElement(factory) ? "\(factory) (cannot open the display)" : "\(factory) (not installed)")
            return nil
        }
        if let wayland = environment["WAYLAND_DISPLAY"], !wayland.isEmpty {
            if let sink = attempt("waylandsink", display: wayland) { return sink }
        } else {
            tried.append("waylandsink (WAYLAND_DISPLAY is not set)")
        }
        if let display = environment["DISPLAY"], !display.isEmpty {
            for factory in xSinks { if let sink = attempt(factory, display: display) { return sink } }
        } else {
            tried.append("\(xSinks.joined(separator: ", ")) (DISPLAY is not set)")
        }
        // Only where there is no desktop at all: under one, KMS belongs to the compositor.
        if tried.allSatisfy({ $0.hasSuffix("is not set)") }) {
            if hasDRMDevice() {
                if let sink = attempt("kmssink", display: nil) { return sink }
            } else {
                tried.append("kmssink (no screen under \(drmDevices))")
            }
        }
        throw .noDisplay(tried: tried)
    }

    /// The sinks that show a picture on a screen, in the order they are tried.
    static var displaySinks: [String] { ["waylandsink"] + xSinks + ["kmssink"] }

    /// A sink named by the user is an installed element that shows video. A converter or a filter used to be
    /// taken and left the branch unlinked; a misspelt name was blamed on missing plugins.
    static func checkVideoSink(_ factory: String) throws(CaptureError) {
        let installed = displaySinks.filter(GStreamer.hasElement)
        let suggestion = installed.isEmpty ? "no display sink is installed (\(displaySinks.joined(separator: ", ")))"
            : "the display sinks here: \(installed.joined(separator: ", "))"
        guard let classification = GStreamer.elementClassification(factory) else {
            // A sink we know of is a plugin to install; any other name is a mistake.
            if displaySinks.contains(factory) { throw .missingPlugin(factory) }
            throw .invalidSettings("there is no GStreamer element called \(factory); \(suggestion)")
        }
        // fakesink ("Sink") takes any media, so it is a preview's sink in a test or on a headless machine.
        let kinds = classification.split(separator: "/")
        guard kinds.contains("Sink"), kinds.contains("Video") || !kinds.contains("Audio") else {
            throw .invalidSettings("\(factory) is not a video sink (it is a \(classification) element); \(suggestion)")
        }
    }

    /// Whether a sink of this factory opens its display (the NULL to READY change connects to the X server
    /// or compositor, and checks Xv for xvimagesink). glimagesink has no display property: it takes the
    /// process's environment.
    static func opens(_ factory: String, display: String?) -> Bool {
        guard let element = try? Element.make(factory) else { return false }
        if let display, element.hasProperty("display") {
            guard (try? element.set("display", display)) != nil else { return false }
        }
        defer { _ = try? element.setState(.null) }
        return (try? element.setState(.ready)) != nil
    }

    static func hasDRMDevice() -> Bool {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: drmDevices)) ?? []
        return names.contains { $0.hasPrefix("card") }
    }
}
