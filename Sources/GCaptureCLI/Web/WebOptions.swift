import ArgumentParser
import Foundation
import GCapture
import GCaptureWeb

/// The web page's options, the same for `gcapture serve` and `gcapture run --http`.
struct WebOptions: ParsableArguments {
    @Option(name: .customLong("token"),
            help: "The access token the page asks for (at least 8 characters). Required off loopback; when it is not given there, one is made and printed.")
    var token: String?

    @Option(name: .customLong("live-size"), help: "The live view's size, WIDTHxHEIGHT (default: 1280x720).",
            transform: WebOptions.size)
    var liveSize: (width: Int, height: Int) = (1280, 720)

    @Option(name: .customLong("live-rate"), parsing: .unconditional,
            help: "The live view's frames a second, \(NumberRanges.liveRate.accepted) (default: 15).", transform: NumberRanges.liveRate.parser)
    var liveRate: Double = 15

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp(
        "Serve HTTPS with this certificate (PEM; the server's first, then any intermediates). Needs --tls-key.",
        valueName: "file"))
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp(
        "The certificate's private key (PEM, unencrypted; keep it readable by this user only). Needs --tls-cert.",
        valueName: "file"))
    var tlsKey: String?

    /// The certificate and key, read and checked when the command line is (validate()): a file that is
    /// missing, unreadable, not a certificate or key, or a key that is not the certificate's is a mistake
    /// on the command line like any other (exit status 64), named with its file. Read once, at start.
    private(set) var tls: WebTLSIdentity?

    // Every option but `tls`, which is made from two of them.
    private enum CodingKeys: String, CodingKey { case token, liveSize, liveRate, tlsCertificate, tlsKey }

    mutating func validate() throws {
        switch (tlsCertificate, tlsKey) {
        case (nil, nil): tls = nil
        case (_?, nil): throw ValidationError("--tls-cert needs --tls-key: give the certificate's private key too")
        case (nil, _?): throw ValidationError("--tls-key needs --tls-cert: give the certificate the key belongs to")
        case (let certificate?, let key?):
            do { tls = try WebTLSIdentity(certificate: certificate, key: key) } catch { throw ValidationError(error.description) }
        }
    }

    static func size(_ text: String) throws -> (width: Int, height: Int) {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]),
              (16...7680).contains(width), (16...4320).contains(height) else {
            throw ValidationError("--live-size \(text): write WIDTHxHEIGHT, e.g. 1280x720 (16x16 to 7680x4320)")
        }
        return (width, height)
    }

    /// The server for `listen` ("ADDR:PORT"), with a live view for each of `cameras` (their names); each live
    /// view's outputs are to be added to its camera's session before it starts. `tls`: a description's
    /// certificate, for want of --tls-cert.
    func server(listen: String, folders: [URL], tls described: WebTLSIdentity? = nil,
                isTimelapse: @escaping @Sendable (_ name: String, _ folder: URL) -> Bool = { _, _ in false },
                cameras: [String], console: any OperatorConsole) throws -> (OperatorWebServer, [CameraLiveView], String?) {
        let address: (host: String, port: Int)
        switch WebServerConfiguration.parseListenAddress(listen) {
        case .success(let parsed): address = parsed
        case .failure(let error): throw CommandFailure("--listen \(error)")
        }
        var configuration = WebServerConfiguration(host: address.host, port: address.port, token: token, folders: folders)
        configuration.tls = tls ?? described
        configuration.isTimelapse = isTimelapse
        var madeToken: String?
        if configuration.requiresToken, token == nil {
            madeToken = WebServerConfiguration.makeToken()
            configuration.token = madeToken
        }
        let liveViews = try cameras.map { camera in
            CameraLiveView(camera: camera, view: try LiveView(settings: .init(width: liveSize.width, height: liveSize.height, framesPerSecond: liveRate)))
        }
        do {
            return (try OperatorWebServer(configuration: configuration, console: console, liveViews: liveViews), liveViews, madeToken)
        } catch {
            throw CommandFailure(error.description)
        }
    }
}
