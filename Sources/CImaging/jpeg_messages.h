// Shared by the encoder (jpeg.c) and the thumbnailer (thumbnail.c); not part of the module's interface.
#ifndef CIMAGING_JPEG_MESSAGES_H
#define CIMAGING_JPEG_MESSAGES_H
#include <stdio.h>
#include <jpeglib.h>

/// Keeps libjpeg's warnings off stderr: by default output_message prints them ("Premature end of JPEG
/// file" for a truncated photo in a served gallery), mixed into the program's own messages. Errors still
/// reach error_exit, which says them in the caller's words.
void CImaging_jpeg_keep_quiet(struct jpeg_error_mgr *manager);
#endif
