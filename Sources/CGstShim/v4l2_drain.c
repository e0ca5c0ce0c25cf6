// How GStreamer's v4l2 elements let go of a camera, set before GStreamer starts.
//
// GStreamer 1.22's v4l2src, stopped while some of its buffers are still downstream (a camera unplugged
// mid-stream, then swapped out of a running session), "orphans" its buffer pool and loses one reference
// to it on the way: the pool is never freed, and neither is the duplicate of the device's file descriptor
// it owns (seen with the leaks tracer in the VM: every reference balanced but the one gst_v4l2_object_stop
// takes). A driver that comes back only when its last descriptor closes (vivid's disconnect, a USB link
// reset) then never comes back, and each interruption leaks a descriptor and the old element. It depends on
// timing (whether a buffer is still in an encoder when the source stops), so it failed 1 run in 2 or all
// runs depending on the branches behind the tee. GST_V4L2_FORCE_DRAIN makes v4l2 drain the pool instead of
// orphaning it: the pool and its descriptor go when the last buffer comes back (5 of 5 recoveries in the
// VM, 0.36 s each). v4l2 reads the variable when a pool stops, so it is set just before gst_init; a value
// the operator set is kept.
//
// Not in a load-time constructor, as it was: Swift finds a statically linked program's arguments by walking
// back from `environ` to the stack the kernel laid out, when its own initializers run. A setenv before that
// moved `environ` to the heap, and `gcapture` built with --static-swift-stdlib saw no arguments at all (it
// printed its help for `gcapture record ...`). The first setenv copies the environment into a new array and
// leaves the old one as it was, so a thread reading the environment meanwhile still reads a valid one.
#include <stdlib.h>
#include "CGstShim.h"

void CGstShim_v4l2_drain_on_stop(void) {
    setenv("GST_V4L2_FORCE_DRAIN", "1", 0);
}

int CGstShim_v4l2_drains_on_stop(void) {
    return getenv("GST_V4L2_FORCE_DRAIN") != NULL;
}
