// Motion detection on a small grey picture (about 160 px wide): frame differencing against a background
// model that adapts slowly, with a per-pixel threshold taken from a running estimate of that pixel's noise.
// One detector belongs to one thread at a time (the caller serializes); nothing is allocated per frame.
#include "CImaging.h"

#include <stdlib.h>
#include <string.h>

// Fixed point: background and deviation are kept in 1/256 luma steps, so slow adaptation (1/32 of a
// difference per frame) does not round away and the state stays in 16 bits.
#define Q 8
#define HISTOGRAM_BINS 511

struct CImagingMotionDetector {
    int width;
    int height;
    /// Frames seen since the background was last started again.
    int frames;
    uint16_t *background;
    /// Mean absolute difference of each pixel from its background while still: its noise.
    uint16_t *deviation;
    /// 1 where the pixel differs from its background by more than its threshold this frame.
    uint8_t *changed;
    /// What each pixel counts for (CImagingMotionRegion...), filled by the caller.
    uint8_t *regions;
    /// Differences from the background, for the median (the global brightness change).
    uint32_t histogram[HISTOGRAM_BINS];
};

CImagingMotionDetector *CImaging_motion_create(int width, int height) {
    if (width < 3 || height < 3 || width > 4096 || height > 4096) return NULL;
    CImagingMotionDetector *detector = calloc(1, sizeof *detector);
    if (!detector) return NULL;
    size_t pixels = (size_t)width * (size_t)height;
    detector->width = width;
    detector->height = height;
    detector->background = calloc(pixels, sizeof(uint16_t));
    detector->deviation = calloc(pixels, sizeof(uint16_t));
    detector->changed = calloc(pixels, 1);
    detector->regions = malloc(pixels);
    if (!detector->background || !detector->deviation || !detector->changed || !detector->regions) {
        CImaging_motion_destroy(detector);
        return NULL;
    }
    memset(detector->regions, CImagingMotionRegionZone, pixels);
    return detector;
}

void CImaging_motion_destroy(CImagingMotionDetector *detector) {
    if (!detector) return;
    free(detector->background);
    free(detector->deviation);
    free(detector->changed);
    free(detector->regions);
    free(detector);
}

uint8_t *CImaging_motion_regions(CImagingMotionDetector *detector) { return detector->regions; }

void CImaging_motion_restart(CImagingMotionDetector *detector) { detector->frames = 0; }

/// The median of (frame - background) over the pixels not masked out: how much the whole picture got
/// brighter or darker since the background learnt it (a light dimming, a camera's exposure step). Motion
/// moves a part of the picture; only a change of most of it moves the median.
static int median_difference(CImagingMotionDetector *d, const uint8_t *pixels, size_t stride) {
    memset(d->histogram, 0, sizeof d->histogram);
    uint32_t counted = 0;
    for (int y = 0; y < d->height; y++) {
        const uint8_t *row = pixels + (size_t)y * stride;
        const uint16_t *background = d->background + (size_t)y * d->width;
        const uint8_t *regions = d->regions + (size_t)y * d->width;
        for (int x = 0; x < d->width; x++) {
            if (regions[x] == CImagingMotionRegionMasked) continue;
            int difference = (int)row[x] - ((background[x] + (1 << (Q - 1))) >> Q);
            d->histogram[difference + 255]++;
            counted++;
        }
    }
    if (counted == 0) return 0;
    uint32_t half = (counted + 1) / 2, seen = 0;
    for (int bin = 0; bin < HISTOGRAM_BINS; bin++) {
        seen += d->histogram[bin];
        if (seen >= half) return bin - 255;
    }
    return 0;
}

/// The first frame is the background; each pixel's noise starts at `initial_deviation` until learnt.
static void start_background(CImagingMotionDetector *d, const uint8_t *pixels, size_t stride, int initial_deviation) {
    for (int y = 0; y < d->height; y++) {
        const uint8_t *row = pixels + (size_t)y * stride;
        for (int x = 0; x < d->width; x++) {
            size_t i = (size_t)y * d->width + x;
            d->background[i] = (uint16_t)(row[x] << Q);
            d->deviation[i] = (uint16_t)(initial_deviation << Q);
        }
    }
    memset(d->changed, 0, (size_t)d->width * d->height);
}

void CImaging_motion_process(CImagingMotionDetector *d, const uint8_t *pixels, size_t stride,
                             const CImagingMotionParameters *parameters, CImagingMotionResult *result) {
    memset(result, 0, sizeof *result);
    if (d->frames == 0) {
        start_background(d, pixels, stride, parameters->minimum_threshold);
        d->frames = 1;
        result->learning = 1;
        return;
    }
    int learning = d->frames < parameters->learning_frames;
    int offset = median_difference(d, pixels, stride);
    // Thresholds in Q: a multiple of the pixel's noise, never below the floor.
    int32_t floor_q = parameters->minimum_threshold << Q;
    int32_t scale_q4 = (int32_t)(parameters->threshold_scale * 16.0f + 0.5f);
    int32_t minimum_deviation_q = parameters->minimum_deviation_q8;
    // While learning, the background and the noise follow the picture fast and nothing counts as motion.
    int still_shift = learning ? 2 : parameters->still_shift;
    int changed_shift = learning ? 2 : parameters->changed_shift;
    int deviation_shift = learning ? 2 : parameters->deviation_shift;
    uint64_t deviation_sum = 0;
    for (int y = 0; y < d->height; y++) {
        const uint8_t *row = pixels + (size_t)y * stride;
        size_t base = (size_t)y * d->width;
        for (int x = 0; x < d->width; x++) {
            size_t i = base + x;
            int32_t sample = (int32_t)row[x] << Q;
            int32_t background = d->background[i];
            // Compared with the background as the whole picture's brightness moved: light is not motion.
            int32_t difference = sample - background - (offset << Q);
            int32_t magnitude = difference < 0 ? -difference : difference;
            int32_t threshold = (d->deviation[i] * scale_q4) >> 4;
            if (threshold < floor_q) threshold = floor_q;
            int changed = !learning && d->regions[i] != CImagingMotionRegionMasked && magnitude > threshold;
            d->changed[i] = (uint8_t)changed;
            // The background follows the picture (brightness included): quickly where it is still, slowly
            // under something that changed, so an object that stays becomes background after a while.
            int32_t step = (sample - background) >> (changed ? changed_shift : still_shift);
            background += step;
            d->background[i] = (uint16_t)(background < 0 ? 0 : (background > (255 << Q) ? (255 << Q) : background));
            if (!changed) {
                // The noise estimate learns from still pixels only: motion would inflate it.
                int32_t deviation = d->deviation[i];
                deviation += (magnitude - deviation) >> deviation_shift;
                if (deviation < minimum_deviation_q) deviation = minimum_deviation_q;
                if (deviation > 0xFFFF) deviation = 0xFFFF;
                d->deviation[i] = (uint16_t)deviation;
            }
            deviation_sum += d->deviation[i];
        }
    }
    d->frames++;
    result->learning = learning;
    result->brightness_change = offset;
    result->mean_noise = (float)deviation_sum / (float)((size_t)d->width * d->height) / (float)(1 << Q);
    if (learning) return;

    // A changed pixel counts when enough of its 3x3 neighbourhood changed too: noise scatters single
    // pixels, an object changes a patch. Counted inside the zones only.
    int confirming = parameters->confirming_neighbours;
    int left = d->width, top = d->height, right = -1, bottom = -1, counted = 0, zone = 0;
    for (int y = 0; y < d->height; y++) {
        for (int x = 0; x < d->width; x++) {
            size_t i = (size_t)y * d->width + x;
            if (d->regions[i] != CImagingMotionRegionZone) continue;
            zone++;
            if (!d->changed[i] || x == 0 || y == 0 || x == d->width - 1 || y == d->height - 1) continue;
            const uint8_t *above = d->changed + i - d->width, *here = d->changed + i, *below = d->changed + i + d->width;
            int neighbours = above[-1] + above[0] + above[1] + here[-1] + here[1] + below[-1] + below[0] + below[1];
            if (neighbours < confirming) continue;
            counted++;
            if (x < left) left = x;
            if (x > right) right = x;
            if (y < top) top = y;
            if (y > bottom) bottom = y;
        }
    }
    result->zone_pixels = zone;
    result->changed_pixels = counted;
    if (counted > 0) {
        result->left = left;
        result->top = top;
        result->right = right + 1;
        result->bottom = bottom + 1;
    }
}
