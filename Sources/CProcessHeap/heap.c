// glibc's heap, tuned for a process that records for weeks, before the first thread exists.
//
// Each recording runs its encoders on new threads, which glibc spreads over up to 8 arenas per core; an arena
// keeps the pages its high-water mark touched, so back-to-back minute-long recordings climbed 0.38 MiB a minute
// long after their objects were freed. Two arenas (MALLOC_ARENA_MAX=2 set before the program started) measured
// 0.09 MiB a minute side by side in one run. Setting the same limit later, at the first session, measured 0.16:
// by then Swift's and GLib's threads had made arenas of their own. So the limit is set here, when the program
// loads, as the environment variable would.
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include "CProcessHeap.h"

static int arena_limit = 0;

__attribute__((constructor)) static void gcapture_limit_arenas(void) {
#if defined(__GLIBC__)
    // A process (or its operator) that chose its own limit keeps it.
    if (getenv("MALLOC_ARENA_MAX") != NULL) return;
    if (mallopt(M_ARENA_MAX, 2) == 1) arena_limit = 2;
#endif
}

int gcapture_arena_limit(void) { return arena_limit; }

void gcapture_release_free_memory(void) {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}
