// common/data.h - the training and test examples: Fashion-MNIST from its
// IDX files, or a seeded synthetic set, plus the epoch order and the
// gather of a minibatch into floats. Workers load the data; servers need
// only its dimensions (pti_data_dims), which come from the file headers.
//
// Everything random derives from the job seed through common/rng.h, so
// every process that loads the same spec with the same seed holds the
// same bytes and walks them in the same order. Nothing here keeps global
// state; every call is safe from any thread on its own arguments.
#ifndef PT_COMMON_DATA_H
#define PT_COMMON_DATA_H

#include <stddef.h>
#include <stdint.h>

// Bounds on what a file header may claim, checked before any allocation.
#define PT_DATA_MAX_N 10000000u     // examples in one file
#define PT_DATA_MAX_DIM 1000000u    // rows * cols of one image
#define PT_DATA_SYNTH_DIM 64u       // features of synthetic:N
#define PT_DATA_CLASSES 10u         // classes of every data set here

typedef struct pti_dataset {
	uint32_t n;       // examples
	uint32_t dim;     // features per example (784 for Fashion-MNIST);
			  // sparse: ids per example (the fields)
	uint32_t classes; // 10; a click set: 2
	uint8_t *x;       // (n, dim) raw values 0..255; features = x / 255;
			  // NULL for a sparse set
	uint8_t *y;       // (n) labels < classes (clicks: 0, 1)
	uint64_t *ids;    // (n, dim) a sparse set's ids (embedding rows), or
			  // NULL
	float *p;         // (n) a click set's planted click probabilities,
			  // or NULL
	// A hashed set (fashion-mnist:hashed) keeps its images in x, xdim
	// bytes each (rows of img_cols), and makes each example's dim ids
	// from them when gathered; 0 for the others (x then has dim bytes).
	uint32_t xdim, img_cols;
} pti_dataset;

#define PT_DATA_HASH_BITS 20 // a hashed set's ids lie in [0, 2^20)

// pti_dataset_sparse: d's examples are ids (a click or hashed set).
static inline int pti_dataset_sparse(const pti_dataset *d)
{
	return d->ids != NULL || d->img_cols != 0;
}

typedef struct pti_data {
	pti_dataset train, test;
	pti_dataset val; // held out of the training set; n = 0 when none
} pti_data;

// The stream that picks validation examples: fixed, not the job seed.
#define PT_DATA_HOLDOUT_SEED 0x76616c69646174ULL

// pti_data_load fills *out with the data that spec names:
//   "fashion-mnist"      the files of the Debian package
//                        dataset-fashion-mnist in
//                        /usr/share/datasets/fashion-mnist;
//   "fashion-mnist:DIR"  the same four files in DIR
//                        (train-images-idx3-ubyte.gz,
//                        train-labels-idx1-ubyte.gz,
//                        t10k-images-idx3-ubyte.gz,
//                        t10k-labels-idx1-ubyte.gz; plain, ungzipped
//                        contents under those names are read too);
//   "synthetic:N"        N training examples of 64 features around 10
//                        seeded class centres, and a test set of
//                        max(N/5, 1) examples from another stream;
//   "fashion-mnist:hashed[:DIR]"  the same images as sparse ids (their
//                        labels as they are): each image averaged over
//                        2 x 2 blocks, each block's intensity in 4 levels
//                        a field, and each pair of blocks side by side a
//                        field of their 16 level pairs, every (field,
//                        value) hashed into 2^20 ids: 378 ids an image
//                        of 28 x 28, the background's the most frequent;
//   "ctr:N,F,V[,SEED[,SKEW[,K]]]"  a sparse click set (common/ctr.h): N
//                        training examples of F ids each, clicks from a
//                        planted factorization machine, and a test set of
//                        max(N/5, 1) examples from another stream; SEED is
//                        the data's own, not the job's.
// Any image size is accepted from IDX files as long as train and test
// agree; labels must be below 10. Returns 0, PT_EINVAL for a bad spec,
// PT_ENOENT for a missing file, PT_EIO when reading fails, PT_ECORRUPT for
// contents that break the format, PT_ENOMEM; each failure leaves a detail
// naming the spec or the file. On success the caller owns the arrays and
// frees them with pti_data_fini; on failure *out is untouched.
int pti_data_load(pti_data *out, const char *spec, uint64_t seed);

// pti_data_sparse says whether spec names a sparse set (ids, not
// features): 1 or 0, without reading anything.
int pti_data_sparse(const char *spec);

// pti_data_dims writes the features (sparse: ids) per example and the
// classes of the data spec names, reading only the headers of the two image files, so a
// server can lay out the model without loading images. Returns the codes
// of pti_data_load; *dim and *classes are written only on success.
int pti_data_dims(const char *spec, uint32_t *dim, uint32_t *classes);

// pti_data_fini frees what pti_data_load gave and zeroes *d. It copes with a
// zeroed or half-built struct and may be called twice.
void pti_data_fini(pti_data *d);

// pti_data_holdout moves n_val examples of d->train, picked by a fixed
// seeded permutation (the same for every job seed), into d->val; both
// keep the examples' original order. n_val 0 does nothing. Returns 0,
// PT_EINVAL when n_val is not below the training set's size or d already
// has a validation set, PT_ENOMEM (d is then unchanged).
int pti_data_holdout(pti_data *d, uint32_t n_val);

// pti_idx_read_images reads an IDX image file (magic 0x00000803, then
// big-endian u32 n, rows, cols, then n*rows*cols bytes), gzipped or plain.
// Bytes after the announced pixels are refused as PT_ECORRUPT, since they
// mean the header and the data disagree. Returns the codes of
// pti_data_load. On success *x is a malloc'd (n, rows*cols) array the
// caller frees; on failure nothing is written.
int pti_idx_read_images(const char *path, uint8_t **x, uint32_t *n,
    uint32_t *rows, uint32_t *cols);

// pti_idx_read_labels reads an IDX label file (magic 0x00000801, then n,
// then n bytes) like pti_idx_read_images; it does not check label values.
// On success *y is a malloc'd (n) array the caller frees.
int pti_idx_read_labels(const char *path, uint8_t **y, uint32_t *n);

// pti_data_perm writes into out (n) the order in which epoch visits the
// examples: a Fisher-Yates shuffle of [0, n) driven by pti_rng stream
// (seed, 0x7065726d ^ epoch). The same (seed, epoch) gives the same
// permutation in every process.
void pti_data_perm(uint32_t *out, uint32_t n, uint64_t seed,
    uint64_t epoch);

// pti_data_gather writes examples idx[0..b) of d as floats x / 255 into
// xout (b, d->dim) and their labels into yout (b). Every idx[i] must be
// below d->n. No allocation.
void pti_data_gather(float *xout, uint8_t *yout, const pti_dataset *d,
    const uint32_t *idx, uint32_t b);

// pti_data_gather_ids is pti_data_gather for a sparse set: the examples'
// ids into ids (b, d->dim).
void pti_data_gather_ids(uint64_t *ids, uint8_t *yout, const pti_dataset *d,
    const uint32_t *idx, uint32_t b);

// pti_data_all_ids is every example's ids of a sparse set, (n, dim),
// malloc'd (the caller's), or NULL when out of memory.
uint64_t *pti_data_all_ids(const pti_dataset *d);

#endif // PT_COMMON_DATA_H
