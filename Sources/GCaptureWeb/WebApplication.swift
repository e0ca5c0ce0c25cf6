import Foundation
import GCaptureControl
import GCapturePhotos
import GCaptureSupport
import NIOCore
import NIOHTTP1

/// The page's routes: who may use them, and what each answers. Every route but the login page needs the
/// token when one is set (always, off loopback); without one, only requests addressed to a loopback name
/// are served, so that another site cannot reach the camera by pointing its own name at 127.0.0.1.
struct WebApplication: Sendable {
    static let cookieName = "gcapture_token"

    let configuration: WebServerConfiguration
    let console: any OperatorConsole
    /// One per camera, in the set-up's order; empty for a server without a live view.
    let liveViews: [CameraLiveView]
    let media: MediaFolders
    let library: LibraryGallery
    let thumbnails = Thumbnails()
    let movieThumbnails = MovieThumbnails()

    init(configuration: WebServerConfiguration, console: any OperatorConsole, liveViews: [CameraLiveView]) {
        self.configuration = configuration
        self.console = console
        self.liveViews = liveViews
        media = MediaFolders(configuration.folders, isTimelapse: configuration.isTimelapse)
        library = LibraryGallery(media: media)
        library.follow(console.events())
    }

    func respond(to request: WebRequest) async -> WebResponse {
        let path = request.path
        if path == "/login" { return await login(request) }
        // The style sheet is the login page's too, so it needs no token.
        if path == "/app.css", request.method == .GET {
            return .bytes(.ok, Data(WebPage.css.utf8), type: "text/css; charset=utf-8")
        }
        if let refusal = await refusal(of: request) { return refusal }
        // A link with ?token= (printed at start) logs the browser in and is replaced by the clean address.
        if configuration.token != nil, request.query["token"] != nil, request.method == .GET, path == "/" {
            return .redirect(to: "/", extra: [("Set-Cookie", sessionCookie)])
        }
        switch (request.method, path) {
        case (.GET, "/"), (.HEAD, "/"):
            return .bytes(.ok, Data(WebPage.html.utf8), type: "text/html; charset=utf-8",
                          extra: [("Content-Security-Policy", WebPage.contentSecurityPolicy)])
        case (.GET, "/app.js"):
            return .bytes(.ok, Data(WebPage.script.utf8), type: "text/javascript; charset=utf-8")
        case (.GET, "/live.mjpg"):
            switch liveView(asked: request) {
            case .success(let camera): return .liveView(camera.view)
            case .failure(let refusal): return refusal.response
            }
        case (.POST, WHEPEndpoint.path):
            switch liveView(asked: request) {
            case .success(let camera): return await WHEPEndpoint(output: camera.view.webRTC).offer(request)
            case .failure(let refusal): return refusal.response
            }
        case (.GET, "/api/status"):
            return .json(.ok, await status())
        case (.POST, "/api/command"):
            return await command(request)
        case (.GET, "/api/events"):
            return .events(Self.merged(console.events(), library.events()))
        case (.GET, "/api/gallery"):
            return await gallery()
        case (.GET, "/api/library"):
            return await libraryPage(request)
        case (.GET, "/api/library/albums"):
            let library = library
            return .json(.ok, await Self.fileOpening.run { library.albums() })
        case (.POST, "/api/library/favorite"):
            return await favorite(request)
        case (.POST, "/api/library/zip"):
            return await zipDownload(request)
        case (.GET, "/favicon.ico"):
            return .bytes(.noContent, Data(), type: "image/x-icon", extra: [("Cache-Control", "max-age=86400")])
        default:
            break
        }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        // "/whep/ID": a WHEP viewer's session.
        if components.count == 3, components[0].isEmpty, "/\(components[1])" == WHEPEndpoint.path, !liveViews.isEmpty {
            guard request.method == .DELETE else { return .error(.methodNotAllowed, "a WHEP session is ended with DELETE") }
            return WHEPEndpoint.end(viewer: components[2], among: liveViews.map(\.view.webRTC))
        }
        // "/media/0/photo.jpg" splits into "", "media", "0", "photo.jpg"; anything else is not a media file.
        if components.count == 4, components[0].isEmpty, ["media", "thumbs"].contains(components[1]) {
            guard request.method == .GET || request.method == .HEAD else { return .error(.methodNotAllowed, "\(path) is read with GET") }
            return await mediaFile(folder: components[2], name: components[3], thumbnail: components[1] == "thumbs", request: request)
        }
        if ["/", "/live.mjpg", "/api/status", "/api/command", "/api/events", "/api/gallery", "/api/library", "/api/library/albums",
            "/api/library/favorite", "/api/library/zip", WHEPEndpoint.path].contains(String(path)) {
            return .error(.methodNotAllowed, "\(request.method) is not what \(path) takes")
        }
        return .error(.notFound, "nothing here: the page is at /")
    }

    // MARK: Access

    static let wrongTokenDelay: Duration = .seconds(1)
    /// Listing the folders and opening a served file, which a slow disk can hold: off the cooperative pool.
    private static let fileOpening = BlockingQueue(label: "gcapture.web.file-opening")
    /// Writing a zip of a selection (gigabytes, for a long recording): a queue of its own, so the gallery's
    /// pages and files are not kept waiting.
    private static let zipWriting = BlockingQueue(label: "gcapture.web.zip-writing")

    /// The token a request offers: a Bearer header, the cookie, or `?token=`.
    private func offeredToken(_ request: WebRequest) -> String? {
        request.headers["authorization"].first.flatMap { header -> String? in
            header.lowercased().hasPrefix("bearer ") ? String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
        } ?? request.cookie(Self.cookieName) ?? request.query["token"]
    }

    private var sessionCookie: String {
        // Secure under HTTPS: the browser never sends the token over a plain connection to this host.
        "\(Self.cookieName)=\(configuration.token ?? ""); Path=/; HttpOnly; SameSite=Strict" + (configuration.tls != nil ? "; Secure" : "")
    }

    /// Why the request may not go on, or nil when it may.
    private func refusal(of request: WebRequest) async -> WebResponse? {
        if let token = configuration.token {
            let offered = offeredToken(request)
            guard let offered, Self.constantTimeEqual(offered, token) else {
                // A wrong token is answered a second late: guessing a short one becomes slow.
                if offered != nil { try? await Task.sleep(for: Self.wrongTokenDelay) }
                if request.method == .GET, request.path == "/" || request.acceptsHTML { return .redirect(to: "/login") }
                return .error(.unauthorized, offered == nil ? "this server needs its access token (printed when it started): log in at /login"
                                                             : "the access token is wrong")
            }
        } else {
            // No token: loopback only, addressed by a loopback name, and asked by a page of a loopback origin.
            let hosts = request.headers["host"]
            guard hosts.count == 1, LoopbackName.isLoopbackAuthority(hosts[0]) else {
                return .error(.forbidden, "this server answers to localhost only (start it with a --token to be reached by another name)")
            }
            if let origin = request.headers["origin"].first, !LoopbackName.isLoopbackOrigin(origin) {
                return .error(.forbidden, "a request from another site (\(origin)) is refused")
            }
        }
        // Commands only from the page's own origin, as JSON: a form on another site cannot post JSON without
        // the browser asking first (a CORS preflight this server never grants).
        if request.method == .POST || request.method == .DELETE {
            if let origin = request.headers["origin"].first?.lowercased(), let host = request.headers["host"].first?.lowercased(),
               origin != "http://\(host)", origin != "https://\(host)" {
                return .error(.forbidden, "a command from another site (\(origin)) is refused")
            }
        }
        return nil
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }

    private func login(_ request: WebRequest) async -> WebResponse {
        guard let token = configuration.token else { return .redirect(to: "/") }
        switch request.method {
        case .GET:
            return .bytes(.ok, Data(WebPage.login(message: nil).utf8), type: "text/html; charset=utf-8",
                          extra: [("Content-Security-Policy", WebPage.contentSecurityPolicy)])
        case .POST:
            let offered = WebRequest.formFields(Substring(decoding: request.body, as: UTF8.self))["token"] ?? ""
            guard Self.constantTimeEqual(offered, token) else {
                try? await Task.sleep(for: Self.wrongTokenDelay)
                return .bytes(.unauthorized, Data(WebPage.login(message: "That is not the token this server printed.").utf8),
                              type: "text/html; charset=utf-8", extra: [("Content-Security-Policy", WebPage.contentSecurityPolicy)])
            }
            return .redirect(to: "/", extra: [("Set-Cookie", sessionCookie)])
        default:
            return .error(.methodNotAllowed, "/login takes GET and POST")
        }
    }

    // MARK: API

    private func status() async -> [String: any Sendable] {
        var status = await console.status()
        // The picked camera's live views (the first camera's when the console names none), and with several
        // cameras each one's.
        let picked = (status["cameraName"] as? String).flatMap { name in liveViews.first { $0.camera == name } } ?? liveViews.first
        if let picked {
            (status["liveView"], status["webRTC"]) = (picked.view.liveViewStatus, picked.view.webRTCStatus)
        }
        if liveViews.count > 1 {
            status["liveViews"] = liveViews.map { camera -> [String: any Sendable] in
                ["camera": camera.camera, "liveView": camera.view.liveViewStatus, "webRTC": camera.view.webRTCStatus]
            }
        }
        return status
    }

    /// The live view a request asks for with `?camera=NAME`; without it, the first camera's.
    private func liveView(asked request: WebRequest) -> Result<CameraLiveView, LiveViewRefusal> {
        guard let first = liveViews.first else { return .failure(LiveViewRefusal(response: .error(.notFound, "this server has no live view"))) }
        guard let name = request.query["camera"] else { return .success(first) }
        guard let camera = liveViews.first(where: { $0.camera == name }) else {
            return .failure(LiveViewRefusal(response: .error(.notFound, "no camera here is called \(name): the cameras are "
                                                             + liveViews.map(\.camera).joined(separator: ", "))))
        }
        return .success(camera)
    }

    private struct LiveViewRefusal: Error { let response: WebResponse }

    private func command(_ request: WebRequest) async -> WebResponse {
        let type = request.headers["content-type"].first?.lowercased() ?? ""
        guard type.hasPrefix("application/json") else {
            return .error(.unsupportedMediaType, "a command is a JSON object sent as application/json, e.g. {\"command\": \"photo\"}")
        }
        let reply = await WebCommands.answer(request.body, console: console)
        return .bytes(reply.ok ? .ok : .unprocessableEntity, reply.json, type: "application/json")
    }

    private func gallery() async -> WebResponse {
        let formatter = ISO8601DateFormatter()
        let media = media
        let items = await Self.fileOpening.run { media.items() }.map { item -> [String: Any] in
            let name = item.name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#;"))) ?? item.name
            return ["name": item.name, "kind": item.kind.rawValue, "bytes": item.bytes, "modified": formatter.string(from: item.modified),
                    "unfinished": item.unfinished, "event": item.isEventClip, "timelapse": item.isTimelapse,
                    "url": "/media/\(item.folder)/\(name)", "thumbnail": "/thumbs/\(item.folder)/\(name)"]
        }
        return .json(.ok, ["items": items])
    }

    // MARK: The library

    private func libraryPage(_ request: WebRequest) async -> WebResponse {
        let asked: LibraryGallery.PageRequest
        switch LibraryGallery.PageRequest.read(request.query) {
        case .success(let request): asked = request
        case .failure(let refusal): return Self.answer(refusal)
        }
        let library = library
        await library.ready()
        let page = await Self.fileOpening.run { () -> Result<[String: any Sendable], GalleryRefusal> in
            do throws(GalleryRefusal) { return .success(try library.page(asked)) } catch { return .failure(error) }
        }
        switch page {
        case .success(let page): return .json(.ok, page)
        case .failure(let refusal): return Self.answer(refusal)
        }
    }

    /// {"items": ["0/photo.jpg", …], "favorite": true}
    private func favorite(_ request: WebRequest) async -> WebResponse {
        guard (request.headers["content-type"].first?.lowercased() ?? "").hasPrefix("application/json"),
              let body = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any],
              let ids = body["items"] as? [String], let favorite = body["favorite"] as? Bool else {
            return .error(.badRequest, "send {\"items\": [ids from /api/library], \"favorite\": true or false} as application/json")
        }
        do throws(GalleryRefusal) {
            let count = try await library.setFavorite(ids, to: favorite)
            return .json(.ok, ["ok": true, "changed": count])
        } catch {
            return Self.answer(error)
        }
    }

    /// A form with `items`: the ids, one a line. Answered with the zip as a download.
    private func zipDownload(_ request: WebRequest) async -> WebResponse {
        let fields = WebRequest.formFields(Substring(decoding: request.body, as: UTF8.self))
        let ids = (fields["items"] ?? "").split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let library = library
        let made = await Self.zipWriting.run { () -> Result<(descriptor: Int32, size: Int), GalleryRefusal> in
            do throws(GalleryRefusal) { return .success(try library.archive(ids)) } catch { return .failure(error) }
        }
        switch made {
        case .success(let (descriptor, size)):
            return .file(FileToSend(handle: NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor), range: nil, size: size,
                                    contentType: "application/zip", downloadName: "gcapture-\(ids.count)-items.zip"))
        case .failure(let refusal):
            return Self.answer(refusal)
        }
    }

    private static func answer(_ refusal: GalleryRefusal) -> WebResponse {
        switch refusal {
        case .badRequest(let reason): .error(.badRequest, reason)
        case .notFound(let reason): .error(.notFound, reason)
        case .tooLarge(let reason): .error(.payloadTooLarge, reason)
        case .unprocessable(let reason): .error(.unprocessableEntity, reason)
        }
    }

    /// The capture's events and the library's on one stream, ending with the capture's.
    static func merged(_ capture: AsyncStream<ControlEvent>, _ library: AsyncStream<ControlEvent>) -> AsyncStream<ControlEvent> {
        AsyncStream { continuation in
            let fromLibrary = Task { for await event in library { continuation.yield(event) } }
            let fromCapture = Task {
                for await event in capture { continuation.yield(event) }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                fromLibrary.cancel()
                fromCapture.cancel()
            }
        }
    }

    private func mediaFile(folder: Substring, name: Substring, thumbnail: Bool, request: WebRequest) async -> WebResponse {
        let path: String
        do { path = try media.resolve(folder: folder, name: name) } catch {
            return error == .badName ? .error(.badRequest, "that is not the name of a file in the gallery")
                                     : .error(.notFound, "no such photo or movie")
        }
        // Only what the gallery lists is served or decoded: any other file is the same 404 as a missing one.
        guard let kind = MediaFolders.kind(of: path) else { return .error(.notFound, "no such photo or movie") }
        if thumbnail {
            guard kind == .photo else {
                // A movie's first frame; a movie that cannot be read yet (being recorded) gets an icon.
                if let frame = await movieThumbnails.thumbnail(ofMovieAt: path) {
                    return .bytes(.ok, frame, type: "image/jpeg", extra: [("Cache-Control", "private, max-age=60")])
                }
                return .bytes(.ok, Data(WebPage.movieIcon.utf8), type: "image/svg+xml", extra: [("Cache-Control", "no-store")])
            }
            guard let small = await thumbnails.thumbnail(ofPhotoAt: path) else {
                return .error(.unprocessableEntity, "the photo cannot be read as a JPEG")
            }
            return .bytes(.ok, small, type: "image/jpeg", extra: [("Cache-Control", "private, max-age=60")])
        }
        let opened = await Self.fileOpening.run { () -> (NIOFileHandle, Int)? in
            let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else { return nil }
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { close(descriptor); return nil }
            return (NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor), Int(info.st_size))
        }
        guard let (handle, size) = opened else { return .error(.notFound, "no such photo or movie") }
        var range: ClosedRange<Int>?
        if let header = request.headers["range"].first {
            guard let asked = Self.byteRange(header, size: size) else {
                try? handle.close()
                var headers = HTTPHeaders(WebResponse.securityHeaders)
                headers.add(name: "Content-Range", value: "bytes */\(size)")
                return .full(.rangeNotSatisfiable, headers, ByteBuffer())
            }
            range = asked
        }
        let type = switch (path as NSString).pathExtension.lowercased() {
        case "mp4", "mov": "video/mp4"
        case "mkv": "video/x-matroska"
        default: "image/jpeg"
        }
        return .file(FileToSend(handle: handle, range: range, size: size, contentType: type,
                                downloadName: request.query["download"] != nil ? (path as NSString).lastPathComponent : nil))
    }

    /// One range of `bytes=a-b`, `bytes=a-` or `bytes=-n`; nil when it lies outside the file (or asks several).
    static func byteRange(_ header: String, size: Int) -> ClosedRange<Int>? {
        guard header.hasPrefix("bytes="), size > 0 else { return nil }
        let spec = header.dropFirst(6)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces), last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            guard let count = Int(last), count > 0 else { return nil }
            return max(0, size - count)...(size - 1)
        }
        guard let start = Int(first), start < size else { return nil }
        let end = last.isEmpty ? size - 1 : min(Int(last) ?? -1, size - 1)
        return end >= start ? start...end : nil
    }
}
