// common/modelfile.h - the saved-model file (--save-model, pstrain eval):
// the model spec, the data's dimensions and every variable of the layout
// as a named tensor, little-endian, with a trailing CRC-32. The byte
// format, version 1, is in docs/FORMATS.md. Plain blocking file I/O; safe
// from any thread on distinct files.
#ifndef PT_COMMON_MODELFILE_H
#define PT_COMMON_MODELFILE_H

#include "common/layout.h"

#define PT_MODELFILE_VERSION 2u // 2: embedding tables after the tensors

// A table's rows in a model file: n ids ascending and their values (n x
// the table's dim). Rows not in the file read as their initial values,
// made from the job's seed (ps/rows.h), which the file keeps.
typedef struct pti_mrows {
	uint64_t n;
	uint64_t *ids;
	float *vals;
} pti_mrows;

// pti_modelfile_save writes params (l->n_params floats, borrowed for the
// call) of layout l to path, atomically: it writes path.tmp, flushes and
// fsyncs it, then renames it over path, so readers see the old file or
// the whole new one. The file is created readable by its owner only
// (0600). Returns 0, PT_EIO (path.tmp removed) or PT_ENOMEM, with a
// detail naming the file.
int pti_modelfile_save(const char *path, const pti_layout *l,
    const float *params);

// pti_modelfile_save_rows is pti_modelfile_save of a layout with tables:
// rows[t] (l->n_tables of them) holds table t's rows, and seed is the
// job's. pti_modelfile_load_rows is pti_modelfile_load that also gives
// the tables' rows into rows[0 .. l->n_tables) (malloc'd, the caller's,
// to pti_mrows_free) and the seed; pti_modelfile_load refuses a file
// with tables. Beyond pti_modelfile_load's checks, ids must ascend and
// their count fit the file.
int pti_modelfile_save_rows(const char *path, const pti_layout *l,
    const float *params, uint64_t seed, const pti_mrows *rows);
int pti_modelfile_load_rows(const char *path, pti_layout *l, float **params,
    uint64_t *seed, pti_mrows rows[PT_MAX_TABLES]);
void pti_mrows_free(pti_mrows *rows, uint32_t n);

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
