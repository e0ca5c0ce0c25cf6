import Foundation
import GCapture
import XCTest

/// An AVCaptureVideoDataOutputSampleBufferDelegate in its usual shape, renamed (CMSampleBuffer becomes
/// SampleBuffer, whose planes are read in place). It names the frame types GCapture's API hands out, so
/// it compiles only if `import GCapture` alone makes them visible.
final class FrameProcessor: NSObject, CaptureVideoDataOutputSampleBufferDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _lumaMeans: [Double] = []
    private var _formats: [VideoInfo] = []
    var lumaMeans: [Double] { lock.withLock { _lumaMeans } }
    var formats: [VideoInfo] { lock.withLock { _formats } }

    func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
        let info: VideoInfo = sampleBuffer.videoInfo
        let rate: Fraction = info.frameRate
        guard rate.numerator > 0 else { return }
        let mean = sampleBuffer.withPlanes { (planes: [VideoPlane]) -> Double in
            let luma = planes[0]
            var sum = 0
            for row in 0..<luma.height {
                for column in 0..<luma.rowBytes { sum += Int(luma.bytes[row * luma.stride + column]) }
            }
            return Double(sum) / Double(luma.height * luma.rowBytes)
        }
        lock.withLock {
            _formats.append(info)
            if let mean { _lumaMeans.append(mean) }
        }
    }

    func captureOutput(_ output: CaptureOutput, didDrop sampleBuffer: SampleBuffer, from connection: CaptureConnection) {}
}

final class FrameProcessorTests: XCTestCase {
    func testFramesReachAVFoundationShapedDelegate() async throws {
        let white = CaptureDevice.makeTestCamera(uniqueID: "test-white", options: .init(pattern: .white, sizes: [.init(width: 320, height: 240)]))
        let session = CaptureSession()
        let output = CaptureVideoDataOutput()
        let processor = FrameProcessor()
        output.setSampleBufferDelegate(processor, queue: DispatchQueue(label: "video data"))
        session.beginConfiguration()
        try session.add(CaptureDeviceInput(device: white))
        try session.add(output)
        try session.commitAndWait()
        try await within(30, "session.start()") { try await session.start() }
        let deadline = Date().addingTimeInterval(10)
        while processor.lumaMeans.count < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try await within(30, "session.stop()") { await session.stop() }
        XCTAssertGreaterThanOrEqual(processor.lumaMeans.count, 3)
        // White in limited-range video: luma 235.
        XCTAssertTrue(processor.lumaMeans.allSatisfy { abs($0 - 235) < 2 }, "\(processor.lumaMeans)")
        XCTAssertEqual(processor.formats.first?.width, 320)
    }

    func testAnEngineErrorCarriesGStreamersReportUnderItsOwnName() {
        // What a program that only imports GCapture can read from an underlying failure.
        let failure: CaptureError = .deviceFailed(device: "Test Camera [test]",
                                                  underlying: GStreamerError(kind: .gError, message: "Device is busy"))
        guard case .deviceFailed(_, let underlying) = failure else { return XCTFail() }
        let report: GStreamerError = underlying
        XCTAssertEqual(report.kind, GStreamerError.Kind.gError)
        XCTAssertEqual("\(failure)", "Test Camera [test] failed: Device is busy")
    }
}

/// GCaptureTests' within(), for this target's tests (which cannot see that one's Support.swift): the operation's
/// result, or a failure when it has not finished within `seconds`. Not a task group, which would wait for an
/// operation that ignores cancellation: a hung engine call is left behind, and fails its test only.
func within<T: Sendable>(_ seconds: Double, _ what: String,
                         _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let once = Once<T>()
    return try await withCheckedThrowingContinuation { continuation in
        once.continuation = continuation
        let work = Task { do { once.resume(.success(try await operation())) } catch { once.resume(.failure(error)) } }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            once.resume(.failure(DeadlineExceeded(description: "\(what) did not finish within \(seconds) s")))
            work.cancel()
        }
    }
}

private final class Once<T: Sendable>: @unchecked Sendable {
    let lock = NSLock()
    var continuation: CheckedContinuation<T, any Error>?
    func resume(_ result: Result<T, any Error>) {
        lock.withLock { () -> CheckedContinuation<T, any Error>? in defer { continuation = nil }; return continuation }?
            .resume(with: result)
    }
}

private struct DeadlineExceeded: Error, CustomStringConvertible { let description: String }
