import Foundation
import GStreamerKit

/// Which Debian package provides a GStreamer element, for the ones people commonly name and the ones the
/// engine builds: the one table behind CaptureError's advice and a description file's diagnostics, so the
/// two never name different packages for the same element.
public enum ElementPackages {
    static let table: [String: String] = {
        var table: [String: String] = [:]
        let packages: [(String, [String])] = [
            ("gstreamer1.0-plugins-base", ["videoconvert", "videoscale", "videorate", "videotestsrc", "audiotestsrc",
                                          "audioconvert", "audioresample", "appsink", "appsrc", "theoraenc", "vorbisenc",
                                          "oggmux", "tee", "queue", "capsfilter", "compositor", "videoflip", "opusenc"]),
            ("gstreamer1.0-plugins-good", ["v4l2src", "jpegenc", "jpegdec", "pngenc", "videocrop", "videobox",
                                          "videobalance", "mp4mux", "qtmux", "matroskamux", "pulsesrc", "autovideosink",
                                          "agingtv", "edgetv", "dicetv", "warptv", "quarktv", "vertigotv", "shagadelictv",
                                          "revtv", "streaktv", "radioactv", "rippletv", "optv", "gdkpixbufoverlay",
                                          "alpha", "deinterlace", "flvmux", "level", "spectrum", "cairooverlay",
                                          "multifilesink", "splitmuxsink", "rtpjpegpay", "udpsink", "souphttpsrc",
                                          "vp8enc", "vp9enc", "gamma", "videomixer", "rtph264pay", "rtpopuspay"]),
            ("gstreamer1.0-plugins-bad", ["openh264enc", "nvh264enc", "vah264enc", "qsvh264enc", "srtsink", "rtmp2sink",
                                         "webrtcbin", "kmssink", "waylandsink", "zbar", "rsvgoverlay", "coloreffects",
                                         "gaussianblur", "x265enc", "faceblur", "watchdog", "intervideosrc", "intervideosink",
                                         "hlssink2", "fdkaacenc", "chromahold", "bulge", "fisheye", "kaleidoscope",
                                         "mirror", "pinch", "sphere", "square", "stretch", "tunnel", "twirl", "waterripple",
                                         "mpegtsmux", "opusparse", "voaacenc"]),
            ("gstreamer1.0-rtsp", ["rtspclientsink"]),
            ("gstreamer1.0-nice", ["nicesrc", "nicesink"]),
            ("gstreamer1.0-plugins-ugly", ["x264enc", "mpeg2dec", "a52dec"]),
            ("gstreamer1.0-libav", ["avenc_mjpeg", "avenc_mpeg4", "avdec_h264", "avenc_aac"]),
            ("gstreamer1.0-x", ["textoverlay", "clockoverlay", "timeoverlay", "ximagesink", "xvimagesink", "pango"]),
            ("gstreamer1.0-gl", ["glimagesink", "gleffects", "glupload", "gldownload", "glcolorconvert", "glshader"]),
            ("gstreamer1.0-gtk3", ["gtksink", "gtkglsink"]),
            ("gstreamer1.0-pipewire", ["pipewiresrc", "pipewiresink"]),
            ("gstreamer1.0-libcamera", ["libcamerasrc"]),
            ("gstreamer1.0-opencv", ["facedetect", "faceblur", "edgedetect", "cvsmooth", "motioncells", "handdetect"]),
            ("gstreamer1.0-vaapi", ["vaapih264enc", "vaapipostproc", "vaapisink"]),
            ("frei0r-plugins", ["frei0r-filter-cartoon", "frei0r-filter-sepia"]),
        ]
        for (package, elements) in packages { for element in elements where table[element] == nil { table[element] = package } }
        return table
    }()

    /// The Debian package that provides `element`, when it is one the table knows.
    public static func package(providing element: String) -> String? { table[element] }

    /// Whether the element's plugin is installed on this machine.
    public static func isInstalled(_ element: String) -> Bool {
        GStreamer.initialize()
        return GStreamer.hasElement(element)
    }

    /// What to tell someone whose machine lacks `element`: the package to install, or that there is no such element.
    public static func missing(_ element: String) -> String {
        if let package = table[element] {
            return "the GStreamer element '\(element)' is not installed on this machine; Debian's package \(package) provides it (apt install \(package))"
        }
        return "there is no GStreamer element '\(element)' on this machine (misspelt, or from a plugin package that is not installed; `gst-inspect-1.0 | grep -i \(element)` lists near names)"
    }

    /// The element a parse error says is missing: GStreamer writes `no element "NAME"`.
    public static func missingElement(in message: String) -> String? {
        guard let range = message.range(of: "no element \"") else { return nil }
        let rest = message[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }
}
