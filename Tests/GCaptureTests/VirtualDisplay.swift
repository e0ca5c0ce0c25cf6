import Foundation
import XCTest

/// A real X server with no screen (Xvfb) on a display number nobody uses, for tests of what a preview
/// draws; screenshots of its root window are read back with xwd and ffmpeg.
final class VirtualDisplay: @unchecked Sendable {
    let number: Int
    let width: Int, height: Int
    private let process: Process
    var name: String { ":\(number)" }

    /// Starts Xvfb and waits (up to `timeout`) for its socket; a missing or failing Xvfb is
    /// TestEnvironment.missing (a skip, or a failure under CI=true).
    init(width: Int = 800, height: Int = 600, timeout: TimeInterval = 10) throws {
        let executable = "/usr/bin/Xvfb"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestEnvironment.missing("Xvfb is not installed (apt install xvfb, or bash scripts/install-deps.sh)")
        }
        // A number whose lock and socket are both absent; another server may take it between the look and the
        // start (the lock file settles that race: the loser exits at once), so a few numbers are tried.
        var lastNumber = 0
        for _ in 0..<5 {
            guard let number = (90..<190).first(where: { candidate in
                candidate > lastNumber && !FileManager.default.fileExists(atPath: "/tmp/.X\(candidate)-lock")
                    && !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(candidate)")
            }) else { break }
            lastNumber = number
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = [":\(number)", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(timeout)
            while !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"), process.isRunning, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.02)
            }
            if process.isRunning, FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") {
                self.number = number
                self.width = width
                self.height = height
                self.process = process
                return
            }
            if process.isRunning { process.terminate(); process.waitUntilExit() }
        }
        throw TestEnvironment.missing("Xvfb did not start on a free display within \(timeout) s")
    }

    deinit { stop() }

    func stop() {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        // Xvfb started from the test bundle leaves its lock and socket behind (seen here: 48 of them), which
        // would use up the display numbers; they are ours to remove once our server has gone.
        let lock = "/tmp/.X\(number)-lock"
        let owner = (try? String(contentsOfFile: lock, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        if owner == String(process.processIdentifier) {
            try? FileManager.default.removeItem(atPath: lock)
            try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(number)")
        }
    }

}

extension XCTestCase {
    /// A screenshot of the display's root window, cropped to `width`x`height` at (x, y), as a PNG.
    func screenshot(_ display: VirtualDisplay, x: Int = 0, y: Int = 0, width: Int, height: Int, to url: URL) throws {
        let dump = url.deletingPathExtension().appendingPathExtension("xwd")
        defer { try? FileManager.default.removeItem(at: dump) }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/xwd") else {
            throw TestEnvironment.missing("xwd is not installed (apt install x11-apps)")
        }
        let grab = try runTool("/usr/bin/xwd", ["-root", "-silent", "-display", display.name, "-out", dump.path], timeout: 20)
        XCTAssertEqual(grab.status, 0, grab.stderr)
        let convert = try runTool("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-i", dump.path,
                                                      "-vf", "crop=\(width):\(height):\(x):\(y)", url.path], timeout: 20)
        XCTAssertEqual(convert.status, 0, convert.stderr)
    }
}
