// CImaging: pixel loops the photo pipeline runs on every capture. In C so that they are fast in debug
// builds too (Swift's unoptimized loops are ~20x slower). Every name is prefixed CImaging_.
#ifndef CIMAGING_H
#define CIMAGING_H

#include <stddef.h>
#include <stdint.h>

/// dst[i] = rounded mean of sources[0..count)[i], for `length` bytes: multi-frame noise reduction.
void CImaging_average(uint8_t *dst, const uint8_t *const *sources, size_t count, size_t length);

#endif
