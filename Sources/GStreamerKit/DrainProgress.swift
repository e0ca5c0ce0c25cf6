import CGst
import Dispatch
import GCaptureSupport
import Synchronization

/// Buffers moving anywhere inside a bin while it drains: how a slow drain (an encoder working through the
/// frames queued before it on a loaded machine, a muxer that writes only once a fragment is complete) is told
/// from a stuck one. Probes on every source pad inside the bin, from `init` until `stop()`: nothing is
/// watched while the bin runs.
final class DrainProgress: Sendable {
    private let probes: Locked<[(pad: Pad, id: UInt)]>
    /// When a buffer last left an element inside the bin (DispatchTime's uptime nanoseconds).
    private let lastMove: Atomic<UInt64>

    init(watching bin: Bin) {
        lastMove = Atomic(DispatchTime.now().uptimeNanoseconds)
        probes = Locked([])
        let elements = collectObjects(gst_bin_iterate_recurse(bin.binPointer)) { object in
            Element(retaining: UnsafeMutablePointer<GstElement>(OpaquePointer(object)))
        }
        let pads = elements.flatMap { element in
            collectObjects(gst_element_iterate_src_pads(element.pointer)) { object in
                Pad(retaining: UnsafeMutablePointer<GstPad>(OpaquePointer(object)))
            }
        }
        // The probes hold this watch until stop() takes them off.
        let installed = pads.map { pad in
            (pad: pad, id: pad.addProbe(.buffer) { [self] _ in
                lastMove.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
                return .ok
            })
        }
        probes.withLock { $0 = installed }
    }

    /// How long ago a buffer last moved inside the bin (or the watch began).
    var idleTime: Duration {
        let now = DispatchTime.now().uptimeNanoseconds, last = lastMove.load(ordering: .relaxed)
        return .nanoseconds(Int64(now > last ? now - last : 0))
    }

    func stop() {
        let installed = probes.withLock { probes in
            defer { probes.removeAll() }
            return probes
        }
        for probe in installed { probe.pad.removeProbe(probe.id) }
    }
}
