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
int CImaging_jpeg_thumbnail(const uint8_t *jpeg, size_t jpeg_length, int max_dimension, int quality,
                            uint8_t **thumbnail, size_t *thumbnail_length, int *decoded_width, int *decoded_height,
                            char *error, size_t error_capacity);

#endif
