// CImaging: pixel loops the photo pipeline runs on every capture. In C so that they are fast in debug
// builds too (Swift's unoptimized loops are ~20x slower). Every name is prefixed CImaging_.
#ifndef CIMAGING_H
#define CIMAGING_H

#include <stddef.h>
#include <stdint.h>

/// dst[i] = rounded mean of sources[0..count)[i], for `length` bytes: multi-frame noise reduction.
void CImaging_average(uint8_t *dst, const uint8_t *const *sources, size_t count, size_t length);

/// How a YUV frame's chroma is stored.
typedef enum {
    /// Y, Cb and Cr each in a plane of their own (I420, YV12 with its planes given in Cb, Cr order, Y42B, Y444).
    CImagingLayoutPlanar,
    /// Y, then one plane of Cb,Cr pairs (NV12, NV16, NV24).
    CImagingLayoutInterleavedUV,
    /// Y, then one plane of Cr,Cb pairs (NV21, NV61, NV42).
    CImagingLayoutInterleavedVU,
    /// Y alone (GRAY8).
    CImagingLayoutGray,
} CImagingLayout;

/// A frame to encode, read in place. planes/strides: Y, Cb, Cr for planar layouts; Y, chroma pairs for
/// interleaved ones. chroma_shift_x/y: log2 of the chroma subsampling (1,1 for 4:2:0; 1,0 for 4:2:2).
/// limited_range: the samples span 16-235/240 (most YUV video) and are stretched to JPEG's 0-255.
typedef struct {
    int width;
    int height;
    CImagingLayout layout;
    int chroma_shift_x;
    int chroma_shift_y;
    int limited_range;
    const uint8_t *planes[3];
    size_t strides[3];
} CImagingYUVImage;

/// Encodes `image` as a baseline JPEG at `quality` (1-100). A non-empty `app1` (at most 65,533 bytes, e.g.
/// "Exif\0\0" and a TIFF block) is written as the APP1 segment right after SOI, in place of JFIF's APP0.
/// The JPEG goes into the malloc'd block `*jpeg` of `*jpeg_capacity` bytes (NULL and 0 for none), which is
/// replaced or grown when too small: a block kept from an earlier encode is written without page faults.
/// Returns 0 and the JPEG's `*jpeg_length`, or -1 with the reason in `error`; either way the block is the
/// caller's to free or reuse.
int CImaging_encode_jpeg(const CImagingYUVImage *image, int quality, const uint8_t *app1, size_t app1_length,
                         uint8_t **jpeg, size_t *jpeg_capacity, size_t *jpeg_length, char *error, size_t error_capacity);

/// A small JPEG (the longer side `max_dimension` pixels, or the picture's own size when smaller) of the JPEG
/// `jpeg`, decoded at libjpeg's smallest scale (1/2, 1/4, 1/8) that is still large enough: a big photo is
/// never decoded whole. `*thumbnail` is malloc'd, the caller frees it; `*decoded_width/height` say how large
/// the decoded picture was (the proof that it was not decoded at full size). Returns 0, or -1 with the reason.
/// The small picture is turned or mirrored as EXIF `orientation` (1 to 8) says the photo is shown, so the
/// thumbnail is upright with no orientation tag of its own.
int CImaging_jpeg_thumbnail(const uint8_t *jpeg, size_t jpeg_length, int max_dimension, int quality, int orientation,
                            uint8_t **thumbnail, size_t *thumbnail_length, int *decoded_width, int *decoded_height,
                            char *error, size_t error_capacity);

// MARK: Motion detection (motion.c)

/// What a pixel of the detector's picture counts for.
enum {
    /// Ignored entirely (a mask): neither motion nor the picture's brightness.
    CImagingMotionRegionMasked = 0,
    /// Outside every zone: read for the picture's brightness, never counted as motion.
    CImagingMotionRegionWatchedForLight = 1,
    /// Inside a zone: motion here counts.
    CImagingMotionRegionZone = 2,
};

/// A detector's state for pictures of one size: its background, each pixel's noise, and the map of regions.
typedef struct CImagingMotionDetector CImagingMotionDetector;

typedef struct {
    /// A pixel changed when it differs from its background (after the picture's brightness change) by more
    /// than this many times its own mean absolute deviation...
    float threshold_scale;
    /// ...and by more than this many luma steps. Also each pixel's noise before it is learnt.
    int minimum_threshold;
    /// The lowest noise a pixel is taken to have, in 1/256 luma steps (a synthetic picture has none).
    int minimum_deviation_q8;
    /// The background follows a still pixel by 1/2^still_shift of the difference per frame, a changed one by
    /// 1/2^changed_shift; the noise estimate by 1/2^deviation_shift.
    int still_shift;
    int changed_shift;
    int deviation_shift;
    /// A changed pixel counts when at least this many of its eight neighbours changed too.
    int confirming_neighbours;
    /// Frames after the first that only teach the background and the noise (no motion is reported).
    int learning_frames;
} CImagingMotionParameters;

typedef struct {
    /// Nonzero while the detector is still learning the background: nothing else in the result counts.
    int learning;
    /// Changed pixels inside the zones (confirmed by their neighbours), and the zones' pixels.
    int changed_pixels;
    int zone_pixels;
    /// Bounding box of the changed pixels: left/top inclusive, right/bottom exclusive (all 0 when none).
    int left, top, right, bottom;
    /// How many luma steps the whole picture moved from its background (compensated before comparing).
    int brightness_change;
    /// The pixels' mean noise estimate, in luma steps.
    float mean_noise;
} CImagingMotionResult;

/// A detector for `width`x`height` pictures (3 to 4096 each), every pixel in the zone; NULL when out of memory.
CImagingMotionDetector *CImaging_motion_create(int width, int height);
void CImaging_motion_destroy(CImagingMotionDetector *detector);
/// The detector's width*height region map (row by row, CImagingMotionRegion values), for the caller to fill.
uint8_t *CImaging_motion_regions(CImagingMotionDetector *detector);
/// The next frame starts the background again (a new camera, the end of an interruption).
void CImaging_motion_restart(CImagingMotionDetector *detector);
/// Compares one grey picture (`stride` bytes a row) with the background, then updates the background.
void CImaging_motion_process(CImagingMotionDetector *detector, const uint8_t *pixels, size_t stride,
                             const CImagingMotionParameters *parameters, CImagingMotionResult *result);

// MARK: Test camera scenes (scene.c)

/// Sets `width`x`height` luma samples, `step` bytes apart within a row (1 planar, 2 packed YUY2), to `value`.
void CImaging_fill_luma(uint8_t *luma, size_t stride, int step, int width, int height, uint8_t value);
/// Adds `offset` (may be negative) to `width`x`height` luma samples, clamped to 0-255.
void CImaging_offset_luma(uint8_t *luma, size_t stride, int step, int width, int height, int offset);

#endif
