// common/data.c - IDX readers, data specs, the synthetic set, epoch order
// and minibatch gather. Not a data pipeline: everything is loaded whole
// into memory once, and batches are copied out of it.
#include "common/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/ctr.h"
#include "common/err.h"
#include "common/rng.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_BYTES (1ull << 32)    // pixels in one file, 4 GiB
#define IDX_FIRST_ALLOC (16u << 20)   // grow past this only as data arrives
#define IDX_READ_CHUNK (1u << 30)     // gzread takes an unsigned, returns int
#define DATA_PATH_MAX 4096

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define SPEC_HELP "use fashion-mnist, fashion-mnist:DIR, synthetic:N or " \
		  "ctr:N,F,V[,SEED[,SKEW[,K]]]"

// Streams of the synthetic set. Their high bits are set, so they cannot
// meet the epoch streams 0x7065726d ^ epoch of pti_data_perm.
#define SYNTH_STREAM_CENTERS 0x73796e7468000001ull
#define SYNTH_STREAM_TRAIN 0x73796e7468000002ull
#define SYNTH_STREAM_TEST 0x73796e7468000003ull
#define SYNTH_NOISE_SD 0.15

static const char *const fashion_files[4] = {
	"train-images-idx3-ubyte.gz",
	"train-labels-idx1-ubyte.gz",
	"t10k-images-idx3-ubyte.gz",
	"t10k-labels-idx1-ubyte.gz",
};

// ---------------------------------------------------------------------
// IDX files
// ---------------------------------------------------------------------

static int idx_open(gzFile *out, const char *path)
{
	errno = 0;
	gzFile f = gzopen(path, "rb");
	if (f == NULL) {
		int e = errno;
		if (e == ENOENT)
			return pti_err_set(PT_ENOENT, "%s: %s", path,
			    strerror(e));
		if (e == 0 || e == ENOMEM)
			return pti_err_set(PT_ENOMEM, "%s: out of memory "
			    "opening the file", path);
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(e));
	}
	// Larger than the 8 KiB default: fewer read calls on 26 MB files.
	gzbuffer(f, 1u << 17);
	*out = f;
	return 0;
}

// idx_gz_error turns zlib's recorded error into our code and detail.
static int idx_gz_error(gzFile f, const char *path)
{
	int zerr = Z_OK;
	const char *msg = gzerror(f, &zerr);
	size_t plen = strlen(path);
	// zlib writes "PATH: what"; we add the path ourselves.
	if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
		msg += plen + 2;
	switch (zerr) {
	case Z_ERRNO:
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
	case Z_MEM_ERROR:
		return pti_err_set(PT_ENOMEM, "%s: zlib out of memory", path);
	case Z_BUF_ERROR:
		return pti_err_set(PT_ECORRUPT,
		    "%s: truncated: gzip stream cut short (%s)", path, msg);
	default:
		return pti_err_set(PT_ECORRUPT, "%s: gzip: %s", path, msg);
	}
}

// idx_read reads up to len bytes into buf and writes how many it got; a
// short count means end of file. Fails only when zlib reports an error.
static int idx_read(gzFile f, const char *path, uint8_t *buf, size_t len,
    size_t *got)
{
	size_t done = 0;
	while (done < len) {
		size_t want = len - done;
		if (want > IDX_READ_CHUNK)
			want = IDX_READ_CHUNK;
		int r = gzread(f, buf + done, (unsigned)want);
		if (r < 0)
			return idx_gz_error(f, path);
		if (r == 0) {
			int zerr = Z_OK;
			gzerror(f, &zerr);
			if (zerr != Z_OK)
				return idx_gz_error(f, path);
			break;
		}
		done += (size_t)r;
	}
	*got = done;
	return 0;
}

static uint32_t idx_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// idx_header reads the magic and n_words big-endian sizes after it.
static int idx_header(gzFile f, const char *path, uint32_t magic,
    uint32_t *words, int n_words)
{
	uint8_t buf[16];
	size_t want = 4 * (size_t)(n_words + 1), got;
	int rv;
	if ((rv = idx_read(f, path, buf, want, &got)) != 0)
		return rv;
	if (got >= 4 && idx_be32(buf) != magic) {
		uint32_t found = idx_be32(buf);
		const char *hint = "";
		if (found == IDX_MAGIC_IMAGES)
			hint = " (an IDX image file)";
		else if (found == IDX_MAGIC_LABELS)
			hint = " (an IDX label file)";
		return pti_err_set(PT_ECORRUPT,
		    "%s: bad magic 0x%08x%s, expected 0x%08x (IDX %s)", path,
		    found, hint, magic,
		    magic == IDX_MAGIC_IMAGES ? "images" : "labels");
	}
	if (got < want)
		return pti_err_set(PT_ECORRUPT,
		    "%s: truncated: expected %zu bytes of header, got %zu",
		    path, want, got);
	for (int i = 0; i < n_words; i++)
		words[i] = idx_be32(buf + 4 * (i + 1));
	return 0;
}

static int idx_check_count(const char *path, uint32_t n, const char *what)
{
	if (n == 0 || n > PT_DATA_MAX_N)
		return pti_err_set(PT_ECORRUPT,
		    "%s: header claims %u %s; expected 1 to %u", path, n, what,
		    PT_DATA_MAX_N);
	return 0;
}

// idx_image_header opens path and checks its header, leaving the file
// positioned at the first pixel.
static int idx_image_header(gzFile *out, const char *path, uint32_t *n,
    uint32_t *rows, uint32_t *cols)
{
	gzFile f;
	uint32_t w[3];
	int rv;
	if ((rv = idx_open(&f, path)) != 0)
		return rv;
	if ((rv = idx_header(f, path, IDX_MAGIC_IMAGES, w, 3)) != 0 ||
	    (rv = idx_check_count(path, w[0], "images")) != 0) {
		gzclose(f);
		return rv;
	}
	uint64_t dim = (uint64_t)w[1] * w[2];
	if (dim == 0 || dim > PT_DATA_MAX_DIM) {
		gzclose(f);
		return pti_err_set(PT_ECORRUPT,
		    "%s: images of %u x %u pixels; expected 1 to %u pixels",
		    path, w[1], w[2], PT_DATA_MAX_DIM);
	}
	if ((uint64_t)w[0] * dim > IDX_MAX_BYTES) {
		gzclose(f);
		return pti_err_set(PT_ECORRUPT,
		    "%s: %u images of %u x %u pixels exceed the %llu bytes "
		    "allowed", path, w[0], w[1], w[2],
		    (unsigned long long)IDX_MAX_BYTES);
	}
	*out = f;
	*n = w[0];
	*rows = w[1];
	*cols = w[2];
	return 0;
}

// idx_payload reads exactly len bytes of `what` and checks that nothing
// follows them. The buffer grows only as bytes arrive, so a header that
// overstates the size costs at most twice what the file really holds.
static int idx_payload(gzFile f, const char *path, size_t len,
    const char *what, uint8_t **out)
{
	size_t cap = len < IDX_FIRST_ALLOC ? len : IDX_FIRST_ALLOC, used = 0;
	uint8_t *buf = malloc(cap), extra;
	int rv;
	if (buf == NULL)
		return pti_err_set(PT_ENOMEM,
		    "%s: out of memory for %zu bytes of %s", path, cap, what);
	for (;;) {
		size_t got = 0;
		rv = idx_read(f, path, buf + used, cap - used, &got);
		if (rv != 0)
			goto fail;
		used += got;
		if (used < cap) {
			rv = pti_err_set(PT_ECORRUPT,
			    "%s: truncated: expected %zu bytes of %s, got %zu",
			    path, len, what, used);
			goto fail;
		}
		if (used == len)
			break;
		size_t ncap = cap * 2 < len ? cap * 2 : len;
		uint8_t *nbuf = realloc(buf, ncap);
		if (nbuf == NULL) {
			rv = pti_err_set(PT_ENOMEM,
			    "%s: out of memory for %zu bytes of %s", path,
			    ncap, what);
			goto fail;
		}
		buf = nbuf;
		cap = ncap;
	}
	// Reading on to the end also makes zlib check the gzip CRC.
	size_t got;
	if ((rv = idx_read(f, path, &extra, 1, &got)) != 0)
		goto fail;
	if (got != 0) {
		rv = pti_err_set(PT_ECORRUPT,
		    "%s: trailing bytes after the %zu bytes of %s the header "
		    "announces", path, len, what);
		goto fail;
	}
	*out = buf;
	return 0;
fail:
	free(buf);
	return rv;
}

int pti_idx_read_images(const char *path, uint8_t **x, uint32_t *n,
    uint32_t *rows, uint32_t *cols)
{
	gzFile f;
	uint32_t hn, hr, hc;
	uint8_t *buf;
	int rv;
	if ((rv = idx_image_header(&f, path, &hn, &hr, &hc)) != 0)
		return rv;
	rv = idx_payload(f, path, (size_t)hn * hr * hc, "pixels", &buf);
	gzclose(f);
	if (rv != 0)
		return rv;
	*x = buf;
	*n = hn;
	*rows = hr;
	*cols = hc;
	return 0;
}

int pti_idx_read_labels(const char *path, uint8_t **y, uint32_t *n)
{
	gzFile f;
	uint32_t hn = 0;
	uint8_t *buf;
	int rv;
	if ((rv = idx_open(&f, path)) != 0)
		return rv;
	if ((rv = idx_header(f, path, IDX_MAGIC_LABELS, &hn, 1)) != 0 ||
	    (rv = idx_check_count(path, hn, "labels")) != 0 ||
	    (rv = idx_payload(f, path, hn, "labels", &buf)) != 0) {
		gzclose(f);
		return rv;
	}
	gzclose(f);
	*y = buf;
	*n = hn;
	return 0;
}

// ---------------------------------------------------------------------
// Specs
// ---------------------------------------------------------------------

enum { SPEC_FASHION = 1, SPEC_SYNTH = 2, SPEC_CTR = 3, SPEC_HASHED = 4 };

typedef struct data_spec {
	int kind;
	const char *dir; // SPEC_FASHION: points into the spec or FASHION_DIR
	uint32_t n;      // SPEC_SYNTH: training examples
	pti_ctr_spec ctr; // SPEC_CTR
} data_spec;

static int spec_parse(data_spec *out, const char *spec)
{
	data_spec s = {0};
	if (spec == NULL || *spec == '\0')
		return pti_err_set(PT_EINVAL, "--data: no data set given (%s)",
		    SPEC_HELP);
	if (strcmp(spec, "fashion-mnist") == 0) {
		s.kind = SPEC_FASHION;
		s.dir = FASHION_DIR;
	} else if (strcmp(spec, "fashion-mnist:hashed") == 0 ||
		   strncmp(spec, "fashion-mnist:hashed:", 21) == 0) {
		s.kind = SPEC_HASHED;
		s.dir = spec[20] == ':' ? spec + 21 : FASHION_DIR;
		if (*s.dir == '\0' || strlen(s.dir) > DATA_PATH_MAX - 64)
			return pti_err_set(PT_EINVAL, "--data %s: a directory "
			    "of 1 to %d bytes after hashed:", spec,
			    DATA_PATH_MAX - 64);
	} else if (strncmp(spec, "fashion-mnist:", 14) == 0) {
		s.kind = SPEC_FASHION;
		s.dir = spec + 14;
		if (*s.dir == '\0')
			return pti_err_set(PT_EINVAL, "--data %s needs a "
			    "directory, as in fashion-mnist:/data/fmnist",
			    spec);
		if (strlen(s.dir) > DATA_PATH_MAX - 64)
			return pti_err_set(PT_EINVAL, "--data: directory "
			    "longer than %d bytes", DATA_PATH_MAX - 64);
	} else if (strncmp(spec, "synthetic:", 10) == 0) {
		const char *p = spec + 10;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		// strtoull skips blanks and takes a sign; we want bare digits.
		if (*p < '0' || *p > '9' || *end != '\0' || errno != 0 ||
		    v == 0 || v > PT_DATA_MAX_N)
			return pti_err_set(PT_EINVAL, "--data %s: N must be a "
			    "whole number from 1 to %u, as in synthetic:5000",
			    spec, PT_DATA_MAX_N);
		s.kind = SPEC_SYNTH;
		s.n = (uint32_t)v;
	} else if (strncmp(spec, "ctr:", 4) == 0) {
		int rv = pti_ctr_parse(spec, &s.ctr);
		if (rv != 0)
			return rv;
		s.kind = SPEC_CTR;
	} else {
		return pti_err_set(PT_EINVAL,
		    "--data %s: unknown data set (%s)", spec, SPEC_HELP);
	}
	*out = s;
	return 0;
}

static void spec_path(char *out, const char *dir, int file)
{
	size_t len = strlen(dir);
	const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
	snprintf(out, DATA_PATH_MAX, "%s%s%s", dir, sep, fashion_files[file]);
}

// ---------------------------------------------------------------------
// Fashion-MNIST
// ---------------------------------------------------------------------

static int fashion_split(pti_dataset *d, uint32_t *rows, uint32_t *cols,
    const char *dir, int images_file)
{
	char ipath[DATA_PATH_MAX], lpath[DATA_PATH_MAX];
	uint32_t n_images, n_labels;
	int rv;
	spec_path(ipath, dir, images_file);
	spec_path(lpath, dir, images_file + 1);
	if ((rv = pti_idx_read_images(ipath, &d->x, &n_images, rows,
	    cols)) != 0)
		return rv;
	d->n = n_images;
	d->dim = *rows * *cols;
	d->classes = PT_DATA_CLASSES;
	if ((rv = pti_idx_read_labels(lpath, &d->y, &n_labels)) != 0)
		return rv;
	if (n_labels != n_images)
		return pti_err_set(PT_ECORRUPT,
		    "%s has %u images but %s has %u labels", ipath, n_images,
		    lpath, n_labels);
	for (uint32_t i = 0; i < d->n; i++)
		if (d->y[i] >= d->classes)
			return pti_err_set(PT_ECORRUPT,
			    "%s: label %u of example %u is not below %u",
			    lpath, d->y[i], i, d->classes);
	return 0;
}

static int fashion_dims_differ(const char *dir, uint32_t r0, uint32_t c0,
    uint32_t r1, uint32_t c1)
{
	char p0[DATA_PATH_MAX], p1[DATA_PATH_MAX];
	spec_path(p0, dir, 0);
	spec_path(p1, dir, 2);
	return pti_err_set(PT_ECORRUPT,
	    "%s has %u x %u images but %s has %u x %u", p0, r0, c0, p1, r1,
	    c1);
}

static int fashion_load(pti_data *d, const char *dir)
{
	uint32_t r0, c0, r1, c1;
	int rv;
	if ((rv = fashion_split(&d->train, &r0, &c0, dir, 0)) != 0 ||
	    (rv = fashion_split(&d->test, &r1, &c1, dir, 2)) != 0)
		return rv;
	if (r0 != r1 || c0 != c1)
		return fashion_dims_differ(dir, r0, c0, r1, c1);
	return 0;
}

static int fashion_dims(const char *dir, uint32_t *dim)
{
	char path[DATA_PATH_MAX];
	uint32_t n, r[2], c[2];
	int rv;
	for (int i = 0; i < 2; i++) {
		gzFile f;
		spec_path(path, dir, 2 * i);
		if ((rv = idx_image_header(&f, path, &n, &r[i], &c[i])) != 0)
			return rv;
		gzclose(f);
	}
	if (r[0] != r[1] || c[0] != c[1])
		return fashion_dims_differ(dir, r[0], c[0], r[1], c[1]);
	*dim = r[0] * c[0];
	return 0;
}

// ---------------------------------------------------------------------
// Synthetic
// ---------------------------------------------------------------------

// synth_split draws n examples around centers (classes, dim) from stream.
static int synth_split(pti_dataset *d, const double *centers, uint32_t n,
    uint64_t seed, uint64_t stream)
{
	const uint32_t dim = PT_DATA_SYNTH_DIM;
	pti_rng r;
	d->n = n;
	d->dim = dim;
	d->classes = PT_DATA_CLASSES;
	d->x = malloc((size_t)n * dim);
	d->y = malloc(n);
	if (d->x == NULL || d->y == NULL)
		return pti_err_set(PT_ENOMEM,
		    "synthetic: out of memory for %u examples of %u features",
		    n, dim);
	pti_rng_seed(&r, seed, stream);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)pti_rng_below(&r, PT_DATA_CLASSES);
		const double *mu = centers + (size_t)c * dim;
		uint8_t *x = d->x + (size_t)i * dim;
		d->y[i] = c;
		for (uint32_t j = 0; j < dim; j++) {
			double v = mu[j] + SYNTH_NOISE_SD * pti_rng_normal(&r);
			v = v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v;
			x[j] = (uint8_t)(v * 255.0 + 0.5);
		}
	}
	return 0;
}

// ---------------------------------------------------------------------
// Hashed (fashion-mnist:hashed)
// ---------------------------------------------------------------------

// hashed_fields: the ids of an image of rows x cols: a field per 2 x 2
// block, and one per pair of blocks side by side.
static uint32_t hashed_fields(uint32_t rows, uint32_t cols)
{
	uint32_t hr = rows / 2 > 0 ? rows / 2 : 1, hc = cols / 2 > 0 ? cols / 2
								   : 1;
	return hr * hc + hr * (hc - 1);
}

// block_level: the intensity of block (i, j) of image x (cols wide), 0-3.
static unsigned block_level(const uint8_t *x, uint32_t rows, uint32_t cols,
    uint32_t i, uint32_t j)
{
	unsigned sum = 0, n = 0;
	for (uint32_t a = 2 * i; a < 2 * i + 2 && a < rows; a++)
		for (uint32_t b = 2 * j; b < 2 * j + 2 && b < cols; b++)
			sum += x[a * cols + b], n++;
	return (sum / (n > 0 ? n : 1)) >> 6;
}

static uint64_t hashed_id(uint32_t field, unsigned value)
{
	return pti_mix64(((uint64_t)field << 8 | value) ^ 0x68617368ULL) &
	       ((1ULL << PT_DATA_HASH_BITS) - 1);
}

// hashed_ids writes the ids of example x (xdim bytes, img_cols wide) of
// d into out (d->dim of them).
static void hashed_ids(const pti_dataset *d, const uint8_t *x, uint64_t *out)
{
	uint32_t cols = d->img_cols, rows = d->xdim / cols;
	uint32_t hr = rows / 2 > 0 ? rows / 2 : 1, hc = cols / 2 > 0 ? cols / 2
								   : 1;
	uint32_t f = 0;
	for (uint32_t i = 0; i < hr; i++)
		for (uint32_t j = 0; j < hc; j++, f++)
			out[f] = hashed_id(f, block_level(x, rows, cols, i, j));
	for (uint32_t i = 0; i < hr; i++)
		for (uint32_t j = 0; j + 1 < hc; j++, f++)
			out[f] = hashed_id(f,
			    block_level(x, rows, cols, i, j) << 2 |
				block_level(x, rows, cols, i, j + 1));
}

// hashed_of makes d's images hashed sets (their pixels stay in x).
static int hashed_of(pti_data *d)
{
	pti_dataset *s[2] = {&d->train, &d->test};
	uint32_t side = (uint32_t)sqrt((double)d->train.dim);
	if (side * side != d->train.dim)
		return pti_err_set(PT_EINVAL, "fashion-mnist:hashed: images of "
		    "%u pixels are not square", d->train.dim);
	for (int i = 0; i < 2; i++) {
		s[i]->xdim = s[i]->dim;
		s[i]->img_cols = side;
		s[i]->dim = hashed_fields(side, side);
	}
	return 0;
}

// ctr_set moves a drawn click set into s.
static void ctr_set(pti_dataset *s, pti_ctr *c)
{
	*s = (pti_dataset){c->n, c->fields, 2, NULL, c->y, c->ids, c->p, 0, 0};
	memset(c, 0, sizeof(*c));
}

// ctr_load draws the click set of spec: train stream 0, test stream 1.
static int ctr_load(pti_data *d, const pti_ctr_spec *spec)
{
	pti_ctr tr, te;
	int rv = pti_ctr_make(&tr, spec, spec->n, 0);
	if (rv != 0)
		return rv;
	if ((rv = pti_ctr_make(&te, spec, spec->n / 5 > 0 ? spec->n / 5 : 1,
		 1)) != 0) {
		pti_ctr_free(&tr);
		return rv;
	}
	ctr_set(&d->train, &tr);
	ctr_set(&d->test, &te);
	return 0;
}

static int synth_load(pti_data *d, uint32_t n, uint64_t seed)
{
	double centers[PT_DATA_CLASSES * PT_DATA_SYNTH_DIM];
	pti_rng r;
	int rv;
	pti_rng_seed(&r, seed, SYNTH_STREAM_CENTERS);
	for (size_t i = 0; i < PT_DATA_CLASSES * PT_DATA_SYNTH_DIM; i++)
		centers[i] = 0.2 + 0.6 * pti_rng_unit(&r);
	uint32_t n_test = n / 5 > 0 ? n / 5 : 1;
	if ((rv = synth_split(&d->train, centers, n, seed,
	    SYNTH_STREAM_TRAIN)) != 0 ||
	    (rv = synth_split(&d->test, centers, n_test, seed,
	    SYNTH_STREAM_TEST)) != 0)
		return rv;
	return 0;
}

// ---------------------------------------------------------------------
// Public calls
// ---------------------------------------------------------------------

int pti_data_load(pti_data *out, const char *spec, uint64_t seed)
{
	pti_data d;
	data_spec s = {0};
	int rv;
	memset(&d, 0, sizeof(d));
	if ((rv = spec_parse(&s, spec)) != 0)
		return rv;
	if (s.kind == SPEC_FASHION || s.kind == SPEC_HASHED)
		rv = fashion_load(&d, s.dir);
	else if (s.kind == SPEC_CTR)
		rv = ctr_load(&d, &s.ctr);
	else
		rv = synth_load(&d, s.n, seed);
	if (rv == 0 && s.kind == SPEC_HASHED)
		rv = hashed_of(&d);
	if (rv != 0) {
		pti_data_fini(&d);
		return rv;
	}
	*out = d;
	return 0;
}

int pti_data_sparse(const char *spec)
{
	return spec != NULL && (strncmp(spec, "ctr:", 4) == 0 ||
				   strncmp(spec, "fashion-mnist:hashed", 20) == 0);
}

int pti_data_dims(const char *spec, uint32_t *dim, uint32_t *classes)
{
	data_spec s = {0};
	uint32_t dm = PT_DATA_SYNTH_DIM;
	int rv;
	if ((rv = spec_parse(&s, spec)) != 0)
		return rv;
	if ((s.kind == SPEC_FASHION || s.kind == SPEC_HASHED) &&
	    (rv = fashion_dims(s.dir, &dm)) != 0)
		return rv;
	if (s.kind == SPEC_HASHED) {
		uint32_t side = (uint32_t)sqrt((double)dm);
		if (side * side != dm)
			return pti_err_set(PT_EINVAL, "--data %s: images of %u "
			    "pixels are not square", spec, dm);
		dm = hashed_fields(side, side);
	}
	*dim = s.kind == SPEC_CTR ? s.ctr.fields : dm;
	*classes = s.kind == SPEC_CTR ? 2 : PT_DATA_CLASSES;
	return 0;
}

static void set_free(pti_dataset *s)
{
	free(s->x);
	free(s->y);
	free(s->ids);
	free(s->p);
}

void pti_data_fini(pti_data *d)
{
	set_free(&d->train);
	set_free(&d->val);
	set_free(&d->test);
	memset(d, 0, sizeof(*d));
}

// XDIM: the bytes of an example in x.
#define XDIM(d) ((size_t)((d)->xdim ? (d)->xdim : (d)->dim))

// set_alloc makes room for n examples shaped like `like`: the arrays it
// has, no others. 0, or -1 when memory ran out (what was made is freed).
static int set_alloc(pti_dataset *s, const pti_dataset *like, uint32_t n)
{
	*s = (pti_dataset){n, like->dim, like->classes, NULL, NULL, NULL,
	    NULL, like->xdim, like->img_cols};
	size_t k = n > 0 ? n : 1;
	if ((like->x && !(s->x = malloc(k * XDIM(like)))) ||
	    !(s->y = malloc(k)) ||
	    (like->ids && !(s->ids = malloc(k * like->dim * 8))) ||
	    (like->p && !(s->p = malloc(k * sizeof(float))))) {
		set_free(s);
		return -1;
	}
	return 0;
}

// set_copy copies example i of from to example at of to.
static void set_copy(pti_dataset *to, uint32_t at, const pti_dataset *from,
    uint32_t i)
{
	size_t dim = from->dim, xd = XDIM(from);
	if (from->x)
		memcpy(to->x + at * xd, from->x + i * xd, xd);
	if (from->ids)
		memcpy(to->ids + at * dim, from->ids + i * dim, dim * 8);
	if (from->p)
		to->p[at] = from->p[i];
	to->y[at] = from->y[i];
}

int pti_data_holdout(pti_data *d, uint32_t n_val)
{
	pti_dataset *tr = &d->train;
	if (n_val == 0)
		return 0;
	if (n_val >= tr->n || d->val.n != 0)
		return pti_err_set(PT_EINVAL, "cannot hold out %u of %u "
		    "training examples", n_val, tr->n);
	uint32_t n_tr = tr->n - n_val, *perm = malloc(tr->n * sizeof(*perm));
	uint8_t *is_val = calloc(tr->n, 1);
	pti_dataset v, t;
	int no_v = set_alloc(&v, tr, n_val), no_t = set_alloc(&t, tr, n_tr);
	if (!perm || !is_val || no_v || no_t) {
		free(perm), free(is_val);
		if (!no_v)
			set_free(&v);
		if (!no_t)
			set_free(&t);
		return pti_err_set(PT_ENOMEM, "validation split");
	}
	// A fixed stream, not the job seed: every seed of a comparison
	// holds out the same examples, so their validation scores compare.
	pti_data_perm(perm, tr->n, PT_DATA_HOLDOUT_SEED, 0);
	for (uint32_t i = 0; i < n_val; i++)
		is_val[perm[i]] = 1;
	// Both parts keep the original order of the examples.
	uint32_t iv = 0, it = 0;
	for (uint32_t i = 0; i < tr->n; i++)
		set_copy(is_val[i] ? &v : &t, is_val[i] ? iv++ : it++, tr, i);
	free(perm);
	free(is_val);
	set_free(tr);
	d->train = t;
	d->val = v;
	return 0;
}

void pti_data_perm(uint32_t *out, uint32_t n, uint64_t seed,
    uint64_t epoch)
{
	pti_rng r;
	pti_rng_seed(&r, seed, 0x7065726dull ^ epoch);
	for (uint32_t i = 0; i < n; i++)
		out[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = pti_rng_below(&r, i);
		uint32_t t = out[i - 1];
		out[i - 1] = out[j];
		out[j] = t;
	}
}

// gather_row writes pixel bytes as the model sees them, v / 255. A true
// division, not a multiply by 1/255 (which rounds differently for some
// bytes): the loop vectorizes, and is faster than a look-up table.
static void gather_row(float *restrict o, const uint8_t *restrict x,
    size_t dim)
{
	for (size_t j = 0; j < dim; j++)
		o[j] = (float)x[j] / 255.0f;
}

void pti_data_gather_ids(uint64_t *ids, uint8_t *yout, const pti_dataset *d,
    const uint32_t *idx, uint32_t b)
{
	const size_t dim = d->dim;
	for (uint32_t i = 0; i < b; i++) {
		if (d->ids != NULL)
			memcpy(ids + (size_t)i * dim,
			    d->ids + (size_t)idx[i] * dim, dim * sizeof(*ids));
		else
			hashed_ids(d, d->x + (size_t)idx[i] * d->xdim,
			    ids + (size_t)i * dim);
		if (yout != NULL)
			yout[i] = d->y[idx[i]];
	}
}

uint64_t *pti_data_all_ids(const pti_dataset *d)
{
	uint64_t *ids = malloc(((size_t)d->n * d->dim + 1) * sizeof(*ids));
	if (ids == NULL)
		return NULL;
	for (uint32_t i = 0; i < d->n; i++)
		pti_data_gather_ids(ids + (size_t)i * d->dim, NULL, d, &i, 1);
	return ids;
}

void pti_data_gather(float *xout, uint8_t *yout, const pti_dataset *d,
    const uint32_t *idx, uint32_t b)
{
	const size_t dim = d->dim;
	for (uint32_t i = 0; i < b; i++)
		gather_row(xout + (size_t)i * dim, d->x + (size_t)idx[i] * dim,
		    dim);
	for (uint32_t i = 0; i < b; i++)
		yout[i] = d->y[idx[i]];
}
