// The test camera's scripted scene, drawn into its frames' luma before anyone sees them (SourceBuilder).
#include "CImaging.h"

void CImaging_fill_luma(uint8_t *luma, size_t stride, int step, int width, int height, uint8_t value) {
    for (int y = 0; y < height; y++) {
        uint8_t *row = luma + (size_t)y * stride;
        if (step == 1) {
            for (int x = 0; x < width; x++) row[x] = value;
        } else {
            for (int x = 0; x < width; x++) row[(size_t)x * step] = value;
        }
    }
}

void CImaging_offset_luma(uint8_t *luma, size_t stride, int step, int width, int height, int offset) {
    if (offset == 0) return;
    for (int y = 0; y < height; y++) {
        uint8_t *row = luma + (size_t)y * stride;
        for (int x = 0; x < width; x++) {
            int value = row[(size_t)x * step] + offset;
            row[(size_t)x * step] = (uint8_t)(value < 0 ? 0 : (value > 255 ? 255 : value));
        }
    }
}
