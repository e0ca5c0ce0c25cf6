// JPEG encoding of YUV frames with libjpeg(-turbo)'s raw-data interface: the frame's own rows go to the
// DCT, with no colour conversion and, for planar layouts whose width fills whole blocks, no copy at all.
// jpegenc copies every sample of a semi-planar frame (NV12, a camera's usual format) one byte at a time
// before libjpeg sees it; that copy was a third of its time.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define CIMAGING_AVX2 1
#endif

#include "CImaging.h"
#include "jpeg_messages.h"

/// libjpeg reports errors by calling error_exit, which must not return: it jumps back to the encode.
typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} FailureHandler;

static void say_nothing(j_common_ptr info) { (void)info; }

void CImaging_jpeg_keep_quiet(struct jpeg_error_mgr *manager) { manager->output_message = say_nothing; }

static void fail(j_common_ptr info) {
    FailureHandler *handler = (FailureHandler *)info->err;
    (*info->err->format_message)(info, handler->message);
    longjmp(handler->jump, 1);
}

/// Output into the caller's malloc'd block, doubled when full. Reserving the raw frame's size costs nothing
/// until written (untouched pages are never faulted in) and means it practically never grows.
typedef struct {
    struct jpeg_destination_mgr manager;
    uint8_t **data;
    size_t *capacity;
    size_t length;
} GrowingDestination;

static void destination_start(j_compress_ptr info) {
    GrowingDestination *destination = (GrowingDestination *)info->dest;
    destination->manager.next_output_byte = *destination->data;
    destination->manager.free_in_buffer = *destination->capacity;
}

static boolean destination_grow(j_compress_ptr info) {
    GrowingDestination *destination = (GrowingDestination *)info->dest;
    size_t used = *destination->capacity;
    uint8_t *grown = realloc(*destination->data, used * 2);
    if (grown == NULL) ERREXIT1(info, JERR_OUT_OF_MEMORY, 1);
    *destination->data = grown;
    *destination->capacity = used * 2;
    destination->manager.next_output_byte = grown + used;
    destination->manager.free_in_buffer = used;
    return TRUE;
}

static void destination_finish(j_compress_ptr info) {
    GrowingDestination *destination = (GrowingDestination *)info->dest;
    destination->length = *destination->capacity - destination->manager.free_in_buffer;
}

static size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

/// One component as libjpeg reads it: `rows` rows of `padded_width` samples, taken from the frame directly
/// when possible, else copied (de-interleaved, right edge repeated) into `scratch`.
typedef struct {
    const uint8_t *base;
    size_t stride;
    size_t pixel_step;     // 1 planar, 2 for a semi-planar chroma component
    size_t width;          // samples that exist in a row
    size_t height;         // rows that exist
    size_t padded_width;   // what libjpeg reads: whole blocks of whole MCUs
    size_t block_rows;     // rows per iMCU row: 8 × vertical sampling factor
    uint8_t *scratch;      // block_rows rows of padded_width, or NULL when rows are used in place
    void (*expand)(const uint8_t *, uint8_t *, size_t);  // limited → full range, or NULL
    void (*split)(const uint8_t *restrict, uint8_t *restrict, uint8_t *restrict, size_t);  // of an interleaved pair
    JSAMPROW rows[32];
} Component;

/// Asks for the rows of the next iMCU row while libjpeg works on this one: a camera's frame arrives by DMA
/// and is not in any cache, and libjpeg walks 16 rows at once in 8-byte steps, a pattern the hardware
/// prefetchers follow poorly.
static void component_prefetch(const Component *component, size_t first_row) {
#ifndef CIMAGING_NO_PREFETCH
    size_t bytes = component->width * component->pixel_step;
    for (size_t row = first_row; row < first_row + component->block_rows && row < component->height; row++) {
        const uint8_t *source = component->base + row * component->stride;
        for (size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(source + offset);
    }
#endif
}

/// Splits `count` pairs into their first and second bytes: a semi-planar chroma row into Cb and Cr.
static void split_pairs(const uint8_t *restrict pairs, uint8_t *restrict first, uint8_t *restrict second, size_t count) {
    size_t index = 0;
#if defined(__SSE2__)
    // 16 pairs a step (compilers leave the plain loop scalar: it was a fifth of the encode).
    const __m128i low_bytes = _mm_set1_epi16(0x00FF);
    for (; index + 16 <= count; index += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(pairs + 2 * index));
        __m128i b = _mm_loadu_si128((const __m128i *)(pairs + 2 * index + 16));
        _mm_storeu_si128((__m128i *)(first + index),
                         _mm_packus_epi16(_mm_and_si128(a, low_bytes), _mm_and_si128(b, low_bytes)));
        _mm_storeu_si128((__m128i *)(second + index), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
    }
#endif
    for (; index < count; index++) {
        first[index] = pairs[2 * index];
        second[index] = pairs[2 * index + 1];
    }
}

/// Limited-range samples (luma 16-235, chroma 16-240 around 128) stretched to JPEG's full 0-255, rounded and
/// clipped: JFIF defines its YCbCr as full range, and a limited-range frame written as it is looks washed
/// out (black at 16, white at 235). `source` may be `target`.
static void expand_luma(const uint8_t *source, uint8_t *target, size_t count) {
    size_t index = 0;
#if defined(__SSE2__)
    // (y - 16) × 255/219 as ((y - 16) << 8) × 596 >> 16, which is twice the result (596/512 ≈ 255/219),
    // then halved with rounding. Below 16 saturates to 0, above 235 packs to 255.
    const __m128i zero = _mm_setzero_si128(), sixteen = _mm_set1_epi8(16), scale = _mm_set1_epi16(596);
    const __m128i one = _mm_set1_epi16(1);
    for (; index + 16 <= count; index += 16) {
        __m128i offset = _mm_subs_epu8(_mm_loadu_si128((const __m128i *)(source + index)), sixteen);
        __m128i low = _mm_mulhi_epu16(_mm_unpacklo_epi8(zero, offset), scale);
        __m128i high = _mm_mulhi_epu16(_mm_unpackhi_epi8(zero, offset), scale);
        low = _mm_srli_epi16(_mm_add_epi16(low, one), 1);
        high = _mm_srli_epi16(_mm_add_epi16(high, one), 1);
        _mm_storeu_si128((__m128i *)(target + index), _mm_packus_epi16(low, high));
    }
#endif
    for (; index < count; index++) {
        int value = ((source[index] - 16) * 255 * 2 + 219) / (219 * 2);
        target[index] = (uint8_t)(source[index] <= 16 ? 0 : value > 255 ? 255 : value);
    }
}

static void expand_chroma(const uint8_t *source, uint8_t *target, size_t count) {
    size_t index = 0;
#if defined(__SSE2__)
    // 128 + (c - 128) × 255/224 as ((c - 128) << 7) × 1166 >> 16, twice the offset (1166/1024 ≈ 255/224),
    // halved with rounding (arithmetic shift: the offset is signed).
    const __m128i zero = _mm_setzero_si128(), bias = _mm_set1_epi16(128), scale = _mm_set1_epi16(1166);
    const __m128i one = _mm_set1_epi16(1);
    for (; index + 16 <= count; index += 16) {
        __m128i samples = _mm_loadu_si128((const __m128i *)(source + index));
        __m128i low = _mm_slli_epi16(_mm_sub_epi16(_mm_unpacklo_epi8(samples, zero), bias), 7);
        __m128i high = _mm_slli_epi16(_mm_sub_epi16(_mm_unpackhi_epi8(samples, zero), bias), 7);
        low = _mm_add_epi16(_mm_srai_epi16(_mm_add_epi16(_mm_mulhi_epi16(low, scale), one), 1), bias);
        high = _mm_add_epi16(_mm_srai_epi16(_mm_add_epi16(_mm_mulhi_epi16(high, scale), one), 1), bias);
        _mm_storeu_si128((__m128i *)(target + index), _mm_packus_epi16(low, high));
    }
#endif
    for (; index < count; index++) {
        int offset = source[index] - 128;
        int value = 128 + (offset >= 0 ? (offset * 255 * 2 + 224) / 448 : -((-offset * 255 * 2 + 224) / 448));
        target[index] = (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
    }
}

#if CIMAGING_AVX2
// The same three loops 32 samples a step where the processor has AVX2 (the build targets plain x86-64, so
// SSE2 is all the compiler may assume). perf of a 1080p burst: the stretch and the split were an eighth of
// the processing thread's time beside libjpeg. Same arithmetic, same bytes out: the 256-bit unpacks and
// packs work within each 128-bit half, so a pack undoes its unpack's order; only the split, which packs
// two loads together, needs its halves put back in order.
__attribute__((target("avx2")))
static void split_pairs_avx2(const uint8_t *restrict pairs, uint8_t *restrict first, uint8_t *restrict second, size_t count) {
    const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
    size_t index = 0;
    for (; index + 32 <= count; index += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(pairs + 2 * index));
        __m256i b = _mm256_loadu_si256((const __m256i *)(pairs + 2 * index + 32));
        __m256i evens = _mm256_packus_epi16(_mm256_and_si256(a, low_bytes), _mm256_and_si256(b, low_bytes));
        __m256i odds = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
        _mm256_storeu_si256((__m256i *)(first + index), _mm256_permute4x64_epi64(evens, _MM_SHUFFLE(3, 1, 2, 0)));
        _mm256_storeu_si256((__m256i *)(second + index), _mm256_permute4x64_epi64(odds, _MM_SHUFFLE(3, 1, 2, 0)));
    }
    split_pairs(pairs + 2 * index, first + index, second + index, count - index);
}

__attribute__((target("avx2")))
static void expand_luma_avx2(const uint8_t *source, uint8_t *target, size_t count) {
    const __m256i zero = _mm256_setzero_si256(), sixteen = _mm256_set1_epi8(16), scale = _mm256_set1_epi16(596);
    const __m256i one = _mm256_set1_epi16(1);
    size_t index = 0;
    for (; index + 32 <= count; index += 32) {
        __m256i offset = _mm256_subs_epu8(_mm256_loadu_si256((const __m256i *)(source + index)), sixteen);
        __m256i low = _mm256_mulhi_epu16(_mm256_unpacklo_epi8(zero, offset), scale);
        __m256i high = _mm256_mulhi_epu16(_mm256_unpackhi_epi8(zero, offset), scale);
        low = _mm256_srli_epi16(_mm256_add_epi16(low, one), 1);
        high = _mm256_srli_epi16(_mm256_add_epi16(high, one), 1);
        _mm256_storeu_si256((__m256i *)(target + index), _mm256_packus_epi16(low, high));
    }
    expand_luma(source + index, target + index, count - index);
}

__attribute__((target("avx2")))
static void expand_chroma_avx2(const uint8_t *source, uint8_t *target, size_t count) {
    const __m256i zero = _mm256_setzero_si256(), bias = _mm256_set1_epi16(128), scale = _mm256_set1_epi16(1166);
    const __m256i one = _mm256_set1_epi16(1);
    size_t index = 0;
    for (; index + 32 <= count; index += 32) {
        __m256i samples = _mm256_loadu_si256((const __m256i *)(source + index));
        __m256i low = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_unpacklo_epi8(samples, zero), bias), 7);
        __m256i high = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_unpackhi_epi8(samples, zero), bias), 7);
        low = _mm256_add_epi16(_mm256_srai_epi16(_mm256_add_epi16(_mm256_mulhi_epi16(low, scale), one), 1), bias);
        high = _mm256_add_epi16(_mm256_srai_epi16(_mm256_add_epi16(_mm256_mulhi_epi16(high, scale), one), 1), bias);
        _mm256_storeu_si256((__m256i *)(target + index), _mm256_packus_epi16(low, high));
    }
    expand_chroma(source + index, target + index, count - index);
}

/// AVX2 in the processor and its 256-bit registers saved by the system (XGETBV), asked once.
static int has_avx2(void) {
    // Atomic, relaxed: photos are encoded in parallel, and first calls may race; each stores the same
    // answer, but a plain int read and written by two threads is a data race all the same.
    static int known = -1;
    int answer = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (answer >= 0) return answer;
    unsigned int eax, ebx, ecx, edx;
    int usable = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_OSXSAVE)) {
        unsigned int xcr0_low, xcr0_high;
        __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
        if ((xcr0_low & 6) == 6 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) usable = (ebx & bit_AVX2) != 0;
    }
    __atomic_store_n(&known, usable, __ATOMIC_RELAXED);
    return usable;
}
#endif

typedef void (*Expander)(const uint8_t *, uint8_t *, size_t);
typedef void (*Splitter)(const uint8_t *restrict, uint8_t *restrict, uint8_t *restrict, size_t);

static Expander luma_expander(void) {
#if CIMAGING_AVX2
    if (has_avx2()) return expand_luma_avx2;
#endif
    return expand_luma;
}

static Expander chroma_expander(void) {
#if CIMAGING_AVX2
    if (has_avx2()) return expand_chroma_avx2;
#endif
    return expand_chroma;
}

static Splitter pair_splitter(void) {
#if CIMAGING_AVX2
    if (has_avx2()) return split_pairs_avx2;
#endif
    return split_pairs;
}

static void pad_row(uint8_t *row, size_t width, size_t padded_width) {
    memset(row + width, row[width - 1], padded_width - width);
}

/// Points `rows` at the component's next `block_rows` rows from `first_row`: the frame's own rows, or
/// copies in scratch. Rows past the bottom repeat the last row, as libjpeg's own edge expansion does.
/// An interleaved chroma pair is filled together, by its first component (`partner`: the second).
static void component_fill(Component *component, Component *partner, size_t first_row) {
    for (size_t row = 0; row < component->block_rows; row++) {
        size_t source_row = first_row + row < component->height ? first_row + row : component->height - 1;
        const uint8_t *source = component->base + source_row * component->stride;
        if (component->scratch == NULL) {
            component->rows[row] = (JSAMPROW)source;
            continue;
        }
        uint8_t *target = component->scratch + row * component->padded_width;
        component->rows[row] = target;
        if (partner == NULL) {
            if (component->expand != NULL) {
                component->expand(source, target, component->width);
            } else {
                memcpy(target, source, component->width);
            }
        } else {
            uint8_t *second = partner->scratch + row * partner->padded_width;
            partner->rows[row] = second;
            // Both components point into the same plane, one byte apart: split from the lower address.
            if (component->base < partner->base) {
                component->split(source, target, second, component->width);
            } else {
                component->split(source - 1, second, target, component->width);
            }
            if (component->expand != NULL) {
                component->expand(target, target, component->width);
                partner->expand(second, second, partner->width);
            }
            pad_row(second, partner->width, partner->padded_width);
        }
        pad_row(target, component->width, component->padded_width);
    }
}

int CImaging_encode_jpeg(const CImagingYUVImage *image, int quality, const uint8_t *app1, size_t app1_length,
                         uint8_t **jpeg, size_t *jpeg_capacity, size_t *jpeg_length, char *error, size_t error_capacity) {
    *jpeg_length = 0;
    const int gray = image->layout == CImagingLayoutGray;
    const size_t width = (size_t)image->width, height = (size_t)image->height;
    if (width == 0 || height == 0 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION
        || image->chroma_shift_x < 0 || image->chroma_shift_x > 1 || image->chroma_shift_y < 0 || image->chroma_shift_y > 1
        || app1_length > 65533) {
        snprintf(error, error_capacity, "cannot encode a %zux%zu image (chroma shift %d,%d, %zu bytes of metadata)",
                 width, height, image->chroma_shift_x, image->chroma_shift_y, app1_length);
        return -1;
    }
    const size_t h_factor = gray ? 1 : (size_t)1 << image->chroma_shift_x;
    const size_t v_factor = gray ? 1 : (size_t)1 << image->chroma_shift_y;
    const int components = gray ? 1 : 3;
    const int interleaved = image->layout == CImagingLayoutInterleavedUV || image->layout == CImagingLayoutInterleavedVU;

    Component planes[3];
    memset(planes, 0, sizeof planes);
    for (int index = 0; index < components; index++) {
        Component *component = &planes[index];
        const int luma = index == 0;
        component->width = luma ? width : (width + h_factor - 1) / h_factor;
        component->height = luma ? height : (height + v_factor - 1) / v_factor;
        component->padded_width = round_up(width, 8 * h_factor) / (luma ? 1 : h_factor);
        component->block_rows = luma ? 8 * v_factor : 8;
        component->pixel_step = 1;
        if (image->limited_range) component->expand = luma ? luma_expander() : chroma_expander();
        if (luma) {
            component->base = image->planes[0];
            component->stride = image->strides[0];
        } else if (image->layout == CImagingLayoutPlanar) {
            component->base = image->planes[index];
            component->stride = image->strides[index];
        } else {
            // One interleaved plane: Cb first (UV order) or Cr first (VU order).
            const int cb_first = image->layout == CImagingLayoutInterleavedUV;
            component->base = image->planes[1] + ((index == 1) == cb_first ? 0 : 1);
            component->stride = image->strides[1];
            component->pixel_step = 2;
            component->split = pair_splitter();
        }
    }

    struct jpeg_compress_struct info;
    FailureHandler failure;
    GrowingDestination destination = {.data = jpeg, .capacity = jpeg_capacity};
    uint8_t *volatile scratch = NULL;
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = fail;
    CImaging_jpeg_keep_quiet(&failure.manager);
    if (setjmp(failure.jump)) {
        snprintf(error, error_capacity, "libjpeg: %s", failure.message);
        jpeg_destroy_compress(&info);
        free(scratch);
        return -1;
    }
    jpeg_create_compress(&info);

    size_t scratch_size = 0;
    for (int index = 0; index < components; index++) {
        Component *component = &planes[index];
        // In place only when libjpeg's padded reads stay inside the row the frame already has and the
        // samples need no stretching.
        if (component->pixel_step != 1 || component->padded_width != component->width || component->expand != NULL)
            scratch_size += component->block_rows * component->padded_width;
    }
    if (scratch_size > 0) {
        scratch = malloc(scratch_size);
        if (scratch == NULL) ERREXIT1(&info, JERR_OUT_OF_MEMORY, 2);
        uint8_t *next = scratch;
        for (int index = 0; index < components; index++) {
            Component *component = &planes[index];
            if (component->pixel_step != 1 || component->padded_width != component->width || component->expand != NULL) {
                component->scratch = next;
                next += component->block_rows * component->padded_width;
            }
        }
    }

    const size_t reserve = width * height * 3 / 2 + 65536;
    if (*jpeg_capacity < reserve) {
        // The old contents are not needed: free and allocate rather than have realloc copy them.
        free(*jpeg);
        *jpeg = malloc(reserve);
        *jpeg_capacity = *jpeg != NULL ? reserve : 0;
        if (*jpeg == NULL) ERREXIT1(&info, JERR_OUT_OF_MEMORY, 3);
    }
    destination.manager.init_destination = destination_start;
    destination.manager.empty_output_buffer = destination_grow;
    destination.manager.term_destination = destination_finish;
    info.dest = &destination.manager;

    info.image_width = (JDIMENSION)width;
    info.image_height = (JDIMENSION)height;
    info.input_components = components;
    info.in_color_space = gray ? JCS_GRAYSCALE : JCS_YCbCr;
    jpeg_set_defaults(&info);
    info.raw_data_in = TRUE;
    info.dct_method = JDCT_ISLOW;
    // EXIF's APP1 must follow SOI directly, where JFIF's APP0 would go.
    info.write_JFIF_header = app1_length == 0;
    info.comp_info[0].h_samp_factor = (int)h_factor;
    info.comp_info[0].v_samp_factor = (int)v_factor;
    for (int index = 1; index < components; index++) {
        info.comp_info[index].h_samp_factor = 1;
        info.comp_info[index].v_samp_factor = 1;
    }
    jpeg_set_quality(&info, quality, TRUE);
    jpeg_start_compress(&info, TRUE);
    if (app1_length > 0) jpeg_write_marker(&info, JPEG_APP0 + 1, app1, (unsigned int)app1_length);

    JSAMPARRAY rows[3] = {planes[0].rows, planes[1].rows, planes[2].rows};
    const size_t luma_rows = planes[0].block_rows;
    for (size_t row = 0; row < height; row += luma_rows) {
        component_fill(&planes[0], NULL, row);
        if (interleaved) {
            component_fill(&planes[1], &planes[2], row / v_factor);
        } else {
            for (int index = 1; index < components; index++) component_fill(&planes[index], NULL, row / v_factor);
        }
        // An interleaved pair's second component lies in the same rows as its first.
        for (int index = 0; index < (interleaved ? 2 : components); index++)
            component_prefetch(&planes[index], index == 0 ? row + luma_rows : (row + luma_rows) / v_factor);
        jpeg_write_raw_data(&info, rows, (JDIMENSION)luma_rows);
    }
    jpeg_finish_compress(&info);
    jpeg_destroy_compress(&info);
    free(scratch);
    *jpeg_length = destination.length;
    return 0;
}
