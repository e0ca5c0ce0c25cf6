import Foundation
import XCTest

/// A test certificate authority and a server certificate it signed for 127.0.0.1 and localhost, made with
/// `openssl` (not our code) in a temporary folder; and a second, unrelated authority with its own server
/// certificate, which nobody trusts.
struct TestCertificates {
    let folder: URL
    var authority: URL { folder.appendingPathComponent("ca.pem") }
    var certificate: URL { folder.appendingPathComponent("server.pem") }
    var key: URL { folder.appendingPathComponent("server.key") }
    /// A certificate and key for 127.0.0.1 from the other authority.
    var strangerCertificate: URL { folder.appendingPathComponent("stranger.pem") }
    var strangerKey: URL { folder.appendingPathComponent("stranger.key") }

    init(test: XCTestCase) throws {
        for tool in ["/usr/bin/openssl", "/usr/bin/curl"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw TestEnvironment.missing("\(tool) is not installed (apt install openssl curl, or bash scripts/install-deps.sh)")
        }
        folder = try test.temporaryFolder()
        let serverExtensions = folder.appendingPathComponent("server.ext")
        try """
            subjectAltName=IP:127.0.0.1,DNS:localhost
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth
            """.write(to: serverExtensions, atomically: true, encoding: .utf8)
        for (authority, server) in [("ca", "server"), ("stranger-ca", "stranger")] {
            try openssl(test, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                               "-keyout", "\(authority).key", "-out", "\(authority).pem", "-days", "2",
                               "-subj", "/CN=gcapture test authority \(authority)",
                               "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            try openssl(test, ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                               "-keyout", "\(server).key", "-out", "\(server).csr", "-subj", "/CN=localhost"])
            try openssl(test, ["x509", "-req", "-in", "\(server).csr", "-CA", "\(authority).pem", "-CAkey", "\(authority).key",
                               "-CAcreateserial", "-out", "\(server).pem", "-days", "2", "-extfile", serverExtensions.path])
        }
    }

    private func openssl(_ test: XCTestCase, _ arguments: [String]) throws {
        let run = try test.runTool("/usr/bin/openssl", arguments, currentDirectory: folder, timeout: 30)
        guard run.status == 0 else { throw CheckFailed(description: "openssl \(arguments.joined(separator: " ")): \(run.stderr)") }
    }
}

extension XCTestCase {
    /// curl (not our code) against the page over HTTPS: its exit status, the body and the status code
    /// (the last line, from -w), its complaints.
    func curl(_ url: String, authority: URL?, _ extra: [String] = []) throws -> (status: Int32, body: String, code: Int, stderr: String) {
        let run = try runTool("/usr/bin/curl", ["--silent", "--show-error", "--max-time", "20", "--write-out", "\n%{http_code}"]
                              + (authority.map { ["--cacert", $0.path] } ?? []) + extra + [url], timeout: 30)
        let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (run.status, lines.dropLast().joined(separator: "\n"), Int(lines.last ?? "") ?? 0, run.stderr)
    }
}

/// `gcapture serve --tls-cert FILE --tls-key FILE`: the page over HTTPS, checked by curl against a test
/// authority; what a client that does not trust it, or does not speak TLS, gets; the start-up errors.
final class ServeTLSTests: XCTestCase {
    func startServe(_ extra: [String], listen: String = "127.0.0.1:0") throws -> (LaunchedCommand, Int) {
        let serve = try launch("gcapture", ["serve", "--listen", listen, "--camera", "test", "--microphone", "none",
                                            "--output", try temporaryFolder().path, "--json", "--live-size", "320x240"] + extra)
        guard serve.waitForEvent("listening", timeout: 30), let port = serve.events("listening").first?["port"] as? Int else {
            throw CheckFailed(description: "gcapture serve did not start listening: \(serve.errorOutput)")
        }
        return (serve, port)
    }

    func testTheAPIAndTheCommandsWorkOverHTTPSForAClientThatTrustsTheAuthority() throws {
        let certificates = try TestCertificates(test: self)
        let token = "correct-horse-battery"
        let (serve, port) = try startServe(["--tls-cert", certificates.certificate.path, "--tls-key", certificates.key.path,
                                            "--token", token])
        XCTAssertEqual(serve.events("listening").first?["url"] as? String, "https://127.0.0.1:\(port)/")
        let base = "https://127.0.0.1:\(port)"
        let bearer = ["--header", "Authorization: Bearer \(token)"]

        let status = try curl("\(base)/api/status", authority: certificates.authority, bearer)
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertEqual(status.code, 200, status.body)
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any], status.body)
        XCTAssertEqual(try curl("https://localhost:\(port)/api/status", authority: certificates.authority, bearer).code, 200,
                       "the certificate's DNS name")

        let photo = try curl("\(base)/api/command", authority: certificates.authority,
                             bearer + ["--header", "Content-Type: application/json", "--data", #"{"command": "photo"}"#])
        XCTAssertEqual(photo.code, 200, photo.body + photo.stderr)
        let path = try XCTUnwrap((try? JSONSerialization.jsonObject(with: Data(photo.body.utf8)) as? [String: Any])?["path"] as? String,
                                 photo.body)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), path)

        // The printed link logs in with a cookie the browser keeps to HTTPS.
        let link = try curl("\(base)/?token=\(token)", authority: certificates.authority, ["--include"])
        XCTAssertEqual(link.code, 303, link.body)
        let setCookie = link.body.split(separator: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") } ?? ""
        XCTAssertTrue(setCookie.contains("HttpOnly") && setCookie.hasSuffix("; Secure"), String(setCookie))

        // A client that does not trust the authority stops at the certificate.
        let untrusting = try curl("\(base)/api/status", authority: nil, bearer)
        XCTAssertEqual(untrusting.status, 60, "curl's 'peer certificate cannot be authenticated': \(untrusting.stderr)")
        XCTAssertEqual(untrusting.code, 0)

        // Plain HTTP to the TLS port gets no HTTP answer, and the connection is closed at once. More of them
        // than the server admits at a time (32): each slot is freed, the page still answers.
        for attempt in 0..<40 {
            let plain = try HTTPTestConnection(port: port)
            plain.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\n\r\n")
            let started = Date()
            let answer = plain.read(for: 10)
            XCTAssertLessThan(Date().timeIntervalSince(started), 9, "attempt \(attempt): the connection stayed open")
            XCTAssertFalse(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/"), "attempt \(attempt): a plain HTTP answer")
        }
        XCTAssertEqual(try curl("\(base)/api/status", authority: certificates.authority, bearer).code, 200)
        XCTAssertTrue(serve.process.isRunning, serve.errorOutput)
        XCTAssertFalse(serve.errorOutput.contains("plain HTTP"), "no warning on loopback: \(serve.errorOutput)")
        XCTAssertEqual(serve.events("runtimeError").count, 0, serve.output)
    }

    func testACertificateOrKeyThatCannotServeStopsTheStartAndNamesTheFile() throws {
        let certificates = try TestCertificates(test: self)
        let garbage = certificates.folder.appendingPathComponent("garbage.pem")
        try "not a certificate\n".write(to: garbage, atomically: true, encoding: .utf8)
        let missing = certificates.folder.appendingPathComponent("missing.pem").path
        let cases: [(arguments: [String], says: [String])] = [
            (["--tls-cert", missing, "--tls-key", certificates.key.path], [missing, "does not exist"]),
            (["--tls-cert", certificates.certificate.path, "--tls-key", certificates.strangerKey.path],
             [certificates.strangerKey.path, "is not the key of the certificate", certificates.certificate.path]),
            (["--tls-cert", garbage.path, "--tls-key", certificates.key.path], [garbage.path, "holds no certificate"]),
            (["--tls-cert", certificates.key.path, "--tls-key", certificates.certificate.path], [certificates.key.path, "is a private key"]),
            (["--tls-cert", certificates.folder.path, "--tls-key", certificates.key.path], [certificates.folder.path, "is a folder"]),
            (["--tls-cert", certificates.certificate.path], ["--tls-cert needs --tls-key"]),
        ]
        for (arguments, says) in cases {
            let run = try runGCapture(["serve", "--listen", "127.0.0.1:0", "--camera", "test", "--microphone", "none", "--json",
                                       "--output", try temporaryFolder().path] + arguments, timeout: 20)
            XCTAssertEqual(run.status, 64, "\(arguments): \(run.stderr)")
            for part in says { XCTAssertTrue(run.stderr.contains(part), "\(arguments): expected \"\(part)\" in: \(run.stderr)") }
            XCTAssertFalse(run.stderr.contains("NIOSSL") || run.stderr.contains("BoringSSL"), run.stderr)
            XCTAssertFalse(run.stdout.contains("\"started\""), "the camera was opened: \(run.stdout)")
        }
        let lone = try runGCapture(["run", "--camera", "test", "--tls-cert", certificates.certificate.path,
                                    "--tls-key", certificates.key.path], timeout: 10)
        XCTAssertEqual(lone.status, 64)
        XCTAssertTrue(lone.stderr.contains("--http"), lone.stderr)
    }

    func testOffLoopbackPlainHTTPWarnsOnceAndHTTPSDoesNot() throws {
        let (plain, plainPort) = try startServe(["--token", "abcdefgh12"], listen: "0.0.0.0:0")
        XCTAssertEqual(try http(plainPort, "GET", "/api/status", headers: ["Authorization": "Bearer abcdefgh12"]).status, 200)
        XCTAssertEqual(try command(plainPort, #"{"command": "photo"}"#, headers: ["Authorization": "Bearer abcdefgh12"]).status, 200)
        XCTAssertEqual(plain.errorOutput.components(separatedBy: "over plain HTTP").count - 1, 1, plain.errorOutput)
        XCTAssertTrue(plain.errorOutput.contains("--tls-cert FILE --tls-key FILE"), plain.errorOutput)

        let certificates = try TestCertificates(test: self)
        let (secure, securePort) = try startServe(["--token", "abcdefgh12", "--tls-cert", certificates.certificate.path,
                                                   "--tls-key", certificates.key.path], listen: "0.0.0.0:0")
        XCTAssertTrue((secure.events("listening").first?["url"] as? String ?? "").hasPrefix("https://"), secure.output)
        XCTAssertEqual(try curl("https://127.0.0.1:\(securePort)/api/status", authority: certificates.authority,
                                ["--header", "Authorization: Bearer abcdefgh12"]).code, 200)
        XCTAssertFalse(secure.errorOutput.contains("plain HTTP"), secure.errorOutput)
    }

    /// `gcapture run FILE --http ADDR:PORT` takes the same two options, and a description file its own
    /// `web: {tls-cert, tls-key}` (relative to its folder), whose mistakes are reported at their line.
    func testADescribedSetUpServesItsPageOverHTTPS() throws {
        let certificates = try TestCertificates(test: self)
        let photos = try temporaryFolder().path
        func describe(_ name: String, web: String) throws -> URL {
            let description = certificates.folder.appendingPathComponent(name)
            try """
                version: 1
                camera:
                  id: test
                  preset: vga640x480
                microphone: none
                outputs:
                  photo:
                    folder: \(photos)
                \(web)
                """.write(to: description, atomically: true, encoding: .utf8)
            return description
        }
        let plain = try describe("plain.yaml", web: "")
        let run = try launch("gcapture", ["run", plain.path, "--http", "127.0.0.1:0", "--json", "--live-size", "320x240",
                                          "--tls-cert", certificates.certificate.path, "--tls-key", certificates.key.path])
        XCTAssertTrue(run.waitForEvent("listening", timeout: 30), run.errorOutput)
        let port = try XCTUnwrap(run.events("listening").first?["port"] as? Int)
        XCTAssertEqual(run.events("listening").first?["url"] as? String, "https://127.0.0.1:\(port)/")
        let status = try curl("https://127.0.0.1:\(port)/api/status", authority: certificates.authority)
        XCTAssertEqual(status.code, 200, status.body + status.stderr)

        let secured = try describe("secured.yaml", web: "web:\n  tls-cert: server.pem\n  tls-key: server.key")
        let described = try launch("gcapture", ["run", secured.path, "--http", "127.0.0.1:0", "--json", "--live-size", "320x240"])
        XCTAssertTrue(described.waitForEvent("listening", timeout: 30), described.errorOutput)
        let describedPort = try XCTUnwrap(described.events("listening").first?["port"] as? Int)
        XCTAssertEqual(described.events("listening").first?["url"] as? String, "https://127.0.0.1:\(describedPort)/")
        XCTAssertEqual(try curl("https://127.0.0.1:\(describedPort)/api/status", authority: certificates.authority).code, 200)

        // Line 10 is `  tls-cert: …`, line 11 `  tls-key: …`; the value starts in column 13.
        let missing = try describe("missing.yaml", web: "web:\n  tls-cert: server.pem\n  tls-key: nowhere.key")
        let inspected = try runGCapture(["inspect", missing.path], timeout: 20)
        XCTAssertEqual(inspected.status, 1)
        XCTAssertTrue(inspected.stderr.contains("\(missing.path):11:12: error: web.tls-key 'nowhere.key' does not exist"), inspected.stderr)
        let halfPair = try describe("half.yaml", web: "web:\n  tls-cert: server.pem")
        let half = try runGCapture(["inspect", halfPair.path], timeout: 20)
        XCTAssertTrue(half.stderr.contains("\(halfPair.path):10:3: error: web.tls-cert needs web.tls-key"), half.stderr)
        let mismatched = try describe("mismatched.yaml", web: "web:\n  tls-cert: server.pem\n  tls-key: stranger.key")
        let refused = try runGCapture(["run", mismatched.path, "--http", "127.0.0.1:0", "--json"], timeout: 20)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("\(mismatched.path):11:12: error: web.tls-key: the key \(certificates.strangerKey.path) is not the key of the certificate"),
                      refused.stderr)
        XCTAssertFalse(refused.stdout.contains("\"started\""), "the camera was opened: \(refused.stdout)")
    }
}
