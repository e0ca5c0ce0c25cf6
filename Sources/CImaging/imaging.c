#include "CImaging.h"

void CImaging_average(uint8_t *dst, const uint8_t *const *sources, size_t count, size_t length) {
    if (count == 0) return;
    const uint32_t half = (uint32_t)(count / 2);
    for (size_t i = 0; i < length; i++) {
        uint32_t sum = half;
        for (size_t k = 0; k < count; k++) sum += sources[k][i];
        dst[i] = (uint8_t)(sum / count);
    }
}
