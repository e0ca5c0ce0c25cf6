import Foundation
import NIOSSL

/// The web page's certificate and private key for HTTPS, read and checked once at start: a connection then
/// only takes the prepared context (nothing is read from disk on the event loop).
///
/// Every failure names the file and what is wrong with it in the operator's words (not BoringSSL's).
public struct WebTLSIdentity: Sendable {
    /// The files given, as given (for messages).
    public let certificatePath: String
    public let keyPath: String
    /// The server's context: TLS 1.2 or newer, the certificate chain and its key.
    let context: NIOSSLContext

    public struct LoadError: Error, Sendable, CustomStringConvertible {
        public enum File: Sendable { case certificate, key }
        public let description: String
        /// The file at fault (the key when it is not the certificate's).
        public let file: File
        init(_ description: String, _ file: File) { self.description = description; self.file = file }
    }

    /// Reads a PEM (or DER) certificate, optionally followed by its intermediates, and its PEM (or DER)
    /// private key, unencrypted; fails unless the key is the certificate's.
    public init(certificate certificatePath: String, key keyPath: String) throws(LoadError) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        let certificateBytes = try Self.read(certificatePath, what: .certificate)
        let keyBytes = try Self.read(keyPath, what: .key)

        let chain: [NIOSSLCertificate]
        if Self.isPEM(certificateBytes) {
            if Self.contains(certificateBytes, "PRIVATE KEY-----"), !Self.contains(certificateBytes, "-----BEGIN CERTIFICATE-----") {
                throw LoadError("the certificate \(certificatePath) is a private key, not a certificate: are the certificate and the key swapped?", .certificate)
            }
            chain = (try? NIOSSLCertificate.fromPEMBytes(certificateBytes)) ?? []
        } else {
            chain = (try? NIOSSLCertificate(bytes: certificateBytes, format: .der)).map { [$0] } ?? []
        }
        guard !chain.isEmpty else {
            throw LoadError("the certificate \(certificatePath) holds no certificate that can be read (expected PEM, \"-----BEGIN CERTIFICATE-----\", or DER)", .certificate)
        }

        let key: NIOSSLPrivateKey
        if Self.isPEM(keyBytes) {
            if Self.contains(keyBytes, "ENCRYPTED") {
                throw LoadError("the key \(keyPath) is protected by a passphrase, which a service cannot type: write it unencrypted (openssl pkey -in \(keyPath) -out plain.key) and keep that file private", .key)
            }
            if Self.contains(keyBytes, "-----BEGIN CERTIFICATE-----"), !Self.contains(keyBytes, "PRIVATE KEY-----") {
                throw LoadError("the key \(keyPath) is a certificate, not a private key: are the certificate and the key swapped?", .key)
            }
            guard let parsed = try? NIOSSLPrivateKey(bytes: keyBytes, format: .pem) else {
                throw LoadError("the key \(keyPath) holds no private key that can be read (expected PEM, \"-----BEGIN PRIVATE KEY-----\", or DER)", .key)
            }
            key = parsed
        } else {
            guard let parsed = try? NIOSSLPrivateKey(bytes: keyBytes, format: .der) else {
                throw LoadError("the key \(keyPath) holds no private key that can be read (expected PEM, \"-----BEGIN PRIVATE KEY-----\", or DER)", .key)
            }
            key = parsed
        }

        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch NIOSSLError.failedToLoadPrivateKey {
            throw LoadError("the key \(keyPath) is not the key of the certificate \(certificatePath): give the key the certificate was made for", .key)
        } catch {
            throw LoadError("the certificate \(certificatePath) and the key \(keyPath) cannot serve HTTPS together (\(error))", .key)
        }
    }

    private static func read(_ path: String, what: LoadError.File) throws(LoadError) -> [UInt8] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw LoadError("the \(what) \(path) does not exist", what)
        }
        if isFolder.boolValue { throw LoadError("the \(what) \(path) is a folder, not a file", what) }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LoadError("the \(what) \(path) cannot be read (permission denied for this user?)", what)
        }
        if data.isEmpty { throw LoadError("the \(what) \(path) is empty", what) }
        return Array(data)
    }

    private static func isPEM(_ bytes: [UInt8]) -> Bool { contains(bytes, "-----BEGIN ") }

    private static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        String(decoding: bytes, as: UTF8.self).contains(text)
    }
}

extension WebTLSIdentity.LoadError.File: CustomStringConvertible {
    public var description: String { self == .certificate ? "certificate" : "key" }
}
