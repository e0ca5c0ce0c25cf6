#ifndef CPROCESSHEAP_H
#define CPROCESSHEAP_H

/// The number of malloc arenas glibc was limited to when the program loaded: 2, or 0 when the process
/// kept its own choice (MALLOC_ARENA_MAX set) or the C library is not glibc.
int gcapture_arena_limit(void);

/// Returns the free pages of every arena to the system (milliseconds for a few hundred MiB of heap); nothing
/// where the C library is not glibc.
void gcapture_release_free_memory(void);

#endif
