import Foundation
import GCaptureSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The operator's web page: a live view, the capture's controls and events, and a gallery of the photos and
/// movies, served over HTTP on SwiftNIO (one event-loop thread: the capture's threads keep the cores).
///
/// It listens on loopback unless told otherwise; any other address needs an access token. Files come only
/// from the configured folders, requests and connections are bounded, and an error names what is wrong,
/// never a path of the machine.
public final class OperatorWebServer: Sendable {
    public let configuration: WebServerConfiguration
    private let application: WebApplication
    private let group: MultiThreadedEventLoopGroup
    private let channel = Locked<Channel?>(nil)
    private let connections: ConnectionSlots
    private let streams: OpenCount

    public struct StartError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// `liveView`: nil for a server without one (its output must be in the session before it starts).
    public convenience init(configuration: WebServerConfiguration, console: any OperatorConsole, liveView: LiveView?) throws(StartError) {
        try self.init(configuration: configuration, console: console, liveViews: liveView.map { [CameraLiveView(camera: "", view: $0)] } ?? [])
    }

    /// `liveViews`: one per camera of the set-up, named as the console names its cameras (`/live.mjpg?camera=NAME`);
    /// each one's outputs must be in its camera's session before it starts.
    public init(configuration: WebServerConfiguration, console: any OperatorConsole, liveViews: [CameraLiveView]) throws(StartError) {
        if configuration.requiresToken, (configuration.token ?? "").isEmpty {
            throw StartError(description: "\(configuration.host) can be reached from other machines: give a --token (or let one be made) to listen there")
        }
        if let token = configuration.token, token.count < 8 || token.contains(where: { $0.isWhitespace || $0 == ";" || $0 == "," }) {
            throw StartError(description: "the token must be at least 8 characters, without blanks, ';' or ','")
        }
        for folder in configuration.folders {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else {
                throw StartError(description: "\(folder.path) is not a folder")
            }
        }
        self.configuration = configuration
        application = WebApplication(configuration: configuration, console: console, liveViews: liveViews)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        connections = ConnectionSlots(limit: configuration.maxConnections)
        streams = OpenCount(limit: configuration.maxViewers)
    }

    /// Starts listening; returns the port (the one asked for, or the one the system chose for port 0).
    @discardableResult
    public func start() async throws(StartError) -> Int {
        let application = application, connections = connections, streams = streams
        let requestTimeout = TimeAmount.nanoseconds(configuration.requestTimeout.inNanoseconds)
        // One context for every connection, made when the certificate was read.
        let tls = configuration.tls?.context
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                guard case .admitted(let evicted) = connections.admit(channel) else {
                    return channel.eventLoop.makeCompletedFuture {
                        // Under TLS the refusal is written once the handshake is done, or the connection
                        // closes with a failed handshake.
                        if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                        try channel.pipeline.syncOperations.addHandler(RefuseConnectionHandler())
                    }
                }
                evicted?.close(promise: nil)
                channel.closeFuture.whenComplete { _ in connections.remove(channel) }
                let loopback = channel.remoteAddress?.ipAddress.map(WebServerConfiguration.isLoopback) ?? false
                return channel.eventLoop.makeCompletedFuture {
                    let operations = channel.pipeline.syncOperations
                    // First: everything after it reads and writes plain HTTP. A client that does not speak TLS
                    // (plain HTTP to this port) fails the handshake and the connection closes, freeing its slot;
                    // one that never finishes its handshake is closed by the request deadline.
                    if let tls { try operations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try operations.configureHTTPServerPipeline(withErrorHandling: true)
                    try operations.addHandler(HTTPConnectionHandler(application: application, slots: connections, streams: streams,
                                                                    requestTimeout: requestTimeout, peerIsLoopback: loopback))
                }
            }
        do {
            let bound = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
            channel.withLock { $0 = bound }
            return bound.localAddress?.port ?? configuration.port
        } catch {
            throw StartError(description: "cannot listen on \(configuration.host):\(configuration.port): \(Self.reason(error))")
        }
    }

    /// Stops listening, closes every connection, and waits for the gallery's library work under way.
    public func stop() async {
        if let channel = channel.withLock({ $0 }) { try? await channel.close() }
        try? await group.shutdownGracefully()
        await application.library.finish()
    }

    /// Connections open now (for tests and the benchmark).
    public var openConnections: Int { connections.current }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError {
            switch error.errnoCode {
            case EADDRINUSE: return "the port is in use by another program"
            case EACCES: return "permission denied (ports below 1024 need privileges)"
            case EADDRNOTAVAIL: return "no network interface has that address"
            default: return String(cString: strerror(error.errnoCode))
            }
        }
        if error is SocketAddressError { return "that is not an address of this machine" }
        return "\(error)"
    }
}
