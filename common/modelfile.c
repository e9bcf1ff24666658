// common/modelfile.c - write and read the saved-model file. Every field
// is encoded byte by byte as little-endian, so files move between hosts;
// the CRC-32 runs over the bytes as they are written or read.
//
// The reader trusts nothing before it has checked it: lengths are capped,
// the layout is rebuilt from the spec, and the file size must be exactly
// what that layout needs before the value vector is allocated.
#include "common/modelfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>
#include <zlib.h>

#include "common/afile.h"
#include "common/err.h"

static const char modelfile_magic[8] = "PSTRAIN"; // and its NUL

#define MODELFILE_CHUNK 1024 // floats encoded or decoded per I/O call

static void modelfile_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t modelfile_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

// modelfile_dims gives ndim and dims of variable i of l as the file
// stores them: vars alternate w_l (rows, cols) and b_l (cols).
static uint32_t modelfile_dims(const pti_layout *l, uint32_t i,
    uint32_t dims[2])
{
	const pti_var *v = &l->vars[i];
	if (l->kind == PT_MODEL_FM || (l->kind == PT_MODEL_WD && i == 0)) {
		dims[0] = (uint32_t)v->n; // a sparse model's bias vector
		return 1;
	}
	if (l->kind == PT_MODEL_WD ? i % 2 == 0 : i % 2 == 1) {
		dims[0] = v->cols;
		return 1;
	}
	dims[0] = v->rows;
	dims[1] = v->cols;
	return 2;
}

// ---------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------

typedef pti_afile modelfile_out;

static void out_bytes(modelfile_out *o, const void *p, size_t n)
{
	pti_afile_write(o, p, n);
}

static void out_u32(modelfile_out *o, uint32_t v)
{
	uint8_t b[4];
	modelfile_put32(b, v);
	out_bytes(o, b, 4);
}

static void out_floats(modelfile_out *o, const float *x, uint64_t n)
{
	uint8_t buf[4 * MODELFILE_CHUNK];
	while (n > 0 && o->err == 0) {
		size_t k = n < MODELFILE_CHUNK ? (size_t)n : MODELFILE_CHUNK;
		for (size_t i = 0; i < k; i++) {
			uint32_t u;
			memcpy(&u, &x[i], 4);
			modelfile_put32(buf + 4 * i, u);
		}
		out_bytes(o, buf, 4 * k);
		x += k;
		n -= k;
	}
}

static void out_u64(modelfile_out *o, uint64_t v)
{
	out_u32(o, (uint32_t)v);
	out_u32(o, (uint32_t)(v >> 32));
}

int pti_modelfile_save(const char *path, const pti_layout *l,
    const float *params)
{
	if (l->n_tables > 0)
		return pti_err_set(PT_EINVAL, "%s: model %s has embedding "
		    "tables: its rows must be saved too", path, l->spec);
	return pti_modelfile_save_rows(path, l, params, 0, NULL);
}

int pti_modelfile_save_rows(const char *path, const pti_layout *l,
    const float *params, uint64_t seed, const pti_mrows *rows)
{
	modelfile_out o;
	int rv = pti_afile_open(&o, path);
	if (rv != 0)
		return rv;
	uint32_t spec_len = (uint32_t)strlen(l->spec);
	out_bytes(&o, modelfile_magic, sizeof(modelfile_magic));
	out_u32(&o, PT_MODELFILE_VERSION);
	out_u32(&o, spec_len);
	out_bytes(&o, l->spec, spec_len);
	out_u32(&o, l->width[0]);
	out_u32(&o, l->width[l->n_layers]);
	out_u32(&o, l->n_vars);
	for (uint32_t i = 0; i < l->n_vars; i++) {
		const pti_var *v = &l->vars[i];
		uint32_t dims[2], name_len = (uint32_t)strlen(v->name);
		uint32_t ndim = modelfile_dims(l, i, dims);
		out_u32(&o, name_len);
		out_bytes(&o, v->name, name_len);
		out_u32(&o, ndim);
		for (uint32_t d = 0; d < ndim; d++)
			out_u32(&o, dims[d]);
		out_floats(&o, params + v->off, v->n);
	}
	// The tables: name, dim, the job's seed, then the rows.
	out_u32(&o, l->n_tables);
	for (uint32_t t = 0; t < l->n_tables; t++) {
		const pti_emb_table *tb = &l->tables[t];
		uint32_t name_len = (uint32_t)strlen(tb->name);
		out_u32(&o, name_len);
		out_bytes(&o, tb->name, name_len);
		out_u32(&o, tb->dim);
		out_u64(&o, seed);
		out_u64(&o, rows[t].n);
		for (uint64_t i = 0; i < rows[t].n; i++)
			out_u64(&o, rows[t].ids[i]);
		out_floats(&o, rows[t].vals, rows[t].n * tb->dim);
	}
	out_u32(&o, (uint32_t)o.crc);
	return pti_afile_commit(&o);
}

// ---------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------

typedef struct modelfile_in {
	FILE *f;
	const char *path;
	uLong crc;
	uint64_t pos; // bytes read so far
	uint32_t version;
	pti_mrows *rows; // the tables' rows go here, or are read and dropped
	uint64_t seed;
} modelfile_in;

static int in_bytes(modelfile_in *in, void *p, size_t n, const char *what)
{
	size_t got = fread(p, 1, n, in->f);
	if (got != n) {
		if (ferror(in->f))
			return pti_err_set(PT_EIO, "%s: reading %s: %s",
			    in->path, what, strerror(errno));
		return pti_err_set(PT_ECORRUPT,
		    "%s: truncated: ends at byte %llu, inside %s", in->path,
		    (unsigned long long)(in->pos + got), what);
	}
	in->crc = crc32(in->crc, p, (uInt)n);
	in->pos += n;
	return 0;
}

static int in_u32(modelfile_in *in, uint32_t *v, const char *what)
{
	uint8_t b[4];
	int rv = in_bytes(in, b, 4, what);
	if (rv == 0)
		*v = modelfile_get32(b);
	return rv;
}

static int in_floats(modelfile_in *in, float *x, uint64_t n,
    const char *what)
{
	uint8_t buf[4 * MODELFILE_CHUNK];
	while (n > 0) {
		size_t k = n < MODELFILE_CHUNK ? (size_t)n : MODELFILE_CHUNK;
		int rv = in_bytes(in, buf, 4 * k, what);
		if (rv != 0)
			return rv;
		for (size_t i = 0; i < k; i++) {
			uint32_t u = modelfile_get32(buf + 4 * i);
			memcpy(&x[i], &u, 4);
		}
		x += k;
		n -= k;
	}
	return 0;
}

// modelfile_printable copies the n bytes of s for an error message, with
// anything unprintable shown as '?'.
static void modelfile_printable(char *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	out[n] = '\0';
}

// modelfile_header reads everything before the first tensor and rebuilds
// the layout it describes into *l.
static int modelfile_header(modelfile_in *in, pti_layout *l)
{
	const char *path = in->path;
	char magic[8], spec[PT_SPEC_MAX], shown[PT_SPEC_MAX];
	uint32_t version, spec_len, dim, classes;
	int rv;
	if ((rv = in_bytes(in, magic, 8, "the magic")) != 0)
		return rv;
	if (memcmp(magic, modelfile_magic, 8) != 0)
		return pti_err_set(PT_ECORRUPT,
		    "%s: not a pstrain model file (bad magic)", path);
	if ((rv = in_u32(in, &version, "the version")) != 0)
		return rv;
	if (version != PT_MODELFILE_VERSION && version != 1)
		return pti_err_set(PT_ECORRUPT,
		    "%s: format version %u, this build reads versions 1 and "
		    "%u", path, version, PT_MODELFILE_VERSION);
	in->version = version;
	if ((rv = in_u32(in, &spec_len, "the spec length")) != 0)
		return rv;
	if (spec_len == 0 || spec_len >= PT_SPEC_MAX)
		return pti_err_set(PT_ECORRUPT,
		    "%s: spec length %u, expected 1 to %d", path, spec_len,
		    PT_SPEC_MAX - 1);
	if ((rv = in_bytes(in, spec, spec_len, "the spec")) != 0)
		return rv;
	spec[spec_len] = '\0';
	modelfile_printable(shown, spec, spec_len);
	if (memchr(spec, '\0', spec_len) != NULL)
		return pti_err_set(PT_ECORRUPT, "%s: NUL inside the spec %s",
		    path, shown);
	if ((rv = in_u32(in, &dim, "the input dim")) != 0 ||
	    (rv = in_u32(in, &classes, "the class count")) != 0)
		return rv;
	if ((rv = pti_layout_init(l, spec, dim, classes)) != 0) {
		// The detail is about a --model flag; keep it, under our name.
		char why[256];
		const char *msg = pt_errmsg(rv);
		size_t n = strlen(msg);
		modelfile_printable(why, msg, n < 255 ? n : 255);
		return pti_err_set(PT_ECORRUPT,
		    "%s: model \"%s\" for %u inputs and %u classes: %s", path,
		    shown, dim, classes, why);
	}
	return 0;
}

// modelfile_size is the byte count of a file holding layout l, less its
// tables' rows (exact for a model without tables).
static uint64_t modelfile_size(const pti_layout *l, uint32_t version)
{
	uint64_t n = 8 + 4 + 4 + strlen(l->spec) + 4 + 4 + 4 + 4;
	if (version >= 2) {
		n += 4;
		for (uint32_t t = 0; t < l->n_tables; t++)
			n += 4 + strlen(l->tables[t].name) + 4 + 8 + 8;
	}
	for (uint32_t i = 0; i < l->n_vars; i++) {
		uint32_t dims[2];
		uint32_t ndim = modelfile_dims(l, i, dims);
		n += 4 + strlen(l->vars[i].name) + 4 + 4 * ndim +
		     4 * l->vars[i].n;
	}
	return n;
}

// modelfile_tensor reads tensor i of l into params, refusing a name or a
// shape that is not the layout's.
static int modelfile_tensor(modelfile_in *in, const pti_layout *l,
    uint32_t i, float *params)
{
	const pti_var *v = &l->vars[i];
	uint32_t want[2] = {0, 0}, got[2] = {0, 0}, name_len, ndim;
	uint32_t want_ndim = modelfile_dims(l, i, want);
	char name[sizeof(v->name)], shown[sizeof(v->name)];
	int rv;
	if ((rv = in_u32(in, &name_len, "a tensor name length")) != 0)
		return rv;
	if (name_len != strlen(v->name))
		return pti_err_set(PT_ECORRUPT,
		    "%s: tensor %u has a %u-byte name, model %s wants %s",
		    in->path, i, name_len, l->spec, v->name);
	if ((rv = in_bytes(in, name, name_len, "a tensor name")) != 0)
		return rv;
	modelfile_printable(shown, name, name_len);
	if (memcmp(name, v->name, name_len) != 0)
		return pti_err_set(PT_ECORRUPT,
		    "%s: tensor %u is named %s, model %s wants %s",
		    in->path, i, shown, l->spec, v->name);
	if ((rv = in_u32(in, &ndim, "a tensor rank")) != 0)
		return rv;
	if (ndim != want_ndim)
		return pti_err_set(PT_ECORRUPT,
		    "%s: tensor %s has %u dims, model %s wants %u", in->path,
		    v->name, ndim, l->spec, want_ndim);
	for (uint32_t d = 0; d < ndim; d++)
		if ((rv = in_u32(in, &got[d], "tensor dims")) != 0)
			return rv;
	if (ndim == 1 && got[0] != want[0])
		return pti_err_set(PT_ECORRUPT,
		    "%s: tensor %s is (%u), model %s wants (%u)", in->path,
		    v->name, got[0], l->spec, want[0]);
	if (ndim == 2 && (got[0] != want[0] || got[1] != want[1]))
		return pti_err_set(PT_ECORRUPT,
		    "%s: tensor %s is (%u, %u), model %s wants (%u, %u)",
		    in->path, v->name, got[0], got[1], l->spec, want[0],
		    want[1]);
	return in_floats(in, params + v->off, v->n, v->name);
}

static int in_u64(modelfile_in *in, uint64_t *v, const char *what)
{
	uint32_t lo = 0, hi = 0;
	int rv = in_u32(in, &lo, what);
	if (rv == 0)
		rv = in_u32(in, &hi, what);
	*v = (uint64_t)hi << 32 | lo;
	return rv;
}

// modelfile_tables reads the tables' section into in->rows (when wanted)
// and in->seed: names and dims as the layout's, rows that fit rows_bytes
// (the bytes past everything else), ids ascending.
static int modelfile_tables(modelfile_in *in, const pti_layout *l,
    uint64_t rows_bytes)
{
	uint32_t n, name_len, dim;
	char name[PT_VAR_NAME], shown[PT_VAR_NAME];
	int rv;
	if ((rv = in_u32(in, &n, "the table count")) != 0)
		return rv;
	if (n != l->n_tables)
		return pti_err_set(PT_ECORRUPT, "%s: %u tables, model %s has %u",
		    in->path, n, l->spec, l->n_tables);
	for (uint32_t t = 0; t < n; t++) {
		const pti_emb_table *tb = &l->tables[t];
		uint64_t k, seed;
		if ((rv = in_u32(in, &name_len, "a table name length")) != 0)
			return rv;
		if (name_len != strlen(tb->name))
			return pti_err_set(PT_ECORRUPT, "%s: table %u has a "
			    "%u-byte name, model %s wants %s", in->path, t,
			    name_len, l->spec, tb->name);
		if ((rv = in_bytes(in, name, name_len, "a table name")) != 0)
			return rv;
		modelfile_printable(shown, name, name_len);
		if (memcmp(name, tb->name, name_len) != 0 ||
		    (rv = in_u32(in, &dim, "a table dim")) != 0 ||
		    dim != tb->dim)
			return rv != 0 ? rv : pti_err_set(PT_ECORRUPT,
			    "%s: table %s (dim %u), model %s wants %s (dim %u)",
			    in->path, shown, dim, l->spec, tb->name, tb->dim);
		if ((rv = in_u64(in, &seed, "the seed")) != 0 ||
		    (rv = in_u64(in, &k, "a row count")) != 0)
			return rv;
		uint64_t each = 8 + 4 * (uint64_t)dim;
		if (k > rows_bytes / each)
			return pti_err_set(PT_ECORRUPT, "%s: table %s claims "
			    "%llu rows, more than the file holds", in->path,
			    tb->name, (unsigned long long)k);
		rows_bytes -= k * each;
		in->seed = seed;
		pti_mrows *r = in->rows != NULL ? &in->rows[t] : NULL;
		uint64_t *ids = malloc((k + 1) * sizeof(*ids));
		float *vals = malloc((k * dim + 1) * sizeof(float));
		if (ids == NULL || vals == NULL) {
			free(ids);
			free(vals);
			return pti_err_set(PT_ENOMEM, "%s: %llu rows", in->path,
			    (unsigned long long)k);
		}
		for (uint64_t i = 0; i < k && rv == 0; i++) {
			rv = in_u64(in, &ids[i], "a row id");
			if (rv == 0 && i > 0 && ids[i] <= ids[i - 1])
				rv = pti_err_set(PT_ECORRUPT, "%s: table %s's "
				    "ids do not ascend", in->path, tb->name);
		}
		if (rv == 0)
			rv = in_floats(in, vals, k * dim, tb->name);
		if (rv != 0 || r == NULL) {
			free(ids);
			free(vals);
			if (rv != 0)
				return rv;
			continue;
		}
		*r = (pti_mrows){k, ids, vals};
	}
	return rows_bytes == 0 ? 0 : pti_err_set(PT_ECORRUPT,
	    "%s: trailing bytes after the tables", in->path);
}

// modelfile_body checks the size, then reads the tensors and the CRC.
static int modelfile_body(modelfile_in *in, const pti_layout *l,
    uint64_t file_size, float **out)
{
	uint32_t n_tensors, stored;
	int rv;
	if ((rv = in_u32(in, &n_tensors, "the tensor count")) != 0)
		return rv;
	if (n_tensors != l->n_vars)
		return pti_err_set(PT_ECORRUPT,
		    "%s: %u tensors, model %s has %u", in->path, n_tensors,
		    l->spec, l->n_vars);
	uint64_t want = modelfile_size(l, in->version), rows_bytes = 0;
	if (in->version >= 2 && l->n_tables > 0 && file_size > want)
		rows_bytes = file_size - want; // checked table by table
	if (file_size != want + rows_bytes) {
		const char *what =
		    file_size < want ? "truncated" : "trailing bytes";
		return pti_err_set(PT_ECORRUPT,
		    "%s: %s: %llu bytes, model %s for %u inputs needs %llu",
		    in->path, what, (unsigned long long)file_size, l->spec,
		    l->width[0], (unsigned long long)want);
	}
	// The file is as long as n_params floats need, so this is bounded.
	float *params = malloc(l->n_params * sizeof(float));
	if (params == NULL)
		return pti_err_set(PT_ENOMEM, "%s: %llu parameters", in->path,
		    (unsigned long long)l->n_params);
	for (uint32_t i = 0; i < l->n_vars && rv == 0; i++)
		rv = modelfile_tensor(in, l, i, params);
	if (rv == 0 && in->version >= 2)
		rv = modelfile_tables(in, l, rows_bytes);
	uint32_t crc = (uint32_t)in->crc;
	if (rv == 0 && (rv = in_u32(in, &stored, "the checksum")) == 0 &&
	    stored != crc)
		rv = pti_err_set(PT_ECORRUPT,
		    "%s: CRC-32 mismatch: file says %08x, contents give %08x",
		    in->path, stored, crc);
	if (rv != 0) {
		free(params);
		return rv;
	}
	*out = params;
	return 0;
}

void pti_mrows_free(pti_mrows *rows, uint32_t n)
{
	for (uint32_t t = 0; rows != NULL && t < n; t++) {
		free(rows[t].ids);
		free(rows[t].vals);
		rows[t] = (pti_mrows){0, NULL, NULL};
	}
}

int pti_modelfile_load(const char *path, pti_layout *l, float **params)
{
	uint64_t seed;
	pti_mrows rows[PT_MAX_TABLES];
	pti_layout nl;
	float *p;
	int rv = pti_modelfile_load_rows(path, &nl, &p, &seed, rows);
	if (rv != 0)
		return rv;
	if (nl.n_tables > 0) {
		pti_mrows_free(rows, nl.n_tables);
		free(p);
		return pti_err_set(PT_EINVAL, "%s: model %s has embedding "
		    "tables, which this reader does not take", path, nl.spec);
	}
	*l = nl;
	*params = p;
	return 0;
}

int pti_modelfile_load_rows(const char *path, pti_layout *l, float **params,
    uint64_t *seed, pti_mrows rows[PT_MAX_TABLES])
{
	memset(rows, 0, PT_MAX_TABLES * sizeof(*rows));
	modelfile_in in = {fopen(path, "rb"), path, crc32(0, Z_NULL, 0), 0, 0,
	    rows, 0};
	struct stat st;
	pti_layout nl;
	float *p = NULL;
	int rv;
	if (in.f == NULL) {
		if (errno == ENOENT)
			return pti_err_set(PT_ENOENT, "%s: no such model file",
			    path);
		return pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
	}
	if (fstat(fileno(in.f), &st) != 0)
		rv = pti_err_set(PT_EIO, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rv = pti_err_set(PT_EIO, "%s: not a regular file", path);
	else if ((rv = modelfile_header(&in, &nl)) == 0)
		rv = modelfile_body(&in, &nl, (uint64_t)st.st_size, &p);
	fclose(in.f);
	if (rv != 0) {
		pti_mrows_free(rows, PT_MAX_TABLES);
		return rv;
	}
	*l = nl;
	*params = p;
	*seed = in.seed;
	return 0;
}
