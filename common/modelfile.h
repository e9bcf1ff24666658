// common/modelfile.h - the saved-model file (--save-model, pstrain eval):
// the model spec, the data's dimensions and every variable of the layout
// as a named tensor, little-endian, with a trailing CRC-32. The byte
// format, version 1, is in docs/FORMATS.md. Plain blocking file I/O; safe
// from any thread on distinct files.
#ifndef PT_COMMON_MODELFILE_H
#define PT_COMMON_MODELFILE_H

#include "common/layout.h"

#define PT_MODELFILE_VERSION 1u

// pti_modelfile_save writes params (l->n_params floats, borrowed for the
// call) of layout l to path, atomically: it writes path.tmp, flushes and
// fsyncs it, then renames it over path, so readers see the old file or
// the whole new one. The file is created readable by its owner only
// (0600). Returns 0, PT_EIO (path.tmp removed) or PT_ENOMEM, with a
// detail naming the file.
int pti_modelfile_save(const char *path, const pti_layout *l,
    const float *params);

// pti_modelfile_load reads path, rebuilds *l with pti_layout_init from the
// spec and dimensions in the file, and returns the values in *params, a
// malloc'd (l->n_params) vector the caller frees. Returns 0; PT_ENOENT
// when path does not exist; PT_EIO when it cannot be read; PT_ECORRUPT
// for a wrong magic or version, a truncated file or trailing bytes, a
// checksum mismatch, a spec that does not parse, or tensors whose names
// or shapes disagree with that layout; PT_ENOMEM. Each failure leaves a
// detail naming the file and the reason. Lengths in the file are checked
// against the layout and the file size before anything is allocated.
// *l and *params are written only on success.
int pti_modelfile_load(const char *path, pti_layout *l, float **params);

#endif // PT_COMMON_MODELFILE_H
