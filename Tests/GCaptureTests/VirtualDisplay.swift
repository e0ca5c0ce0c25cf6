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
        // A number whose lock and socket are both absent; the lock file settles a race with another server.
        let number = (90..<190).first { candidate in
            !FileManager.default.fileExists(atPath: "/tmp/.X\(candidate)-lock")
                && !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(candidate)")
        } ?? 190
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [":\(number)", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.number = number
        self.width = width
        self.height = height
        self.process = process
        let deadline = Date().addingTimeInterval(timeout)
        while !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)"), process.isRunning, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        guard process.isRunning, FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") else {
            stop()
            throw TestEnvironment.missing("Xvfb did not start on :\(number) within \(timeout) s")
        }
    }

    deinit { stop() }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
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
