import Foundation
import GStreamerKit

/// Where a stream goes, read from the URL the user gave, and the GStreamer end that takes it there.
public struct StreamDestination: Sendable, Equatable, CustomStringConvertible {
    enum Kind: String, Sendable {
        /// flvmux + rtmp2sink (rtmp:// and rtmps://).
        case rtmp
        /// mpegtsmux + srtsink, as caller (the default: we connect to a server) or listener (players connect to us).
        case srt
        /// rtspclientsink publishing with RECORD.
        case rtsp
        /// hlssink2: a playlist and MPEG-TS segments beside it, for a web server to serve.
        case hls
        /// WebRTC to a WHIP endpoint (RFC 9725): http(s)://, or whip:// and whips:// for them.
        case whip
    }

    let kind: Kind
    /// The location as the sink takes it: the URL, or for HLS the playlist's path.
    let location: String
    /// SRT only: whether we wait for callers instead of calling.
    let listens: Bool

    public var description: String { kind == .hls ? location : Self.redacted(location) }

    /// A URL with its password and stream key left out, for logs and messages (an RTMP URL's last component
    /// is often the publisher's secret).
    static func redacted(_ location: String) -> String {
        guard var parts = URLComponents(string: location) else { return location }
        if parts.password != nil { parts.password = "***" }
        if parts.scheme?.hasPrefix("rtmp") == true, let last = parts.path.split(separator: "/").last, parts.path.split(separator: "/").count >= 2 {
            parts.path = String(parts.path.dropLast(last.count)) + "***"
        }
        if parts.query?.contains("passphrase") == true || parts.query?.contains("streamid") == true { parts.query = "***" }
        return parts.string ?? location
    }

    /// Reads `location`: rtmp://, rtmps://, srt://, rtsp:// URLs, a WHIP endpoint (http://, https://, whip://,
    /// whips://), or a path ending in .m3u8 (optionally a file:// URL) for HLS. The error names what is wrong
    /// with what the user typed.
    init(_ location: String) throws(CaptureError) {
        let trimmed = location.trimmingCharacters(in: .whitespaces)
        let lower = trimmed.lowercased()
        if lower.hasSuffix(".m3u8") && !lower.contains("://") || lower.hasPrefix("file://") {
            let path = lower.hasPrefix("file://") ? (URL(string: trimmed)?.path ?? "") : trimmed
            guard path.lowercased().hasSuffix(".m3u8") else {
                throw .invalidSettings("an HLS stream is written as a playlist ending in .m3u8, not \(path)")
            }
            kind = .hls
            self.location = URL(fileURLWithPath: path).standardizedFileURL.path
            listens = false
            return
        }
        guard let url = URLComponents(string: trimmed), let scheme = url.scheme?.lowercased() else {
            throw .invalidSettings("'\(Self.redacted(trimmed))' is not a stream URL (rtmp://, srt://, rtsp://, a WHIP endpoint or a playlist path ending in .m3u8)")
        }
        var location = trimmed
        switch scheme {
        case "rtmp", "rtmps": kind = .rtmp
        case "srt": kind = .srt
        case "rtsp", "rtsps": kind = .rtsp
        case "http", "https": kind = .whip
        case "whip", "whips":
            kind = .whip
            // Spellings of the endpoint's own URL, which is HTTP.
            location = (scheme == "whips" ? "https" : "http") + trimmed.dropFirst(scheme.count)
        default:
            throw .invalidSettings("streams go to rtmp://, srt://, rtsp://, a WHIP endpoint (https://, whip://) or a playlist ending in .m3u8, not \(scheme)://")
        }
        let host = url.host ?? ""
        let mode = url.queryItems?.first { $0.name == "mode" }?.value?.lowercased()
        listens = kind == .srt && (mode == "listener" || mode == "server")
        guard !host.isEmpty || listens else {
            throw .invalidSettings("the stream URL \(Self.redacted(trimmed)) names no server")
        }
        if kind == .rtmp, url.path.split(separator: "/").count < 2 {
            throw .invalidSettings("an RTMP URL needs an application and a stream key: rtmp://host/app/key")
        }
        if kind == .srt, url.port == nil {
            throw .invalidSettings("an SRT URL needs a port: srt://host:port")
        }
        // Not left to the sink: srtsink took port 99999 and retried a connection that could never be made.
        if let port = url.port, !(1...65535).contains(port) {
            throw .invalidSettings("the port \(port) in \(Self.redacted(trimmed)) is not a port: ports go from 1 to 65535")
        }
        self.location = location
    }

    /// The HLS playlist's folder exists, is a folder and takes files. Writability is tried with a file, not
    /// access(2): root may "write" in /proc, where hlssink2 then failed with a GStreamer-CRITICAL.
    func checkPlaylistFolder() throws(CaptureError) {
        let folder = (location as NSString).deletingLastPathComponent
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) else {
            throw .invalidSettings("the folder \(folder) of the HLS playlist does not exist")
        }
        guard isFolder.boolValue else { throw .invalidSettings("\(folder) is a file, not a folder: the HLS playlist cannot go in it") }
        let probe = (folder as NSString).appendingPathComponent(".gcapture-write-check-\(getpid())")
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw .invalidSettings("cannot write in \(folder), the folder of the HLS playlist: \(String(cString: strerror(errno)))")
        }
        close(descriptor)
        unlink(probe)
    }

    /// The elements and the Debian package each comes in, checked before anything is built.
    var requiredElements: [(element: String, package: String)] {
        let elements = switch kind {
        case .rtmp: ["flvmux", "rtmp2sink"]
        case .srt: ["mpegtsmux", "srtsink"]
        case .rtsp: ["rtspclientsink"]
        case .hls: ["hlssink2", "mpegtsmux"]
        case .whip: ["webrtcbin", "nicesrc", "rtph264pay", "rtpopuspay", "opusenc"]
        }
        // Every one is in ElementPackages' table; the fallback only keeps a newly added one from going unnamed.
        return elements.map { ($0, ElementPackages.package(providing: $0) ?? "gstreamer1.0-plugins-bad") }
    }

    /// The first element missing, as the error that names its package.
    func checkInstalled(isInstalled: (String) -> Bool = GStreamer.hasElement) throws(CaptureError) {
        for (element, package) in requiredElements where !isInstalled(element) {
            throw .missingPackage(element: element, package: package)
        }
    }

    /// Whether the protocol carries AAC (all four do; for Opus see `carriesOpus`).
    var carriesAudio: Bool { true }
    /// MPEG-TS (SRT) and RTP (RTSP, WebRTC) carry Opus; FLV does not, and HLS players expect AAC in their segments.
    var carriesOpus: Bool { kind == .srt || kind == .rtsp || kind == .whip }
    /// WebRTC carries no AAC: its audio is Opus whatever was asked.
    var requiresOpus: Bool { kind == .whip }

    /// The appsinks a WHIP stream's branch ends in: its peer connection, a pipeline of its own, sends on.
    static let whipVideoSink = "whip_video", whipAudioSink = "whip_audio"

    /// The sink end in gst-launch syntax, named "sink", fed by the pads named in `videoPad`/`audioPad`.
    /// Each protocol's muxer is pinned where it matters: FLV streamable (no seeking back to patch headers),
    /// MPEG-TS in 7 packets of 188 bytes = 1316 (SRT's payload: anything else reaches the server as
    /// video that does not decode).
    func sinkDescription(hlsSegmentSeconds: Int, hlsPlaylistLength: Int) -> (sink: String, videoPad: String, audioPad: String) {
        let quoted = location.replacingOccurrences(of: "\"", with: "\\\"")
        switch kind {
        case .rtmp:
            // async-connect=false: connecting when the first data comes, so that a refused connection is an
            // error of this branch after it is linked, never of the state change that links it.
            return ("flvmux name=mux streamable=true ! rtmp2sink name=sink location=\"\(quoted)\" async-connect=false async=false sync=false",
                    "mux.video", "mux.audio")
        case .srt:
            // Our supervisor reconnects, so srtsink must not on its own (with auto-reconnect it swallows a lost
            // server silently: no state could say so). A listener waits for callers without blocking the branch.
            let wait = listens ? "wait-for-connection=false" : ""
            return ("mpegtsmux name=mux alignment=7 ! srtsink name=sink uri=\"\(quoted)\" auto-reconnect=false \(wait) async=false sync=false",
                    "mux.", "mux.")
        case .rtsp:
            // rtspclientsink payloads each pad itself (H.264 as rtph264pay, AAC as MP4A-LATM, Opus as rtpopuspay)
            // and announces the streams in an order of its own (audio first here): servers match them by their
            // SDP, so nothing here depends on it.
            return ("rtspclientsink name=sink location=\"\(quoted)\" latency=0", "sink.", "sink.")
        case .hls:
            let folder = (location as NSString).deletingLastPathComponent
            let base = ((location as NSString).lastPathComponent as NSString).deletingPathExtension
            let segments = (folder as NSString).appendingPathComponent("\(base)-%05d.ts").replacingOccurrences(of: "\"", with: "\\\"")
            return ("hlssink2 name=sink playlist-location=\"\(quoted)\" location=\"\(segments)\" target-duration=\(hlsSegmentSeconds) "
                        + "playlist-length=\(hlsPlaylistLength) max-files=\(hlsPlaylistLength + 2) send-keyframe-requests=true",
                    "sink.video", "sink.audio")
        case .whip:
            // No sink in the session's graph: encoded frames leave through appsinks to the peer (WebRTCPeer).
            let appSink = "sync=false max-buffers=1 drop=false enable-last-sample=false"
            // Byte-stream access units: rtph264pay fails on the avc form's codec_data that h264parse gives an appsink.
            return ("", "video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=\(Self.whipVideoSink) \(appSink)",
                    "appsink name=\(Self.whipAudioSink) \(appSink)")
        }
    }
}
