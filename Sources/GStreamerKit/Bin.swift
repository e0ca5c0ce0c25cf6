import CGst
import CGstShim

/// A GstBin: a container of elements that changes state as one.
public class Bin: Element, @unchecked Sendable {
    // @unchecked Sendable: as Element; GstBin's child list is guarded by its object lock.
    public convenience init(name: String? = nil) {
        GStreamer.initialize()
        self.init(adopting: reinterpret(gst_bin_new(name)))
    }

    var binPointer: UnsafeMutablePointer<GstBin> { reinterpret(pointer) }

    /// Builds a bin from a gst-launch style description. Unlinked pads become ghost pads when asked,
    /// which is how a branch gets its "sink" pad.
    public static func parse(_ description: String, ghostUnlinkedPads: Bool = true) throws -> Bin {
        GStreamer.initialize()
        var error: UnsafeMutablePointer<GError>?
        let raw = gst_parse_bin_from_description(description, ghostUnlinkedPads ? 1 : 0, &error)
        if let error {
            if let raw { gst_object_unref(UnsafeMutableRawPointer(raw)) }
            throw GStreamerError(consuming: error, kind: .parse, debug: description)
        }
        guard let raw else {
            throw GStreamerError(kind: .parse, message: "could not parse '\(description)'")
        }
        return Bin(adopting: raw)
    }

    public func add(_ element: Element) throws {
        guard gst_bin_add(binPointer, element.pointer) != 0 else {
            throw GStreamerError(kind: .link, message: "cannot add \(element) to \(self)")
        }
    }

    public func add(_ elements: [Element]) throws {
        for element in elements { try add(element) }
    }

    public func remove(_ element: Element) {
        gst_bin_remove(binPointer, element.pointer)
    }

    /// Finds an element by name anywhere inside this bin.
    public func element(named name: String) -> Element? {
        gst_bin_get_by_name(binPointer, name).map { Element(adopting: $0) }
    }

    /// Exposes an inner pad on the bin's border.
    @discardableResult
    public func addGhostPad(named name: String, target: Pad) throws -> Pad {
        guard let ghost = gst_ghost_pad_new(name, target.pointer) else {
            throw GStreamerError(kind: .link, message: "cannot make ghost pad '\(name)' for \(self)")
        }
        let pad = Pad(retaining: ghost)
        guard gst_element_add_pad(pointer, ghost) != 0 else {
            throw GStreamerError(kind: .link, message: "cannot add ghost pad '\(name)' to \(self)")
        }
        return pad
    }

    /// The graph in Graphviz dot form (what GST_DEBUG_DUMP_DOT_DIR would write).
    public func dotGraph() -> String {
        takeString(gst_debug_bin_to_dot_data(binPointer, GST_DEBUG_GRAPH_SHOW_ALL)) ?? ""
    }
}

/// A top-level bin with a bus and a clock.
public final class Pipeline: Bin, @unchecked Sendable {
    // @unchecked Sendable: as Element; it stores nothing of its own.
    public convenience init(name: String) {
        GStreamer.initialize()
        self.init(adopting: gst_pipeline_new(name))
    }

    /// Parses a full gst-launch description into a pipeline.
    public static func launch(_ description: String) throws -> Pipeline {
        GStreamer.initialize()
        var error: UnsafeMutablePointer<GError>?
        let raw = gst_parse_launch(description, &error)
        if let error {
            if let raw { gst_object_unref(UnsafeMutableRawPointer(raw)) }
            throw GStreamerError(consuming: error, kind: .parse, debug: description)
        }
        guard let raw else { throw GStreamerError(kind: .parse, message: "could not parse '\(description)'") }
        let pipeline = Pipeline(adopting: raw)
        guard CGstShimIsPipeline(raw) else {
            throw GStreamerError(kind: .parse, message: "'\(description)' is not a pipeline")
        }
        return pipeline
    }

    public lazy var bus: Bus = Bus(adopting: gst_pipeline_get_bus(reinterpret(pointer)))

    /// Makes the pipeline use one clock for all its sources: a live source's own clock (pulsesrc's, for
    /// one) dies with its device, and the session must outlive any single device.
    public func useClock(_ clock: Clock) {
        gst_pipeline_use_clock(reinterpret(pointer), clock.pointer)
    }

    /// Sets the pipeline to NULL and detaches the bus handler: a dropped PLAYING pipeline would keep
    /// running silently. Must not be called from a streaming thread.
    public func shutDown() {
        bus.removeHandler()
        _ = try? setState(.null)
    }
}

private func CGstShimIsPipeline(_ element: UnsafeMutablePointer<GstElement>) -> Bool {
    g_type_check_instance_is_a(reinterpret(element), gst_pipeline_get_type()) != 0
}

/// A GstClock reference.
public final class Clock: @unchecked Sendable {
    // @unchecked Sendable: one reference to a GstClock, which any thread may read.
    let pointer: UnsafeMutablePointer<GstClock>
    init(adopting pointer: UnsafeMutablePointer<GstClock>) { self.pointer = pointer }
    deinit { gst_object_unref(UnsafeMutableRawPointer(pointer)) }

    /// The monotonic system clock every session shares.
    public static var system: Clock {
        GStreamer.initialize()
        return Clock(adopting: gst_system_clock_obtain())
    }

    public var time: ClockTime { gst_clock_get_time(pointer) }
}

extension Bin {
    /// Whether `child`, one of this bin's sinks, has handled end-of-stream completely (it posted EOS): a
    /// file sink has written its file's end, a sink bin (hlssink2) has finished everything inside it.
    public func hasEndOfStream(from child: Element) -> Bool {
        CGstShim_bin_child_posted_eos(binPointer, child.pointer) != 0
    }

    /// The elements inside this bin, at any depth, made by `factory` (those a bin like webrtcbin makes itself).
    public func elements(madeBy factory: String) -> [Element] {
        collectObjects(gst_bin_iterate_recurse(binPointer)) { object in
            Element(retaining: UnsafeMutablePointer<GstElement>(OpaquePointer(object)))
        }.filter { $0.factoryName == factory }
    }

    /// Sink elements inside this bin (at any depth): where end-of-stream finally arrives.
    public var sinkElements: [Element] {
        collectObjects(gst_bin_iterate_sinks(binPointer)) { object in
            Element(retaining: UnsafeMutablePointer<GstElement>(OpaquePointer(object)))
        }
    }
}

extension Bin {
    /// Puts `element` (in no bin yet, with one "sink" and one "src" pad) into this bin right after `upstream`,
    /// between it and what its "src" pad feeds. While data flows the change is made between two buffers (an
    /// idle probe, on the streaming thread), else at once; the element is brought to the bin's state and
    /// receives the stream's sticky events with the next buffer. Linked as negotiated (`linkAsNegotiated`):
    /// nothing upstream negotiates again, so an element that would not take the format already flowing is not
    /// put in. `done` says whether it went in: one that is not, or whose link fails, leaves the bin as it was.
    public func insert(_ element: Element, after upstream: Element, done: (@Sendable (Bool) -> Void)? = nil) {
        guard let upstreamPad = upstream.staticPad("src"), let downstreamPad = upstreamPad.peer,
              let input = element.staticPad("sink"), let output = element.staticPad("src") else {
            done?(false)
            return
        }
        // Weakly: a probe that never runs (a push that never returns) must not keep the bin alive.
        upstreamPad.addProbe(.idle) { [weak self] _ in
            guard let self else {
                done?(false)
                return .remove
            }
            if let flowing = upstreamPad.currentCaps, !input.accepts(flowing) {
                done?(false)
                return .remove
            }
            var inserted = false
            if (try? add(element)) != nil {
                _ = try? element.syncStateWithParent()
                _ = upstreamPad.unlink(from: downstreamPad)
                if (try? upstreamPad.linkAsNegotiated(to: input)) != nil, (try? output.linkAsNegotiated(to: downstreamPad)) != nil {
                    inserted = true
                } else {
                    _ = upstreamPad.unlink(from: input)
                    _ = try? element.setState(.null)
                    remove(element)
                    _ = try? upstreamPad.linkAsNegotiated(to: downstreamPad)
                }
            }
            done?(inserted)
            return .remove
        }
    }
}
