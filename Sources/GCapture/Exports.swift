// The GStreamerKit types GCapture's public API hands out (a frame's VideoInfo and its Fraction frame rate,
// the planes SampleBuffer.withPlanes maps, the GStreamerError under a CaptureError), re-exported one by
// one so that `import GCapture` alone compiles code that names them, without making the rest of
// GStreamerKit (pipelines, elements, pads) part of GCapture's API. They are the same types, not copies:
// a file importing both modules sees one declaration. (Listed from GCapture's symbol graph: a public
// signature that starts using another GStreamerKit type needs it added here.)
@_exported import struct GStreamerKit.Fraction
@_exported import struct GStreamerKit.GStreamerError
@_exported import struct GStreamerKit.VideoInfo
@_exported import struct GStreamerKit.VideoPlane

// GCaptureSupport re-exported whole: every part of the engine shares its locks and broadcasts (no file needs
// an import of its own), and code on GCapture alone (tests, benchmarks) keeps the Locked it had when it came
// from GStreamerKit.
@_exported import GCaptureSupport
