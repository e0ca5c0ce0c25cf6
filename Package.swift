// swift-tools-version:6.0
import PackageDescription

// Layers, each depending only on the ones above it in this list:
//   GCaptureSupport (locks, broadcasts, blocking queues: generic concurrency, no GStreamer) →
//   CGst (system library) → CGstShim (C macros/variadics) → GStreamerKit (safe Swift over GStreamer,
//   knows nothing about cameras) → GCapture (the capture engine) → GCaptureDescription (YAML description
//   files) → GCaptureControl (the control commands of `run`/`serve`, typed, and the controller that carries
//   them out) → GCaptureWeb (the operator's web page, on SwiftNIO) → gcapture CLI, benchmark, examples.
//   GCapturePhotos (the media library: PhotoKit's shape over a folder and a SQLite index) sits beside
//   GCaptureDescription, on GCapture. CImaging holds the engine's pixel loops (plain C, no GStreamer); CProcessHeap tunes glibc's heap;
//   CDeviceServices reads the accelerometer service and V4L2 controls for the engine.
let package = Package(
    name: "gcapture",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "GCapture", targets: ["GCapture"]),
        .library(name: "GCaptureWeb", targets: ["GCaptureWeb"]),
        .library(name: "GStreamerKit", targets: ["GStreamerKit"]),
        .library(name: "GCaptureSupport", targets: ["GCaptureSupport"]),
        .library(name: "GCaptureDescription", targets: ["GCaptureDescription"]),
        .library(name: "GCapturePhotos", targets: ["GCapturePhotos"]),
        .library(name: "GCaptureControl", targets: ["GCaptureControl"]),
        .executable(name: "gcapture", targets: ["GCaptureCLI"]),
        .executable(name: "gcapture-bench", targets: ["GCaptureBenchmark"]),
        .executable(name: "frame-counter", targets: ["FrameCounter"]),
        .executable(name: "photo-booth", targets: ["PhotoBooth"]),
        .executable(name: "recorder", targets: ["Recorder"]),
        .executable(name: "motion-detector", targets: ["MotionDetector"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // HTTPS for the operator's web page (`--tls-cert`/`--tls-key`); GCaptureWeb only.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // `swift package generate-documentation --target GCapture` (scripts/build-docs.sh): the DocC catalog.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The photo library's index (GCapturePhotos only): SQLite, through the system's libsqlite3.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CGst",
            pkgConfig: "gstreamer-1.0 gstreamer-app-1.0 gstreamer-video-1.0 gstreamer-pbutils-1.0 gstreamer-tag-1.0 gstreamer-webrtc-1.0 gstreamer-sdp-1.0 gio-2.0",
            providers: [.apt(["libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev", "libgstreamer-plugins-bad1.0-dev"])]
        ),
        // The concurrency utilities every layer shares; at the bottom, so the layers above the engine get them
        // without importing GStreamerKit.
        .target(name: "GCaptureSupport"),
        .target(name: "CGstShim", dependencies: ["CGst"]),
        // System services the engine reads and Swift cannot call by itself (GDBus for iio-sensor-proxy, the
        // V4L2 control ioctl); no GStreamer.
        .target(name: "CDeviceServices", dependencies: ["CGst"]),
        .target(name: "GStreamerKit", dependencies: ["GCaptureSupport", "CGst", "CGstShim", .product(name: "Logging", package: "swift-log")]),
        .target(name: "CImaging", linkerSettings: [.linkedLibrary("jpeg")]),
        // glibc's heap limited to two arenas when the program loads (see heap.c).
        .target(name: "CProcessHeap"),
        .target(name: "GCapture", dependencies: ["GCaptureSupport", "GStreamerKit", "CImaging", "CProcessHeap", "CDeviceServices",
                                                 .product(name: "Logging", package: "swift-log")]),
        // The media library (PhotoKit's shape): assets and albums of a folder, indexed in SQLite. Knows the
        // engine's imaging (thumbnails, movie posters), not sessions.
        .target(name: "GCapturePhotos", dependencies: ["GCapture", "GCaptureSupport",
                                                       .product(name: "GRDB", package: "GRDB.swift"),
                                                       .product(name: "Logging", package: "swift-log")]),
        // Description files (YAML): read, checked with positions, and built into a session.
        .target(name: "GCaptureDescription", dependencies: ["GCapture", "GCaptureSupport", .product(name: "Yams", package: "Yams")]),
        // The control protocol of `gcapture run` (stdin lines, the web page's commands): typed requests,
        // replies and events, and the controller that carries them out on a running session. No terminal, no HTTP.
        .target(name: "GCaptureControl", dependencies: ["GCapture", "GCaptureDescription", "GCapturePhotos", "GCaptureSupport"]),
        // The operator's web page (`gcapture serve`, `gcapture run --http`): live view, controls, events, gallery.
        // Knows the engine and the control commands, not the CLI: they are carried out through its OperatorConsole.
        .target(name: "GCaptureWeb", dependencies: ["GCapture", "GCaptureControl", "GCapturePhotos", "GCaptureSupport",
                                                    .product(name: "NIOCore", package: "swift-nio"),
                                                    .product(name: "NIOPosix", package: "swift-nio"),
                                                    .product(name: "NIOHTTP1", package: "swift-nio"),
                                                    .product(name: "NIOSSL", package: "swift-nio-ssl")]),
        .executableTarget(
            name: "GCaptureCLI",
            dependencies: ["GCapture", "GCaptureDescription", "GCaptureControl", "GCaptureWeb", "GCapturePhotos", "GCaptureSupport", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(name: "GCaptureBenchmark", dependencies: ["GCapture", "GCapturePhotos", "GStreamerKit"],
                          path: "Benchmarks/GCaptureBenchmark"),
        .executableTarget(name: "FrameCounter", dependencies: ["GCapture"], path: "Examples/FrameCounter"),
        // The examples (issue 15), each on GCapture alone, in AVFoundation's shape; run by ExampleTests.
        .executableTarget(name: "PhotoBooth", dependencies: ["GCapture"], path: "Examples/PhotoBooth"),
        .executableTarget(name: "Recorder", dependencies: ["GCapture"], path: "Examples/Recorder"),
        .executableTarget(name: "MotionDetector", dependencies: ["GCapture"], path: "Examples/MotionDetector"),
        .testTarget(name: "GStreamerKitTests", dependencies: ["GStreamerKit", "GCaptureSupport"]),
        .testTarget(name: "GCaptureTests", dependencies: ["GCapture", "GCapturePhotos", "GCaptureDescription", "GCaptureControl", "GCaptureWeb", "GCaptureSupport", "GStreamerKit", .product(name: "Logging", package: "swift-log")],
                    // Description files the tests read from the source tree (#filePath), not resources.
                    exclude: ["Descriptions", "Browser"]),
        // The seed documents' AVFoundation and PhotoKit code ported by renaming; GCapture and GCapturePhotos
        // alone, in the seeds' Swift 5.
        .testTarget(name: "SeedPortTests", dependencies: ["GCapture", "GCapturePhotos"], swiftSettings: [.swiftLanguageMode(.v5)]),
    ]
)
