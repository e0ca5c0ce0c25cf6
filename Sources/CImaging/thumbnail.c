// Small pictures of big JPEGs for a gallery. libjpeg decodes at 1/2, 1/4 or 1/8 of the size by dropping DCT
// coefficients, so a 12-megapixel photo is never decoded whole: only the scaled rows exist, then a box
// filter brings them down to the size asked for.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

#include "CImaging.h"
#include "jpeg_messages.h"

typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
} ThumbnailFailure;

static void thumbnail_fail(j_common_ptr info) {
    ThumbnailFailure *failure = (ThumbnailFailure *)info->err;
    longjmp(failure->jump, 1);
}

static void copy_message(j_common_ptr info, char *error, size_t error_capacity) {
    char message[JMSG_LENGTH_MAX];
    (*info->err->format_message)(info, message);
    if (error_capacity > 0) snprintf(error, error_capacity, "%s", message);
}

/// The picture `pixels` (RGB, `width` x `height`) as EXIF `orientation` says it is shown, in a new block;
/// `*shown_width/height` are its sides after the turn (swapped for 5 to 8). NULL when out of memory.
static uint8_t *orient(const uint8_t *pixels, int width, int height, int orientation, int *shown_width, int *shown_height) {
    int turned = orientation >= 5 && orientation <= 8;
    int out_width = turned ? height : width, out_height = turned ? width : height;
    uint8_t *out = malloc((size_t)out_width * 3 * (size_t)out_height);
    if (out == NULL) return NULL;
    for (int y = 0; y < out_height; y++) {
        for (int x = 0; x < out_width; x++) {
            int sx, sy; // the stored pixel shown at (x, y)
            switch (orientation) {
            case 2: sx = width - 1 - x; sy = y; break;
            case 3: sx = width - 1 - x; sy = height - 1 - y; break;
            case 4: sx = x; sy = height - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = height - 1 - x; break;
            case 7: sx = width - 1 - y; sy = height - 1 - x; break;
            case 8: sx = width - 1 - y; sy = x; break;
            default: sx = x; sy = y; break;
            }
            memcpy(out + ((size_t)y * out_width + x) * 3, pixels + ((size_t)sy * width + sx) * 3, 3);
        }
    }
    *shown_width = out_width;
    *shown_height = out_height;
    return out;
}

int CImaging_jpeg_thumbnail(const uint8_t *jpeg, size_t jpeg_length, int max_dimension, int quality, int orientation,
                            uint8_t **thumbnail, size_t *thumbnail_length, int *decoded_width, int *decoded_height,
                            char *error, size_t error_capacity) {
    struct jpeg_decompress_struct decoder;
    struct jpeg_compress_struct encoder;
    ThumbnailFailure decode_failure, encode_failure;
    // volatile: read after a longjmp back into this frame.
    uint8_t *volatile scaled = NULL;
    uint8_t *volatile small = NULL;
    unsigned char *volatile output = NULL;
    unsigned long output_length = 0;
    int encoder_made = 0;

    *thumbnail = NULL;
    *thumbnail_length = 0;
    if (max_dimension < 8 || jpeg_length < 4) {
        snprintf(error, error_capacity, "nothing to decode, or a size under 8 pixels");
        return -1;
    }
    decoder.err = jpeg_std_error(&decode_failure.manager);
    decode_failure.manager.error_exit = thumbnail_fail;
    CImaging_jpeg_keep_quiet(&decode_failure.manager);
    if (setjmp(decode_failure.jump)) {
        copy_message((j_common_ptr)&decoder, error, error_capacity);
        jpeg_destroy_decompress(&decoder);
        free(scaled);
        free(small);
        return -1;
    }
    jpeg_create_decompress(&decoder);
    jpeg_mem_src(&decoder, jpeg, (unsigned long)jpeg_length);
    jpeg_read_header(&decoder, TRUE);
    decoder.out_color_space = JCS_RGB;
    // The smallest of libjpeg's scales that still gives at least max_dimension on the longer side.
    unsigned int longer = decoder.image_width > decoder.image_height ? decoder.image_width : decoder.image_height;
    decoder.scale_num = 1;
    decoder.scale_denom = 1;
    for (unsigned int denominator = 8; denominator > 1; denominator /= 2) {
        if (longer / denominator >= (unsigned int)max_dimension) { decoder.scale_denom = denominator; break; }
    }
    decoder.dct_method = JDCT_IFAST;
    jpeg_start_decompress(&decoder);
    int width = (int)decoder.output_width, height = (int)decoder.output_height;
    size_t row_bytes = (size_t)width * 3;
    scaled = malloc(row_bytes * (size_t)height);
    if (scaled == NULL) ERREXIT1(&decoder, JERR_OUT_OF_MEMORY, 1);
    while (decoder.output_scanline < decoder.output_height) {
        JSAMPROW row = scaled + row_bytes * decoder.output_scanline;
        jpeg_read_scanlines(&decoder, &row, 1);
    }
    jpeg_finish_decompress(&decoder);
    jpeg_destroy_decompress(&decoder);
    *decoded_width = width;
    *decoded_height = height;

    // Box filter down to max_dimension on the longer side (each output pixel the mean of the ones it covers).
    int longest = width > height ? width : height;
    int out_width = width, out_height = height;
    if (longest > max_dimension) {
        // Rounded, not truncated: a 640x480 photo filling 100x100 is 133x100, not 133x99.
        out_width = (int)(((long)width * max_dimension + longest / 2) / longest);
        out_height = (int)(((long)height * max_dimension + longest / 2) / longest);
        if (out_width < 1) out_width = 1;
        if (out_height < 1) out_height = 1;
    }
    small = malloc((size_t)out_width * 3 * (size_t)out_height);
    if (small == NULL) {
        free(scaled);
        snprintf(error, error_capacity, "out of memory");
        return -1;
    }
    for (int y = 0; y < out_height; y++) {
        int y0 = (int)((long)y * height / out_height), y1 = (int)((long)(y + 1) * height / out_height);
        if (y1 <= y0) y1 = y0 + 1;
        for (int x = 0; x < out_width; x++) {
            int x0 = (int)((long)x * width / out_width), x1 = (int)((long)(x + 1) * width / out_width);
            if (x1 <= x0) x1 = x0 + 1;
            unsigned long sums[3] = {0, 0, 0};
            for (int yy = y0; yy < y1; yy++) {
                const uint8_t *pixel = scaled + row_bytes * yy + (size_t)x0 * 3;
                for (int xx = x0; xx < x1; xx++, pixel += 3) {
                    sums[0] += pixel[0];
                    sums[1] += pixel[1];
                    sums[2] += pixel[2];
                }
            }
            unsigned long count = (unsigned long)(x1 - x0) * (unsigned long)(y1 - y0);
            uint8_t *target = small + ((size_t)y * out_width + x) * 3;
            for (int c = 0; c < 3; c++) target[c] = (uint8_t)((sums[c] + count / 2) / count);
        }
    }
    free(scaled);
    scaled = NULL;
    if (orientation >= 2 && orientation <= 8) {
        uint8_t *shown = orient(small, out_width, out_height, orientation, &out_width, &out_height);
        free(small);
        small = shown;
        if (small == NULL) {
            snprintf(error, error_capacity, "out of memory");
            return -1;
        }
    }

    encoder.err = jpeg_std_error(&encode_failure.manager);
    encode_failure.manager.error_exit = thumbnail_fail;
    CImaging_jpeg_keep_quiet(&encode_failure.manager);
    if (setjmp(encode_failure.jump)) {
        copy_message((j_common_ptr)&encoder, error, error_capacity);
        if (encoder_made) jpeg_destroy_compress(&encoder);
        free(small);
        free(output);
        return -1;
    }
    jpeg_create_compress(&encoder);
    encoder_made = 1;
    unsigned char *buffer = NULL;
    jpeg_mem_dest(&encoder, &buffer, &output_length);
    encoder.image_width = (JDIMENSION)out_width;
    encoder.image_height = (JDIMENSION)out_height;
    encoder.input_components = 3;
    encoder.in_color_space = JCS_RGB;
    jpeg_set_defaults(&encoder);
    jpeg_set_quality(&encoder, quality, TRUE);
    jpeg_start_compress(&encoder, TRUE);
    while (encoder.next_scanline < encoder.image_height) {
        JSAMPROW row = small + (size_t)encoder.next_scanline * out_width * 3;
        jpeg_write_scanlines(&encoder, &row, 1);
    }
    jpeg_finish_compress(&encoder);
    output = buffer;
    jpeg_destroy_compress(&encoder);
    free(small);
    *thumbnail = output;
    *thumbnail_length = output_length;
    return 0;
}
