// A minimal program on the GCapture library: the default camera, 720p, frames to a delegate for two
// seconds, then a count. Run: swift run frame-counter
// On a machine without a camera: GCAPTURE_TEST_DEVICES=1 swift run frame-counter (the built-in test camera
// is the default only when announced so; a program that meant to use it names it: CaptureDevice.testCamera).
import Dispatch
import Foundation
import GCapture
import Synchronization

final class FrameCounter: CaptureVideoDataOutputSampleBufferDelegate {
    let frames = Atomic<Int>(0)

    func captureOutput(_ output: CaptureOutput, didOutput sampleBuffer: SampleBuffer, from connection: CaptureConnection) {
        let count = frames.add(1, ordering: .relaxed).newValue
        if count % 30 == 1 {
            print("frame \(count): \(sampleBuffer.width)x\(sampleBuffer.height) \(sampleBuffer.pixelFormat) "
                  + "at \(sampleBuffer.presentationTime) s")
        }
    }
}

guard let camera = CaptureDevice.default(.builtInWideAngleCamera, for: .video, position: .unspecified)
    ?? CaptureDevice.default(for: .video) else {
    let reason = CaptureDevice.discoveryError.map { "\($0)" } ?? "no camera found"
    FileHandle.standardError.write(Data("\(reason); run with GCAPTURE_TEST_DEVICES=1 for the built-in test camera\n".utf8))
    exit(1)
}
let session = CaptureSession()
let output = CaptureVideoDataOutput()
let counter = FrameCounter()
output.setSampleBufferDelegate(counter, queue: DispatchQueue(label: "frames"))

session.beginConfiguration()
try session.add(CaptureDeviceInput(device: camera))
try session.add(output)
if session.canSetSessionPreset(.hd1280x720) { session.sessionPreset = .hd1280x720 }
try session.commitAndWait()

try await session.start()
try await Task.sleep(for: .seconds(2))
await session.stop()
print("\(counter.frames.load(ordering: .relaxed)) frames from \(camera.localizedName)")
