import CGst
import CGstShim

extension Bin {
    /// The graph inside this bin in gst-launch syntax: every element (bins flattened) with the properties
    /// set away from their defaults, chains written `a ! b ! c`, a branch from a named element as
    /// `tee. ! queue ! ...`. Read from the elements themselves, so a graph built but never played (NULL)
    /// describes exactly what it would play. Names are given only where a line refers back to an element.
    public func launchDescription() -> String {
        let nodes = LaunchGraph(bin: self)
        return nodes.render()
    }
}

private struct LaunchGraph {
    struct Link { var sourcePad: String; var target: Int; var sinkPad: String }
    struct Node {
        var element: Element
        var name: String
        var text: String
        var outputs: [Link] = []
        var inputs = 0
    }
    var nodes: [Node] = []

    init(bin: Bin) {
        var elements = collectObjects(gst_bin_iterate_recurse(bin.binPointer)) { object -> Element? in
            guard CGstShim_object_is_a(object, gst_bin_get_type()) == 0 else { return nil }
            return Element(retaining: UnsafeMutablePointer<GstElement>(OpaquePointer(object)))
        }
        // The iterator walks children newest first; the order elements were added reads better.
        elements.reverse()
        let counts = Dictionary(grouping: elements, by: \.name).mapValues(\.count)
        nodes = elements.map { element in
            var name = element.name
            if counts[name, default: 0] > 1, let parent = Self.parentName(of: element) { name = "\(parent)-\(name)" }
            return Node(element: element, name: name, text: Self.describe(element))
        }
        let index = Dictionary(nodes.enumerated().map { ($0.element.element.pointer, $0.offset) }, uniquingKeysWith: { a, _ in a })
        for (position, node) in nodes.enumerated() {
            for pad in Self.sourcePads(of: node.element) {
                defer { gst_object_unref(UnsafeMutableRawPointer(pad)) }
                guard let sink = Self.downstream(of: pad) else { continue }
                defer { gst_object_unref(UnsafeMutableRawPointer(sink)) }
                guard let parent = gst_pad_get_parent_element(sink) else { continue }
                defer { gst_object_unref(UnsafeMutableRawPointer(parent)) }
                guard let target = index[parent] else { continue }
                nodes[position].outputs.append(Link(sourcePad: Self.name(of: pad), target: target, sinkPad: Self.name(of: sink)))
                nodes[target].inputs += 1
            }
        }
    }

    func render() -> String {
        var lines: [[Piece]] = []
        var visited = Set<Int>()
        var referenced = Set<Int>()
        var pending: [(from: Int, link: Link)] = []

        func chain(from start: Int) -> [Piece] {
            var pieces: [Piece] = []
            var current = start
            while true {
                visited.insert(current)
                let node = nodes[current]
                pieces.append(.element(current))
                if node.outputs.count == 1, let link = node.outputs.first, nodes[link.target].inputs == 1, !visited.contains(link.target) {
                    pieces.append(.text(" ! "))
                    current = link.target
                    continue
                }
                for link in node.outputs { pending.append((current, link)) }
                if !node.outputs.isEmpty { referenced.insert(current) }
                return pieces
            }
        }

        func drain() {
            while !pending.isEmpty {
                let (from, link) = pending.removeFirst()
                let head = "\(nodes[from].name).\(nodes[from].outputs.count > 1 ? link.sourcePad : "") ! "
                if visited.contains(link.target) {
                    referenced.insert(link.target)
                    lines.append([.text(head + "\(nodes[link.target].name).\(link.sinkPad)")])
                } else {
                    if nodes[link.target].inputs > 1 { referenced.insert(link.target) }
                    lines.append([.text(head)] + chain(from: link.target))
                }
            }
        }

        // Sources first; an element linked to nothing (a tee no output uses) last.
        for start in nodes.indices where nodes[start].inputs == 0 && !nodes[start].outputs.isEmpty && !visited.contains(start) {
            lines.append(chain(from: start))
            drain()
        }
        for start in nodes.indices where !visited.contains(start) && !(nodes[start].inputs == 0 && nodes[start].outputs.isEmpty) {
            lines.append(chain(from: start))
            drain()
        }
        for start in nodes.indices where !visited.contains(start) {
            lines.append(chain(from: start))
            drain()
        }
        // Names only where a line refers back to an element.
        return lines.map { pieces in
            pieces.map { piece in
                switch piece {
                case .text(let text): return text
                case .element(let index):
                    let node = nodes[index]
                    guard referenced.contains(index) else { return node.text }
                    let factory = node.text.prefix { $0 != " " }
                    return factory + " name=\(node.name)" + node.text.dropFirst(factory.count)
                }
            }.joined()
        }.joined(separator: "\n")
    }

    enum Piece { case text(String), element(Int) }

    // MARK: Elements and pads

    static func describe(_ element: Element) -> String {
        var text = element.factoryName
        let object = UnsafeMutableRawPointer(element.pointer).assumingMemoryBound(to: GObject.self)
        let klass = UnsafeMutablePointer<GObjectClass>(OpaquePointer(object.pointee.g_type_instance.g_class))
        var count: guint = 0
        guard let specs = g_object_class_list_properties(klass, &count) else { return text }
        defer { g_free(specs) }
        for index in 0..<Int(count) {
            guard let spec = specs[index] else { continue }
            let flags = spec.pointee.flags.rawValue
            let readable = G_PARAM_READABLE.rawValue, writable = G_PARAM_WRITABLE.rawValue
            guard flags & readable != 0, flags & writable != 0, flags & G_PARAM_DEPRECATED.rawValue == 0 else { continue }
            let name = String(cString: spec.pointee.name)
            guard name != "name", name != "parent" else { continue }
            var value = GValue()
            g_value_init(&value, spec.pointee.value_type)
            defer { g_value_unset(&value) }
            g_object_get_property(object, spec.pointee.name, &value)
            // Which device or file an element opens is said even when it is the default (/dev/video0).
            let alwaysShown = name == "device" || name == "location"
            guard alwaysShown || g_param_value_defaults(spec, &value) == 0, let shown = show(&value), !shown.isEmpty else { continue }
            text += " \(name)=\(quoted(shown))"
        }
        return text
    }

    /// A value as gst-launch takes it: caps and text as they are (quoted once, by `quoted`), numbers short.
    static func show(_ value: UnsafeMutablePointer<GValue>) -> String? {
        let type = CGstShim_value_type(value)
        if type == gst_caps_get_type() {
            return gst_value_get_caps(value).flatMap { takeString(gst_caps_to_string($0)) }
        }
        if type == CGstShim_type_string() { return g_value_get_string(value).map { String(cString: $0) } }
        if type == CGstShim_type_double() { return String(g_value_get_double(value)) }
        guard let serialized = gst_value_serialize(value) else { return nil }
        defer { g_free(serialized) }
        return String(cString: serialized)
    }

    static func quoted(_ value: String) -> String {
        let plain = !value.isEmpty && value.allSatisfy { $0.isLetter || $0.isNumber || "-_./:+".contains($0) }
        return plain ? value : "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    static func parentName(of element: Element) -> String? {
        guard let parent = gst_object_get_parent(asObject(element.pointer)) else { return nil }
        defer { gst_object_unref(UnsafeMutableRawPointer(parent)) }
        return takeString(gst_object_get_name(parent))
    }

    static func name(of pad: UnsafeMutablePointer<GstPad>) -> String {
        takeString(gst_object_get_name(asObject(pad))) ?? ""
    }

    /// The element's source pads, each with a reference of its own (the caller unrefs them).
    static func sourcePads(of element: Element) -> [UnsafeMutablePointer<GstPad>] {
        collectObjects(gst_element_iterate_src_pads(element.pointer), discard: { gst_object_unref(UnsafeMutableRawPointer($0)) }) { object in
            gst_object_ref(object)
            return UnsafeMutablePointer<GstPad>(OpaquePointer(object))
        }
    }

    /// The real (non-ghost) sink pad a source pad's data reaches, through the ghost pads on bin borders;
    /// a new reference, or nil when the path is not linked all the way.
    static func downstream(of pad: UnsafeMutablePointer<GstPad>) -> UnsafeMutablePointer<GstPad>? {
        var current = gst_pad_get_peer(pad)
        var steps = 0
        while let peer = current, steps < 64 {
            steps += 1
            if CGstShim_object_is_a(peer, gst_ghost_pad_get_type()) != 0 {
                // A bin's sink ghost pad: on to what it stands for inside.
                let target = gst_ghost_pad_get_target(UnsafeMutableRawPointer(peer).assumingMemoryBound(to: GstGhostPad.self))
                gst_object_unref(UnsafeMutableRawPointer(peer))
                current = target
            } else if CGstShim_object_is_a(peer, gst_proxy_pad_get_type()) != 0 {
                // The inside of a bin's source ghost pad: on to what the ghost pad is linked to outside.
                let inner = gst_proxy_pad_get_internal(UnsafeMutableRawPointer(peer).assumingMemoryBound(to: GstProxyPad.self))
                gst_object_unref(UnsafeMutableRawPointer(peer))
                guard let inner else { return nil }
                current = gst_pad_get_peer(UnsafeMutableRawPointer(inner).assumingMemoryBound(to: GstPad.self))
                gst_object_unref(UnsafeMutableRawPointer(inner))
            } else {
                return peer
            }
        }
        if let current { gst_object_unref(UnsafeMutableRawPointer(current)) }
        return nil
    }
}
