import Foundation
import GStreamerKit
import GCaptureSupport
import XCTest

final class PipelineTests: XCTestCase {
    /// Set when GStreamer is initialized (v4l2_drain.c): without it, a camera unplugged while its buffers were in an
    /// encoder kept its device open for good and never came back (InterruptionDeviceTests in the VM).
    func testV4L2CamerasDrainTheirBuffersWhenStopped() {
        XCTAssertTrue(GStreamer.v4l2DrainsOnStop)
        XCTAssertNotNil(ProcessInfo.processInfo.environment["GST_V4L2_FORCE_DRAIN"])
    }

    func testStateChangesAndEndOfStreamArriveAsMessages() async throws {
        let pipeline = try Pipeline.launch("videotestsrc num-buffers=10 ! video/x-raw,width=64,height=48 ! fakesink name=sink")
        let messages = pipeline.bus.messages()
        try pipeline.setState(.playing)
        let path = pipeline.path
        // Cancelled at its deadline: a bus that goes quiet ends the loop instead of hanging the test.
        let reader = Task {
            var reachedPlaying = false, sawEndOfStream = false
            for await message in messages {
                switch message.kind {
                case .stateChanged(_, let new, _) where message.sourcePath == path && new == .playing:
                    reachedPlaying = true
                case .endOfStream:
                    sawEndOfStream = true
                default: break
                }
                if sawEndOfStream { break }
            }
            return (reachedPlaying, sawEndOfStream)
        }
        let deadline = Task { try await Task.sleep(for: .seconds(5)); reader.cancel() }
        let (reachedPlaying, sawEndOfStream) = await reader.value
        deadline.cancel()
        pipeline.shutDown()
        XCTAssertTrue(reachedPlaying)
        XCTAssertTrue(sawEndOfStream)
        XCTAssertEqual(pipeline.state().current, .null)
    }

    /// A handler is given only the kinds it asked for: a session's start posts a state change per element on
    /// the thread that starts it, and each one decoded in Swift was time before the first frame.
    func testAHandlerIsGivenOnlyTheKindsOfMessageItAskedFor() throws {
        let pipeline = try Pipeline.launch("videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48 ! fakesink")
        let kinds = Locked<[String]>([])
        pipeline.bus.setHandler(for: [.endOfStream]) { message in
            kinds.withLock { $0.append("\(message.kind)") }
        }
        try pipeline.setState(.playing)
        let deadline = Date().addingTimeInterval(5)
        while kinds.withLock({ $0.isEmpty }), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        pipeline.shutDown()
        XCTAssertEqual(kinds.withLock { $0 }, ["endOfStream"], "state changes, stream-start and the rest are not asked for")

        let everything = try Pipeline.launch("videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48 ! fakesink")
        let madeReady = Locked(0)
        everything.bus.setHandler { message in
            if case .stateChanged(.null, .ready, _) = message.kind { madeReady.withLock { $0 += 1 } }
        }
        // Going to READY is synchronous: every element has posted it when setState returns.
        try everything.setState(.ready)
        everything.shutDown()
        XCTAssertEqual(madeReady.withLock { $0 }, 4, "the source, the caps filter, the sink and the pipeline each went NULL → READY")
    }

    func testErrorsCarryDomainCodeDebugAndSource() async throws {
        let pipeline = try Pipeline.launch("filesrc name=reader location=/nonexistent/gcapture-file ! fakesink")
        let messages = pipeline.bus.messages()
        XCTAssertThrowsError(try pipeline.setState(.playing))
        let reader = Task { () -> GStreamerError? in
            for await message in messages {
                if case .error(let value) = message.kind { return value }
            }
            return nil
        }
        let deadline = Task { try await Task.sleep(for: .seconds(5)); reader.cancel() }
        let error = await reader.value
        deadline.cancel()
        pipeline.shutDown()
        let reported = try XCTUnwrap(error)
        XCTAssertEqual(reported.domain, "gst-resource-error-quark")
        XCTAssertEqual(reported.resourceCode, .notFound)
        XCTAssertTrue(reported.sourcePath?.hasSuffix("reader") ?? false, "\(reported.sourcePath ?? "nil")")
        XCTAssertTrue(reported.debug?.contains("/nonexistent/gcapture-file") ?? false, reported.debug ?? "no debug")
    }

    func testUnknownElementsAndBadDescriptionsAreErrors() {
        XCTAssertThrowsError(try Element.make("no-such-element-gcapture")) { error in
            XCTAssertEqual((error as? GStreamerError)?.kind, .missingElement)
        }
        XCTAssertThrowsError(try Bin.parse("videotestsrc ! no-such-element-gcapture")) { error in
            XCTAssertEqual((error as? GStreamerError)?.kind, .parse)
        }
        XCTAssertThrowsError(try Element.make("queue").set("no-such-property", 1)) { error in
            XCTAssertEqual((error as? GStreamerError)?.kind, .property)
        }
    }

    func testPropertiesRoundTrip() throws {
        let queue = try Element.make("queue", name: "q")
        try queue.set("max-size-buffers", 7)
        try queue.set("leaky", "downstream")
        XCTAssertEqual(queue.intProperty("max-size-buffers"), 7)
        XCTAssertEqual(queue.property("leaky"), "downstream")
        XCTAssertEqual(queue.name, "q")
        XCTAssertEqual(queue.factoryName, "queue")
    }

    func testPropertyValuesThatDoNotParseAreErrorsNamingElementPropertyAndValue() throws {
        let encoder = try Element.make("x264enc", name: "enc")
        XCTAssertThrowsError(try encoder.set("speed-preset", "nonsense")) { error in
            XCTAssertEqual((error as? GStreamerError)?.kind, .property)
            let text = "\(error)"
            for part in ["x264enc 'enc'", "speed-preset", "'nonsense'", "ultrafast"] {
                XCTAssertTrue(text.contains(part), "\(part) missing from: \(text)")
            }
        }
        XCTAssertThrowsError(try encoder.set("bitrate", "abc")) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("bitrate") && text.contains("'abc'") && text.contains("x264enc"), text)
        }
        XCTAssertThrowsError(try encoder.set("bitrate", 0), "below the property's range (1 - 2048000)") { error in
            XCTAssertTrue("\(error)".contains("out of range"), "\(error)")
        }
        XCTAssertThrowsError(try encoder.set("no-such-property", 1)) { error in
            XCTAssertTrue("\(error)".contains("x264enc 'enc' has no property 'no-such-property'"), "\(error)")
        }
        // Nothing was changed by the failed calls; valid values set and read back.
        XCTAssertEqual(encoder.property("speed-preset"), "medium")
        XCTAssertEqual(encoder.intProperty("bitrate"), 2048)
        try encoder.set("speed-preset", "ultrafast")
        try encoder.set("bitrate", 4000)
        XCTAssertEqual(encoder.property("speed-preset"), "ultrafast")
        XCTAssertEqual(encoder.intProperty("bitrate"), 4000)
        let sink = try Element.make("filesink")
        try sink.set("location", "/tmp/a \"quoted\" NULL")
        XCTAssertEqual(sink.stringProperty("location"), "/tmp/a \"quoted\" NULL", "a string is taken literally")
    }

    func testSamplesAreMappedWithoutCopying() throws {
        let pipeline = try Pipeline.launch("videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=320,height=240 ! appsink name=sink")
        let sink = try XCTUnwrap(pipeline.element(named: "sink").flatMap(AppSink.init))
        try pipeline.setState(.playing)
        defer { pipeline.shutDown() }
        let sample = try XCTUnwrap(sink.pullSample(timeout: 5 * .second))
        XCTAssertEqual(sample.videoInfo?.format, "NV12")
        XCTAssertEqual(sample.byteCount, 320 * 240 * 3 / 2)
        let base = sample.withBytes { $0.baseAddress }
        let planes = try XCTUnwrap(sample.withVideoPlanes { planes in planes.map { ($0.bytes.baseAddress, $0.stride, $0.height) } })
        XCTAssertEqual(planes.count, 2)
        // The planes point into the buffer's own memory: no copy was made.
        XCTAssertEqual(planes[0].0, base!)
        XCTAssertEqual(planes[1].0, base!.map { $0 + 320 * 240 })
        XCTAssertEqual(planes[1].2, 120)
    }

    /// An element put in behind a queue takes the frames from the next one on, whether the pipeline is stopped
    /// (put in at once) or frames flow (between two of them): a videoflip turning 64x48 into 48x64. One that
    /// would not take the format already flowing is not put in, and the frames go on as they were.
    func testAnElementPutInBehindAQueueTakesTheNextFrames() throws {
        for (format, whilePlaying, expected) in [("I420", false, "48x64"), ("I420", true, "48x64"), ("RGB16", true, nil)] {
            let label = "\(format), put in \(whilePlaying ? "while playing" : "before")"
            let pipeline = try Pipeline.launch("videotestsrc is-live=true ! video/x-raw,format=\(format),width=64,height=48,framerate=30/1 "
                + "! queue name=entrance ! appsink name=sink sync=false async=false max-buffers=1")
            defer { pipeline.shutDown() }
            let sizes = Locked<[String]>([])
            let sink = try XCTUnwrap(pipeline.element(named: "sink").flatMap(AppSink.init))
            sink.setSampleHandler { sample in
                if let info = sample.videoInfo { sizes.withLock { $0.append("\(info.width)x\(info.height)") } }
            }
            let flip = try Element.make("videoflip", name: "flip")
            try flip.set("video-direction", "90r")
            let inserted = Locked<Bool?>(nil)
            func waitFor(_ what: String, _ done: () -> Bool) {
                let deadline = Date().addingTimeInterval(5)
                while !done(), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
                XCTAssertTrue(done(), "\(label): \(what); frames seen: \(sizes.withLock { $0.count }), last \(sizes.withLock { $0.last ?? "none" })")
            }
            if whilePlaying {
                try pipeline.setState(.playing)
                waitFor("unturned frames") { sizes.withLock { $0.contains("64x48") } }
            }
            pipeline.insert(flip, after: try XCTUnwrap(pipeline.element(named: "entrance"))) { ok in inserted.withLock { $0 = ok } }
            if !whilePlaying { try pipeline.setState(.playing) }
            waitFor("an answer") { inserted.withLock { $0 } != nil }
            XCTAssertEqual(inserted.withLock { $0 }, expected != nil, label)
            if let expected {
                waitFor("turned frames") { sizes.withLock { $0.contains(expected) } }
                // Once turned, every later frame is.
                let seen = sizes.withLock { $0 }
                XCTAssertFalse(seen.drop { $0 != expected }.contains("64x48"), "\(label): \(seen)")
                XCTAssertNotNil(pipeline.element(named: "flip"), label)
            } else {
                let before = sizes.withLock { $0.count }
                waitFor("frames going on") { sizes.withLock { $0.count } >= before + 5 }
                XCTAssertEqual(Set(sizes.withLock { $0 }), ["64x48"], label)
                XCTAssertNil(pipeline.element(named: "flip"), label)
            }
        }
    }
}
