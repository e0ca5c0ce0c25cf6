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

// The concurrency utilities (Locked, Broadcast, BlockingQueue, AtomicFlag) for every file of the engine, and
// for code above it that names them in what it builds on GCapture's types, without an import per file.
@_exported import GCaptureSupport
