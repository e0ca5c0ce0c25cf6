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
        try await session.start()
        let deadline = Date().addingTimeInterval(10)
        while processor.lumaMeans.count < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        await session.stop()
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
