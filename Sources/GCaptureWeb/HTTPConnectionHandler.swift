import Foundation
import GCaptureControl
import NIOCore
import NIOHTTP1
import Synchronization

/// Counts what is open at once (connections, viewers); what would exceed the limit is refused.
final class OpenCount: Sendable {
    let limit: Int
    private let count = Atomic<Int>(0)
    init(limit: Int) { self.limit = limit }

    func tryOpen() -> Bool {
        while true {
            let now = count.load(ordering: .relaxed)
            guard now < limit else { return false }
            if count.compareExchange(expected: now, desired: now + 1, ordering: .acquiringAndReleasing).exchanged { return true }
        }
    }

    func close() { count.subtract(1, ordering: .relaxed) }
    var current: Int { count.load(ordering: .relaxed) }
}

/// One browser's connection: reads a request (bounded), lets the application answer it off the event loop,
/// and writes the answer; or keeps the connection as a live-view or event stream until the browser leaves.
final class HTTPConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Parts of a stream written and not yet sent: a viewer that falls further behind skips frames (the
    /// camera and the other viewers never wait for it); an event stream that does is closed (EventSource
    /// reconnects and the page asks for the state anew).
    static let maxPendingFrames = 2
    static let maxPendingEvents = 256

    private let application: WebApplication
    private let slots: ConnectionSlots
    private let streams: OpenCount
    private let requestTimeout: TimeAmount
    private let peerIsLoopback: Bool
    /// Closes the connection unless a whole request has come in by then; armed while one is awaited.
    private var requestDeadline: Scheduled<Void>?
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var refusal: (HTTPResponseStatus, String)?
    private var pendingParts = 0
    private var stream: OpenStream?

    private enum OpenStream {
        case live(LiveView, UInt64)
        case events(Task<Void, Never>, RepeatedTask)
    }

    init(application: WebApplication, slots: ConnectionSlots, streams: OpenCount, requestTimeout: TimeAmount, peerIsLoopback: Bool) {
        self.application = application
        self.slots = slots
        self.streams = streams
        self.requestTimeout = requestTimeout
        self.peerIsLoopback = peerIsLoopback
    }

    func handlerAdded(context: ChannelHandlerContext) { awaitRequest(context: context) }

    /// The connection waits for its next request: it may be pushed out for a newcomer, and is closed if the
    /// request has not come whole within the deadline.
    private func awaitRequest(context: ChannelHandlerContext) {
        slots.setBusy(false, context.channel)
        requestDeadline?.cancel()
        let channel = context.channel
        requestDeadline = context.eventLoop.scheduleTask(in: requestTimeout) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard stream == nil else { return }
            slots.setBusy(true, context.channel)
            self.head = head
            body.clear()
            refusal = head.uri.utf8.count > application.configuration.maxTargetBytes
                ? (.uriTooLong, "the address is longer than \(application.configuration.maxTargetBytes) bytes") : nil
        case .body(var chunk):
            guard refusal == nil, stream == nil else { return }
            if body.readableBytes + chunk.readableBytes > application.configuration.maxBodyBytes {
                refusal = (.payloadTooLarge, "the request is larger than \(application.configuration.maxBodyBytes) bytes")
                body.clear()
            } else {
                body.writeBuffer(&chunk)
            }
        case .end:
            guard let head, stream == nil else { return }
            self.head = nil
            requestDeadline?.cancel()
            requestDeadline = nil
            if let (status, message) = refusal {
                // The rest of an oversized request is not read: the connection ends with the answer.
                write(.error(status, message), for: head, keepAlive: false, context: context)
                return
            }
            let request = WebRequest(head: head, body: Data(body.readableBytesView), peerIsLoopback: peerIsLoopback)
            body.clear()
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let application = application
            Task {
                let response = await application.respond(to: request)
                bound.eventLoop.execute {
                    let (handler, context) = bound.value
                    guard context.channel.isActive else { response.discard(); return }
                    handler.write(response, for: head, keepAlive: head.isKeepAlive, context: context)
                }
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        endStream()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        requestDeadline?.cancel()
        endStream()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A request the HTTP parser cannot read gets a plain 400; NIO's error handler answers that already.
        context.close(promise: nil)
    }

    private func endStream() {
        switch stream {
        case .live(let liveView, let key)?: liveView.removeViewer(key); streams.close()
        case .events(let task, let heartbeat)?: task.cancel(); heartbeat.cancel(); streams.close()
        case nil: break
        }
        stream = nil
    }

    // MARK: Writing

    private func write(_ response: WebResponse, for request: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        switch response {
        case .full(let status, var headers, let body):
            headers.replaceOrAdd(name: "Content-Length", value: String(body.readableBytes))
            finish(status: status, headers: headers, body: request.method == .HEAD ? nil : .byteBuffer(body),
                   keepAlive: keepAlive, request: request, context: context)
        case .file(let file):
            var headers = HTTPHeaders(WebResponse.securityHeaders)
            headers.add(name: "Content-Type", value: file.contentType)
            headers.add(name: "Accept-Ranges", value: "bytes")
            headers.add(name: "Cache-Control", value: "private, no-cache")
            if let name = file.downloadName {
                let ascii = String(name.unicodeScalars.map { $0.isASCII && $0 != "\"" && $0.value >= 0x20 ? Character($0) : "_" })
                headers.add(name: "Content-Disposition", value: "attachment; filename=\"\(ascii)\"")
            }
            let range = file.range ?? 0...(max(0, file.size - 1))
            let count = file.size == 0 ? 0 : range.count
            headers.add(name: "Content-Length", value: String(count))
            if let asked = file.range { headers.add(name: "Content-Range", value: "bytes \(asked.lowerBound)-\(asked.upperBound)/\(file.size)") }
            let region = FileRegion(fileHandle: file.handle, readerIndex: range.lowerBound, endIndex: range.lowerBound + count)
            let body: IOData? = request.method == .HEAD || count == 0 ? nil : .fileRegion(region)
            finish(status: file.range == nil ? .ok : .partialContent, headers: headers, body: body, keepAlive: keepAlive,
                   request: request, context: context) { try? file.handle.close() }
        case .liveView(let liveView):
            guard streams.tryOpen() else { return refuseStream(request, context: context) }
            startLiveView(liveView, request: request, context: context)
        case .events(let events):
            guard streams.tryOpen() else { return refuseStream(request, context: context) }
            startEvents(events, request: request, context: context)
        }
    }

    private func finish(status: HTTPResponseStatus, headers: HTTPHeaders, body: IOData?, keepAlive: Bool,
                        request: HTTPRequestHead, context: ChannelHandlerContext, whenSent: @escaping @Sendable () -> Void = {}) {
        var headers = headers
        headers.replaceOrAdd(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        let sent = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        let channel = context.channel
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        sent.whenComplete { _ in
            whenSent()
            if keepAlive {
                let (handler, context) = bound.value
                if channel.isActive { handler.awaitRequest(context: context) }
            } else {
                channel.close(promise: nil)
            }
        }
    }

    private func refuseStream(_ request: HTTPRequestHead, context: ChannelHandlerContext) {
        write(.error(.serviceUnavailable, "too many viewers (\(streams.limit)); close another page and try again"),
              for: request, keepAlive: false, context: context)
    }

    private func streamHead(_ request: HTTPRequestHead, type: String, context: ChannelHandlerContext) {
        var headers = HTTPHeaders(WebResponse.securityHeaders)
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Cache-Control", value: "no-store, no-cache, must-revalidate, max-age=0")
        headers.add(name: "Pragma", value: "no-cache")
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .ok, headers: headers))), promise: nil)
    }

    private func startLiveView(_ liveView: LiveView, request: HTTPRequestHead, context: ChannelHandlerContext) {
        streamHead(request, type: "multipart/x-mixed-replace; boundary=\(LiveView.boundary)", context: context)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(LiveView.streamStart))), promise: nil)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let key = liveView.addViewer { part in
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.sendPart(part, context: context)
            }
        }
        stream = .live(liveView, key)
    }

    private func sendPart(_ part: ByteBuffer, context: ChannelHandlerContext) {
        guard case .live? = stream, context.channel.isActive else { return }
        _ = writeStreamPart(part, unlessPending: Self.maxPendingFrames, context: context)
    }

    /// Writes a part of the open stream, unless `limit` parts are still unsent; false when it was not written.
    private func writeStreamPart(_ part: ByteBuffer, unlessPending limit: Int, context: ChannelHandlerContext) -> Bool {
        guard pendingParts < limit else { return false }
        pendingParts += 1
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(part)))).whenComplete { _ in bound.value.pendingParts -= 1 }
        return true
    }

    private func startEvents(_ events: AsyncStream<ControlEvent>, request: HTTPRequestHead, context: ChannelHandlerContext) {
        streamHead(request, type: "text/event-stream; charset=utf-8", context: context)
        // retry: how soon EventSource reconnects after the stream ends.
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "retry: 2000\n\n")))), promise: nil)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = Task {
            for await event in events {
                guard let json = event.json else { continue }
                var line = ByteBuffer(string: "data: ")
                line.writeBytes(json)
                line.writeString("\n\n")
                let text = line
                bound.eventLoop.execute {
                    let (handler, context) = bound.value
                    handler.sendEvent(text, context: context)
                }
            }
        }
        // A comment every 15 s: proxies and the browser see a live connection, and a dead one is noticed.
        let heartbeat = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(15), delay: .seconds(15)) { _ in
            let (handler, context) = bound.value
            handler.sendEvent(ByteBuffer(string: ": alive\n\n"), context: context)
        }
        stream = .events(task, heartbeat)
    }

    private func sendEvent(_ text: ByteBuffer, context: ChannelHandlerContext) {
        guard case .events? = stream, context.channel.isActive else { return }
        if !writeStreamPart(text, unlessPending: Self.maxPendingEvents, context: context) { context.close(promise: nil) }
    }
}

extension WebResponse {
    /// Releases what an unsent response holds (an open file).
    func discard() {
        if case .file(let file) = self { try? file.handle.close() }
    }
}

/// Answers a connection over the limit with 503 and closes it, without reading its request.
final class RefuseConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let body = #"{"ok":false,"error":"too many connections at once; try again in a moment"}"# + "\n"
    static let response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
        + "Connection: close\r\nRetry-After: 2\r\n\r\n" + body

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: Self.response))).whenComplete { _ in channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
