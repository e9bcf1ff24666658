// tests/modelfile_test.c - the saved-model file: round trips, the exact
// header bytes, and every way of breaking a file that the reader refuses
// (each truncation, each flipped byte, wrong magic or version, lengths
// and shapes that disagree with the spec, a missing file).
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/layout.h"
#include "common/modelfile.h"
#include "tests/test.h"

// ---------------------------------------------------------------------
// Temporary files
// ---------------------------------------------------------------------


// read_all returns the malloc'd contents of path and their size in *n.
static uint8_t *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	rewind(f);
	uint8_t *p = malloc(size > 0 ? (size_t)size : 1);
	if (p != NULL && fread(p, 1, (size_t)size, f) != (size_t)size) {
		free(p);
		p = NULL;
	}
	fclose(f);
	*n = (size_t)size;
	return p;
}

static int write_all(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (f == NULL)
		return -1;
	size_t put = fwrite(p, 1, n, f);
	return fclose(f) == 0 && put == n ? 0 : -1;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

// fix_crc rewrites the trailing CRC of a file image of n bytes, so that
// an edit is judged on its own and not by the checksum.
static void fix_crc(uint8_t *p, size_t n)
{
	put32(p + n - 4, (uint32_t)crc32(0, p, (uInt)(n - 4)));
}

// A saved model in a fresh directory: dir/model.bin, and its bytes.
typedef struct saved {
	char dir[4096], path[4200], bad[4200];
	pti_layout l;
	float *params;
	uint8_t *bytes;
	size_t n;
} saved;

static int saved_init(saved *s, const char *spec, uint32_t dim,
    uint32_t classes)
{
	int rv;
	memset(s, 0, sizeof(*s));
	if (pti_test_tmpdir(s->dir, sizeof(s->dir), "pti_modelfile_test") != 0)
		return PT_EIO;
	snprintf(s->path, sizeof(s->path), "%s/model.bin", s->dir);
	snprintf(s->bad, sizeof(s->bad), "%s/bad.bin", s->dir);
	if ((rv = pti_layout_init(&s->l, spec, dim, classes)) != 0)
		return rv;
	s->params = malloc(s->l.n_params * sizeof(float));
	if (s->params == NULL)
		return PT_ENOMEM;
	pti_layout_init_values(s->params, &s->l, 77, 0, s->l.n_params);
	if ((rv = pti_modelfile_save(s->path, &s->l, s->params)) != 0)
		return rv;
	s->bytes = read_all(s->path, &s->n);
	return s->bytes != NULL ? 0 : PT_EIO;
}

static void saved_fini(saved *s)
{
	free(s->params);
	free(s->bytes);
	pti_test_rmdir(s->dir);
}

// load_bad writes n bytes p as s->bad and expects the load to fail with
// code and a detail naming the file and containing why (NULL: anything).
static void load_bad(saved *s, const uint8_t *p, size_t n, int code,
    const char *why)
{
	pti_layout l;
	float *params = NULL;
	memset(&l, 0xab, sizeof(l));
	PT_TEST_TRUE(write_all(s->bad, p, n) == 0);
	pti_err_clear();
	int rv = pti_modelfile_load(s->bad, &l, &params);
	if (rv != code)
		PT_TEST_FAIL_AT("%zu bytes: returned %d (%s), expected %d", n,
		    rv, pt_errmsg(rv), code);
	PT_TEST_STR_HAS(pt_errmsg(rv), s->bad);
	if (why != NULL)
		PT_TEST_STR_HAS(pt_errmsg(rv), why);
	PT_TEST_TRUE(params == NULL);
	PT_TEST_TRUE(l.n_params == 0xababababababababULL);
	free(rv == 0 ? params : NULL);
}

// ---------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------

static void test_modelfile_round_trip(void)
{
	const char *specs[] = {"softmax", "mlp:5,4", "mlp:256,128", "cnn:2,3",
	    "cnn:8,16"};
	const uint32_t dims[] = {7, 7, 784, 64, 784};
	for (int i = 0; i < 5; i++) {
		saved s;
		pti_layout l;
		float *params;
		size_t n2;
		PT_TEST_OK(saved_init(&s, specs[i], dims[i], 10));
		PT_TEST_OK(pti_modelfile_load(s.path, &l, &params));
		PT_TEST_TRUE(strcmp(l.spec, specs[i]) == 0);
		PT_TEST_TRUE(l.n_params == s.l.n_params);
		PT_TEST_TRUE(pti_layout_hash(&l) == pti_layout_hash(&s.l));
		PT_TEST_TRUE(memcmp(params, s.params,
				 l.n_params * sizeof(float)) == 0);
		// Saving what was read gives the same bytes.
		PT_TEST_OK(pti_modelfile_save(s.bad, &l, params));
		uint8_t *again = read_all(s.bad, &n2);
		PT_TEST_TRUE(again != NULL && n2 == s.n &&
			     memcmp(again, s.bytes, s.n) == 0);
		// No FILE.tmp is left behind.
		char tmp[4300];
		snprintf(tmp, sizeof(tmp), "%s.tmp", s.path);
		PT_TEST_TRUE(access(tmp, F_OK) != 0);
		free(again);
		free(params);
		saved_fini(&s);
	}
}

static void test_modelfile_layout_of_bytes(void)
{
	saved s;
	PT_TEST_OK(saved_init(&s, "mlp:3", 2, 4));
	const uint8_t *p = s.bytes;
	PT_TEST_TRUE(memcmp(p, "PSTRAIN\0", 8) == 0);
	PT_TEST_TRUE(get32(p + 8) == 2);  // version
	PT_TEST_TRUE(get32(p + 12) == 5); // spec length
	PT_TEST_TRUE(memcmp(p + 16, "mlp:3", 5) == 0);
	PT_TEST_TRUE(get32(p + 21) == 2 && get32(p + 25) == 4);
	PT_TEST_TRUE(get32(p + 29) == 4); // w0 b0 w1 b1
	// w0: name, ndim 2, dims (2, 3), 6 floats.
	PT_TEST_TRUE(get32(p + 33) == 2 && memcmp(p + 37, "w0", 2) == 0);
	PT_TEST_TRUE(get32(p + 39) == 2 && get32(p + 43) == 2 &&
		     get32(p + 47) == 3);
	uint32_t u;
	memcpy(&u, &s.params[0], 4);
	PT_TEST_TRUE(get32(p + 51) == u);
	// b0: ndim 1, dims (3).
	size_t b0 = 51 + 6 * 4;
	PT_TEST_TRUE(get32(p + b0) == 2 && memcmp(p + b0 + 4, "b0", 2) == 0);
	PT_TEST_TRUE(get32(p + b0 + 6) == 1 && get32(p + b0 + 10) == 3);
	// Header, then 4 tensors with 2-byte names, no tables, the CRC.
	size_t want = 33 + 4 * (4 + 2 + 4) + 4 * (2 + 1 + 2 + 1) +
		      4 * s.l.n_params + 4 + 4;
	PT_TEST_TRUE(s.n == want);
	PT_TEST_TRUE(get32(p + s.n - 4) == (uint32_t)crc32(0, p, (uInt)(s.n -
									  4)));
	saved_fini(&s);
}

// A CNN's file: its conv weights as (9 C_in, C_out) tensors, and the
// image's dim, from which the reader rebuilds the layout; the same spec
// on a dim that is not a square is refused as corrupt.
static void test_modelfile_cnn(void)
{
	saved s;
	PT_TEST_OK(saved_init(&s, "cnn:2,3", 64, 4));
	const uint8_t *p = s.bytes;
	PT_TEST_TRUE(get32(p + 12) == 7 && memcmp(p + 16, "cnn:2,3", 7) == 0);
	PT_TEST_TRUE(get32(p + 23) == 64 && get32(p + 27) == 4);
	PT_TEST_TRUE(get32(p + 31) == 6); // w0 b0 w1 b1 w2 b2
	// w0: ndim 2, dims (9, 2); then its 18 floats and b0 (2).
	PT_TEST_TRUE(get32(p + 35) == 2 && memcmp(p + 39, "w0", 2) == 0);
	PT_TEST_TRUE(get32(p + 41) == 2 && get32(p + 45) == 9 &&
		     get32(p + 49) == 2);
	size_t w1 = 53 + 18 * 4 + (4 + 2 + 4 + 4) + 2 * 4;
	PT_TEST_TRUE(memcmp(p + w1 + 4, "w1", 2) == 0);
	PT_TEST_TRUE(get32(p + w1 + 10) == 18 && get32(p + w1 + 14) == 3);
	// The dense layer: 2 x 2 pixels of 3 channels into 4 classes.
	size_t w2 = w1 + 18 + 18 * 3 * 4 + (4 + 2 + 4 + 4) + 3 * 4;
	PT_TEST_TRUE(memcmp(p + w2 + 4, "w2", 2) == 0);
	PT_TEST_TRUE(get32(p + w2 + 10) == 12 && get32(p + w2 + 14) == 4);
	uint8_t *bad = malloc(s.n);
	memcpy(bad, s.bytes, s.n);
	put32(bad + 23, 65);
	fix_crc(bad, s.n);
	load_bad(&s, bad, s.n, PT_ECORRUPT, "square");
	free(bad);
	saved_fini(&s);
}

static void test_modelfile_save_replaces(void)
{
	saved s;
	pti_layout l;
	float *params;
	PT_TEST_OK(saved_init(&s, "softmax", 3, 2));
	for (uint64_t i = 0; i < s.l.n_params; i++)
		s.params[i] = -(float)i;
	PT_TEST_OK(pti_modelfile_save(s.path, &s.l, s.params));
	PT_TEST_OK(pti_modelfile_load(s.path, &l, &params));
	PT_TEST_TRUE(params[5] == -5.0f);
	free(params);
	saved_fini(&s);
}

// ---------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------

static void test_modelfile_truncated(void)
{
	saved s;
	PT_TEST_OK(saved_init(&s, "mlp:3", 5, 3));
	for (size_t n = 0; n < s.n; n++) {
		load_bad(&s, s.bytes, n, PT_ECORRUPT, "truncated");
		if (pti_test_failed) {
			fprintf(stderr, "  at length %zu of %zu\n", n, s.n);
			break;
		}
	}
	// Trailing bytes are refused too.
	uint8_t *more = malloc(s.n + 1);
	memcpy(more, s.bytes, s.n);
	more[s.n] = 0;
	load_bad(&s, more, s.n + 1, PT_ECORRUPT, "trailing");
	free(more);
	saved_fini(&s);
}

static void test_modelfile_flipped_byte(void)
{
	saved s;
	PT_TEST_OK(saved_init(&s, "mlp:3", 5, 3));
	uint8_t *p = malloc(s.n);
	// In the values: the checksum catches it.
	memcpy(p, s.bytes, s.n);
	p[s.n - 9] ^= 0x10;
	load_bad(&s, p, s.n, PT_ECORRUPT, "CRC-32 mismatch");
	// Anywhere at all, by any bit: refused, one way or another.
	for (size_t i = 0; i < s.n && !pti_test_failed; i++)
		for (int bit = 0; bit < 8 && !pti_test_failed; bit++) {
			memcpy(p, s.bytes, s.n);
			p[i] ^= (uint8_t)(1u << bit);
			load_bad(&s, p, s.n, PT_ECORRUPT, NULL);
			if (pti_test_failed)
				fprintf(stderr, "  byte %zu bit %d\n", i, bit);
		}
	free(p);
	saved_fini(&s);
}

static void test_modelfile_bad_header(void)
{
	saved s;
	PT_TEST_OK(saved_init(&s, "mlp:3", 5, 3));
	uint8_t *p = malloc(s.n);
	// Each edit below has its CRC fixed, so the field check must act.
	memcpy(p, s.bytes, s.n);
	p[0] = 'Q';
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "bad magic");
	memcpy(p, s.bytes, s.n);
	put32(p + 8, 3);
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "version 3");
	// Lengths that would make a naive reader allocate gigabytes.
	const uint32_t huge[] = {0, 96, 0x7fffffff, 0xffffffff};
	for (int i = 0; i < 4; i++) {
		memcpy(p, s.bytes, s.n);
		put32(p + 12, huge[i]);
		fix_crc(p, s.n);
		load_bad(&s, p, s.n, PT_ECORRUPT, "spec length");
	}
	// A spec that does not parse, and dimensions that are not allowed.
	memcpy(p, s.bytes, s.n);
	p[16] = 'x';
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "xlp:3");
	memcpy(p, s.bytes, s.n);
	put32(p + 21 + 4, 1); // one class
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, NULL);
	// Sizes that parse but describe a bigger model than the file holds.
	memcpy(p, s.bytes, s.n);
	put32(p + 21, 60000);
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "truncated");
	memcpy(p, s.bytes, s.n);
	put32(p + 29, 0xffffffff);
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "tensors");
	free(p);
	saved_fini(&s);
}

static void test_modelfile_shape_mismatch(void)
{
	saved s, t;
	PT_TEST_OK(saved_init(&s, "mlp:3", 5, 3));
	PT_TEST_OK(saved_init(&t, "mlp:4", 5, 3));
	uint8_t *p = malloc(s.n > t.n ? s.n : t.n);
	// The spec of one with the tensors of the other, CRC fixed.
	memcpy(p, t.bytes, t.n);
	p[20] = '3';
	fix_crc(p, t.n);
	load_bad(&s, p, t.n, PT_ECORRUPT, NULL);
	// Same size, names swapped: w0 called x0.
	memcpy(p, s.bytes, s.n);
	p[37] = 'x';
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "named x0");
	// Same bytes per tensor but dims transposed: (5, 3) read as (3, 5).
	memcpy(p, s.bytes, s.n);
	put32(p + 43, 3);
	put32(p + 47, 5);
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "(3, 5)");
	// A weight stored with one dim, a name length past any cap.
	memcpy(p, s.bytes, s.n);
	put32(p + 39, 1);
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "1 dims");
	memcpy(p, s.bytes, s.n);
	put32(p + 33, 0xffffffff);
	fix_crc(p, s.n);
	load_bad(&s, p, s.n, PT_ECORRUPT, "4294967295-byte name");
	free(p);
	saved_fini(&s);
	saved_fini(&t);
}

static void test_modelfile_missing(void)
{
	saved s;
	pti_layout l;
	float *params = NULL;
	PT_TEST_OK(saved_init(&s, "softmax", 3, 2));
	char path[4300];
	snprintf(path, sizeof(path), "%s/nope.bin", s.dir);
	PT_TEST_ERR(pti_modelfile_load(path, &l, &params), PT_ENOENT);
	PT_TEST_STR_HAS(pt_errmsg(PT_ENOENT), path);
	PT_TEST_TRUE(params == NULL);
	// A directory is not a model file.
	PT_TEST_ERR(pti_modelfile_load(s.dir, &l, &params), PT_EIO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), s.dir);
	// Saving into a directory that does not exist names the file.
	snprintf(path, sizeof(path), "%s/no/such/model.bin", s.dir);
	PT_TEST_ERR(pti_modelfile_save(path, &s.l, s.params), PT_EIO);
	PT_TEST_STR_HAS(pt_errmsg(PT_EIO), path);
	saved_fini(&s);
}

// A sparse model's file: its dense vector, then its table's rows and
// the seed, read back as written; a reader without tables refuses it,
// and ids that do not ascend are corrupt.
static void test_modelfile_tables(void)
{
	char dir[256], path[512];
	pti_layout l, got;
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-mf"));
	snprintf(path, sizeof(path), "%s/fm.bin", dir);
	PT_TEST_OK(pti_layout_init(&l, "fm:2", 3, 2));
	float *params = calloc(l.n_params, sizeof(float)), *p2 = NULL;
	params[0] = 0.25f;
	uint64_t ids[3] = {5, 9, 1ULL << 40};
	float vals[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	pti_mrows rows[1] = {{3, ids, vals}}, back[PT_MAX_TABLES];
	uint64_t seed = 0;
	PT_TEST_ERR(pti_modelfile_save(path, &l, params), PT_EINVAL);
	PT_TEST_OK(pti_modelfile_save_rows(path, &l, params, 77, rows));
	PT_TEST_OK(pti_modelfile_load_rows(path, &got, &p2, &seed, back));
	PT_TEST_TRUE(seed == 77 && got.n_tables == 1 && p2[0] == 0.25f);
	PT_TEST_TRUE(back[0].n == 3 && memcmp(back[0].ids, ids,
	    sizeof(ids)) == 0 && memcmp(back[0].vals, vals, sizeof(vals)) == 0);
	pti_mrows_free(back, PT_MAX_TABLES);
	free(p2);
	PT_TEST_ERR(pti_modelfile_load(path, &got, &p2), PT_EINVAL);
	ids[1] = 5;
	PT_TEST_OK(pti_modelfile_save_rows(path, &l, params, 77, rows));
	PT_TEST_ERR(pti_modelfile_load_rows(path, &got, &p2, &seed, back),
	    PT_ECORRUPT);
	PT_TEST_STR_HAS(pt_errmsg(PT_ECORRUPT), "ascend");
	rows[0].n = 0;
	PT_TEST_OK(pti_modelfile_save_rows(path, &l, params, 77, rows));
	PT_TEST_OK(pti_modelfile_load_rows(path, &got, &p2, &seed, back));
	PT_TEST_TRUE(back[0].n == 0);
	pti_mrows_free(back, PT_MAX_TABLES);
	free(p2);
	free(params);
	unlink(path);
	rmdir(dir);
}

static const pti_test_case cases[] = {
    {"test_modelfile_round_trip", test_modelfile_round_trip},
    {"test_modelfile_layout_of_bytes", test_modelfile_layout_of_bytes},
    {"test_modelfile_cnn", test_modelfile_cnn},
    {"test_modelfile_save_replaces", test_modelfile_save_replaces},
    {"test_modelfile_truncated", test_modelfile_truncated},
    {"test_modelfile_flipped_byte", test_modelfile_flipped_byte},
    {"test_modelfile_bad_header", test_modelfile_bad_header},
    {"test_modelfile_shape_mismatch", test_modelfile_shape_mismatch},
    {"test_modelfile_missing", test_modelfile_missing},
    {"test_modelfile_tables", test_modelfile_tables},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
