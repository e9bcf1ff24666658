// tests/data_test.c - the data module: real Fashion-MNIST, hand-made IDX
// files that break the format in each way we refuse, data specs, the
// synthetic set, epoch permutations and minibatch gather.
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/ctr.h"
#include "common/data.h"
#include "common/rng.h"
#include "tests/test.h"
#include "train/batch.h"

#define FASHION "/usr/share/datasets/fashion-mnist"

// ---------------------------------------------------------------------
// Temporary IDX files
// ---------------------------------------------------------------------


static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

// write_idx writes magic, the n_words header words and len payload bytes
// (value i % mod at offset i) to dir/name, gzipped when gz is set, and
// leaves the full path in path.
static void write_idx(char *path, const char *dir, const char *name,
    int gz, uint32_t magic, const uint32_t *words, int n_words, size_t len,
    unsigned mod)
{
	uint8_t hdr[16];
	uint8_t *buf = malloc(len > 0 ? len : 1);
	PT_TEST_TRUE(buf != NULL);
	if (buf == NULL)
		return;
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i % mod);
	put_be32(hdr, magic);
	for (int i = 0; i < n_words; i++)
		put_be32(hdr + 4 * (i + 1), words[i]);
	sprintf(path, "%s/%s", dir, name);
	if (gz) {
		gzFile f = gzopen(path, "wb");
		PT_TEST_TRUE(f != NULL);
		if (f != NULL) {
			gzwrite(f, hdr, 4 * (unsigned)(n_words + 1));
			if (len > 0)
				gzwrite(f, buf, (unsigned)len);
			PT_TEST_TRUE(gzclose(f) == Z_OK);
		}
	} else {
		FILE *f = fopen(path, "wb");
		PT_TEST_TRUE(f != NULL);
		if (f != NULL) {
			fwrite(hdr, 1, 4 * (size_t)(n_words + 1), f);
			fwrite(buf, 1, len, f);
			fclose(f);
		}
	}
	free(buf);
}

static void write_images(char *path, const char *dir, const char *name,
    uint32_t n, uint32_t rows, uint32_t cols, size_t len)
{
	uint32_t w[3] = {n, rows, cols};
	write_idx(path, dir, name, 1, 0x803, w, 3, len, 256);
}

static void write_labels(char *path, const char *dir, const char *name,
    uint32_t n, size_t len)
{
	write_idx(path, dir, name, 1, 0x801, &n, 1, len, 10);
}

// write_fashion writes the four files of fashion-mnist:DIR: n_train and
// n_test images of rows x cols, and n_train_labels training labels.
static void write_fashion(const char *dir, uint32_t n_train,
    uint32_t n_train_labels, uint32_t n_test, uint32_t rows, uint32_t cols)
{
	char p[4096];
	write_images(p, dir, "train-images-idx3-ubyte.gz", n_train, rows, cols,
	    (size_t)n_train * rows * cols);
	write_labels(p, dir, "train-labels-idx1-ubyte.gz", n_train_labels,
	    n_train_labels);
	write_images(p, dir, "t10k-images-idx3-ubyte.gz", n_test, 28, 28,
	    (size_t)n_test * 28 * 28);
	write_labels(p, dir, "t10k-labels-idx1-ubyte.gz", n_test, n_test);
}

static char *read_whole(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)*len);
	if (buf != NULL && fread(buf, 1, (size_t)*len, f) != (size_t)*len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void write_whole(const char *path, const char *buf, long len)
{
	FILE *f = fopen(path, "wb");
	PT_TEST_TRUE(f != NULL);
	if (f == NULL)
		return;
	PT_TEST_TRUE(fwrite(buf, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
}

// expect_images_err reads path as images and checks the code and that
// the detail names the file and holds `has`.
static void expect_images_err(const char *path, int code, const char *has)
{
	uint8_t *x = (uint8_t *)"untouched";
	uint32_t n = 7, rows = 7, cols = 7;
	int rv = pti_idx_read_images(path, &x, &n, &rows, &cols);
	PT_TEST_ERR(rv, code);
	PT_TEST_STR_HAS(pt_errmsg(rv), path);
	PT_TEST_STR_HAS(pt_errmsg(rv), has);
	PT_TEST_TRUE(strcmp((char *)x, "untouched") == 0);
	PT_TEST_TRUE(n == 7 && rows == 7 && cols == 7);
}

static void expect_labels_err(const char *path, int code, const char *has)
{
	uint8_t *y = (uint8_t *)"untouched";
	uint32_t n = 7;
	int rv = pti_idx_read_labels(path, &y, &n);
	PT_TEST_ERR(rv, code);
	PT_TEST_STR_HAS(pt_errmsg(rv), path);
	PT_TEST_STR_HAS(pt_errmsg(rv), has);
	PT_TEST_TRUE(strcmp((char *)y, "untouched") == 0 && n == 7);
}

// expect_load_err loads spec and checks the code, the detail, and that
// the output was left alone.
static void expect_load_err(const char *spec, int code, const char *has)
{
	pti_data d;
	memset(&d, 0xab, sizeof(d));
	int rv = pti_data_load(&d, spec, 1);
	PT_TEST_ERR(rv, code);
	PT_TEST_STR_HAS(pt_errmsg(rv), has);
	PT_TEST_TRUE(d.train.n == 0xabababab && d.test.n == 0xabababab);
	if (rv == 0)
		pti_data_fini(&d);
}

// ---------------------------------------------------------------------
// Real data
// ---------------------------------------------------------------------

static void check_split(const pti_dataset *s, uint32_t n, uint32_t per_class)
{
	uint32_t count[10] = {0};
	PT_TEST_TRUE(s->n == n);
	PT_TEST_TRUE(s->dim == 784);
	PT_TEST_TRUE(s->classes == 10);
	PT_TEST_TRUE(s->x != NULL && s->y != NULL);
	if (s->y == NULL || s->n != n)
		return;
	int bad = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (s->y[i] >= 10)
			bad = 1;
		else
			count[s->y[i]]++;
	}
	PT_TEST_TRUE(!bad);
	// Fashion-MNIST is balanced: every class has n / 10 examples.
	for (int c = 0; c < 10; c++)
		PT_TEST_TRUE(count[c] == per_class);
	uint64_t sum = 0;
	for (size_t i = 0; i < (size_t)n * 784; i++)
		sum += s->x[i];
	PT_TEST_TRUE(sum > 0); // not all zero: the pixels were really read
}

static void test_data_fashion_loads(void)
{
	pti_data d;
	PT_TEST_OK(pti_data_load(&d, "fashion-mnist", 1));
	check_split(&d.train, 60000, 6000);
	check_split(&d.test, 10000, 1000);
	// The first example of each split is an ankle boot (class 9).
	PT_TEST_TRUE(d.train.y[0] == 9 && d.test.y[0] == 9);
	pti_data_fini(&d);
	PT_TEST_TRUE(d.train.x == NULL && d.test.y == NULL);
}

static void test_data_dims(void)
{
	uint32_t dim = 0, classes = 0;
	PT_TEST_OK(pti_data_dims("fashion-mnist", &dim, &classes));
	PT_TEST_TRUE(dim == 784 && classes == 10);
	dim = classes = 0;
	PT_TEST_OK(pti_data_dims("fashion-mnist:" FASHION "/", &dim, &classes));
	PT_TEST_TRUE(dim == 784 && classes == 10);
	dim = classes = 0;
	PT_TEST_OK(pti_data_dims("synthetic:100", &dim, &classes));
	PT_TEST_TRUE(dim == 64 && classes == 10);

	char dir[4096];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_fashion(dir, 3, 3, 2, 5, 7);
	char spec[4200];
	snprintf(spec, sizeof(spec), "fashion-mnist:%s", dir);
	// dims reads only the image headers of both splits, which disagree.
	dim = classes = 1;
	int rv = pti_data_dims(spec, &dim, &classes);
	PT_TEST_ERR(rv, PT_ECORRUPT);
	PT_TEST_STR_HAS(pt_errmsg(rv), "5 x 7");
	PT_TEST_STR_HAS(pt_errmsg(rv), "t10k-images-idx3-ubyte.gz");
	PT_TEST_TRUE(dim == 1 && classes == 1);
	pti_test_rmdir(dir);
	rv = pti_data_dims(spec, &dim, &classes);
	PT_TEST_ERR(rv, PT_ENOENT);
	PT_TEST_STR_HAS(pt_errmsg(rv), "train-images-idx3-ubyte.gz");
}

static void test_data_fashion_dir_small(void)
{
	char dir[4096], spec[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_fashion(dir, 30, 30, 20, 28, 28);
	snprintf(spec, sizeof(spec), "fashion-mnist:%s", dir);
	pti_data d;
	PT_TEST_OK(pti_data_load(&d, spec, 1));
	PT_TEST_TRUE(d.train.n == 30 && d.test.n == 20 && d.train.dim == 784);
	PT_TEST_TRUE(d.train.x[784 + 1] == (784 + 1) % 256);
	PT_TEST_TRUE(d.train.y[13] == 3);
	pti_data_fini(&d);
	pti_test_rmdir(dir);
}

// A worker's batches, gathered in place and ahead (--prefetch): the same
// rows at every step, across an epoch's end and after a jump back (a
// worker that rejoined at an earlier step), and each worker its slice.
static void test_data_batches_ahead_same(void)
{
	pti_data d;
	PT_TEST_OK(pti_data_load(&d, "synthetic:500", 1));
	pti_batches *now, *ahead;
	PT_TEST_OK(pti_batches_open(&now, &d.train, 9, 60, 3, 1, 0));
	PT_TEST_OK(pti_batches_open(&ahead, &d.train, 9, 60, 3, 1, 1));
	uint32_t spe = d.train.n / 60, b = 20, dim = d.train.dim;
	uint32_t *perm = malloc(d.train.n * sizeof(uint32_t));
	const uint64_t steps[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 4, 5, 20,
	    21, 21};
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		uint64_t t = steps[k];
		const float *x1, *x2;
		const uint8_t *y1, *y2;
		pti_batches_get(now, t, &x1, &y1);
		pti_batches_get(ahead, t, &x2, &y2);
		PT_TEST_TRUE(memcmp(x1, x2, (size_t)b * dim * 4) == 0);
		PT_TEST_TRUE(memcmp(y1, y2, b) == 0);
		// Rank 1's rows: [20, 40) of block t % spe of the epoch.
		pti_data_perm(perm, d.train.n, 9, (uint32_t)(t / spe));
		uint32_t row = perm[(t % spe) * 60 + 20 + 7];
		PT_TEST_TRUE(y1[7] == d.train.y[row]);
		PT_TEST_TRUE(x1[7 * dim + 3] == d.train.x[row * dim + 3] / 255.0f);
	}
	pti_batches_close(now);
	pti_batches_close(ahead);
	free(perm);
	pti_data_fini(&d);
}

// ---------------------------------------------------------------------
// Broken files
// ---------------------------------------------------------------------

static void test_data_missing_file(void)
{
	const char *path = "/nonexistent/pt/train-images-idx3-ubyte.gz";
	expect_images_err(path, PT_ENOENT, "No such file or directory");
	expect_labels_err("/nonexistent/labels.gz", PT_ENOENT,
	    "No such file or directory");

	char dir[4096], spec[4200], want[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	snprintf(spec, sizeof(spec), "fashion-mnist:%s", dir);
	snprintf(want, sizeof(want), "%s/train-images-idx3-ubyte.gz: No such",
	    dir);
	expect_load_err(spec, PT_ENOENT, want);
	// With the training files present, the test images are missed next.
	write_fashion(dir, 3, 3, 2, 28, 28);
	snprintf(want, sizeof(want), "%s/t10k-images-idx3-ubyte.gz", dir);
	unlink(want);
	expect_load_err(spec, PT_ENOENT, want);
	pti_test_rmdir(dir);
}

static void test_data_truncated(void)
{
	char dir[4096], path[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_images(path, dir, "short.gz", 100, 28, 28, 1000);
	expect_images_err(path, PT_ECORRUPT,
	    "truncated: expected 78400 bytes of pixels, got 1000");
	write_labels(path, dir, "short-labels.gz", 100, 99);
	expect_labels_err(path, PT_ECORRUPT,
	    "truncated: expected 100 bytes of labels, got 99");
	// A header cut short.
	uint32_t w[1] = {100};
	write_idx(path, dir, "hdr.gz", 1, 0x803, w, 1, 0, 1);
	expect_images_err(path, PT_ECORRUPT,
	    "truncated: expected 16 bytes of header, got 8");
	write_idx(path, dir, "empty.gz", 1, 0x803, w, -1, 0, 1);
	expect_images_err(path, PT_ECORRUPT, "got 0");
	pti_test_rmdir(dir);
}

static void test_data_gzip_corrupt(void)
{
	char dir[4096], path[4200];
	long len;
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	// Pseudo-random pixels, so the deflate stream is long enough to cut.
	uint32_t w[3] = {200, 28, 28};
	write_idx(path, dir, "a.gz", 1, 0x803, w, 3, 200 * 784, 251);
	char *buf = read_whole(path, &len);
	PT_TEST_TRUE(buf != NULL && len > 200);
	if (buf == NULL)
		return;
	// Cut the compressed stream in half.
	write_whole(path, buf, len / 2);
	expect_images_err(path, PT_ECORRUPT, "truncated");
	// Drop only the 8-byte trailer: every pixel decodes, the CRC is gone.
	write_whole(path, buf, len - 8);
	expect_images_err(path, PT_ECORRUPT, "gzip");
	// Damage the CRC.
	buf[len - 6] ^= 0x55;
	write_whole(path, buf, len);
	expect_images_err(path, PT_ECORRUPT, "gzip");
	buf[len - 6] ^= 0x55;
	// Damage the deflate stream itself.
	for (long i = len / 3; i < len / 3 + 16; i++)
		buf[i] ^= 0xa5;
	write_whole(path, buf, len);
	expect_images_err(path, PT_ECORRUPT, "");
	free(buf);
	pti_test_rmdir(dir);
}

static void test_data_bad_magic(void)
{
	char dir[4096], path[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	uint32_t w[3] = {2, 28, 28};
	write_idx(path, dir, "lab-as-img.gz", 1, 0x801, w, 3, 2 * 784, 256);
	expect_images_err(path, PT_ECORRUPT, "0x00000801");
	expect_images_err(path, PT_ECORRUPT, "expected 0x00000803");
	write_idx(path, dir, "img-as-lab.gz", 1, 0x803, w, 1, 2, 10);
	expect_labels_err(path, PT_ECORRUPT, "0x00000803");
	expect_labels_err(path, PT_ECORRUPT, "expected 0x00000801");
	// Text that is not gzip is read as is and fails on its magic.
	write_whole(path, "hello, world\n", 13);
	expect_images_err(path, PT_ECORRUPT, "0x68656c6c");
	pti_test_rmdir(dir);
}

static void test_data_wrong_dims(void)
{
	char dir[4096], path[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_images(path, dir, "zero-rows.gz", 2, 0, 28, 0);
	expect_images_err(path, PT_ECORRUPT, "0 x 28");
	write_images(path, dir, "huge.gz", 2, 1001, 1000, 0);
	expect_images_err(path, PT_ECORRUPT, "1001 x 1000");
	write_images(path, dir, "zero-n.gz", 0, 28, 28, 0);
	expect_images_err(path, PT_ECORRUPT, "0 images");
	write_labels(path, dir, "zero-labels.gz", 0, 0);
	expect_labels_err(path, PT_ECORRUPT, "0 labels");
	// Train and test images must have one size.
	char spec[4200];
	write_fashion(dir, 3, 3, 2, 14, 14);
	snprintf(spec, sizeof(spec), "fashion-mnist:%s", dir);
	expect_load_err(spec, PT_ECORRUPT, "14 x 14");
	pti_test_rmdir(dir);
}

static void test_data_hostile_header(void)
{
	char dir[4096], path[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	// Four billion images: refused from the header alone.
	write_images(path, dir, "4g.gz", 4000000000u, 28, 28, 100);
	expect_images_err(path, PT_ECORRUPT, "4000000000 images");
	write_labels(path, dir, "4g-labels.gz", 4000000000u, 100);
	expect_labels_err(path, PT_ECORRUPT, "4000000000 labels");
	// Within every bound (3.9 GB in all) but with 100 bytes behind it:
	// the buffer grows only as bytes arrive, so this costs megabytes.
	write_images(path, dir, "big.gz", 5000000u, 28, 28, 100);
	expect_images_err(path, PT_ECORRUPT, "got 100");
	write_images(path, dir, "square.gz", 10000000u, 1000, 1000, 100);
	expect_images_err(path, PT_ECORRUPT, "exceed");
	pti_test_rmdir(dir);
}

static void test_data_trailing_bytes(void)
{
	char dir[4096], path[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_images(path, dir, "long.gz", 2, 28, 28, 2 * 784 + 1);
	expect_images_err(path, PT_ECORRUPT, "trailing bytes");
	write_labels(path, dir, "long-labels.gz", 5, 6);
	expect_labels_err(path, PT_ECORRUPT, "trailing bytes");
	pti_test_rmdir(dir);
}

static void test_data_uncompressed(void)
{
	char dir[4096], path[4200];
	uint8_t *x = NULL, *y = NULL;
	uint32_t n = 0, rows = 0, cols = 0;
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	uint32_t w[3] = {3, 4, 5};
	write_idx(path, dir, "plain", 0, 0x803, w, 3, 60, 256);
	PT_TEST_OK(pti_idx_read_images(path, &x, &n, &rows, &cols));
	PT_TEST_TRUE(n == 3 && rows == 4 && cols == 5);
	PT_TEST_TRUE(x != NULL && x[59] == 59);
	write_idx(path, dir, "plain-labels", 0, 0x801, w, 1, 3, 10);
	PT_TEST_OK(pti_idx_read_labels(path, &y, &n));
	PT_TEST_TRUE(n == 3 && y != NULL && y[2] == 2);
	free(x);
	free(y);
	pti_test_rmdir(dir);
}

static void test_data_count_mismatch(void)
{
	char dir[4096], spec[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_fashion(dir, 10, 9, 4, 28, 28);
	snprintf(spec, sizeof(spec), "fashion-mnist:%s", dir);
	expect_load_err(spec, PT_ECORRUPT,
	    "train-images-idx3-ubyte.gz has 10 images");
	expect_load_err(spec, PT_ECORRUPT,
	    "train-labels-idx1-ubyte.gz has 9 labels");
	pti_test_rmdir(dir);
}

static void test_data_label_range(void)
{
	char dir[4096], spec[4200], path[4200];
	PT_TEST_TRUE(pti_test_tmpdir(dir, sizeof(dir), "pti_data_test") == 0);
	write_fashion(dir, 12, 12, 4, 28, 28);
	// Labels 0..11: the 11th label is 10.
	write_idx(path, dir, "train-labels-idx1-ubyte.gz", 1, 0x801,
	    (uint32_t[]){12}, 1, 12, 256);
	snprintf(spec, sizeof(spec), "fashion-mnist:%s", dir);
	expect_load_err(spec, PT_ECORRUPT, path);
	expect_load_err(spec, PT_ECORRUPT, "label 10 of example 10");
	pti_test_rmdir(dir);
}

// ---------------------------------------------------------------------
// Specs
// ---------------------------------------------------------------------

static void test_data_bad_specs(void)
{
	static const char *const bad[] = {
		"synthetic:0", "synthetic:abc", "foo", "synthetic:",
		"synthetic:-5", "synthetic: 5", "synthetic:+5", "synthetic:5x",
		"synthetic:10000001", "synthetic:99999999999999999999999",
		"fashion-mnist:", "Fashion-MNIST", "synthetic", "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t dim = 3, classes = 3;
		expect_load_err(bad[i], PT_EINVAL, "--data");
		if (*bad[i] != '\0')
			expect_load_err(bad[i], PT_EINVAL, bad[i]);
		int rv = pti_data_dims(bad[i], &dim, &classes);
		PT_TEST_ERR(rv, PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(rv), "--data");
		PT_TEST_TRUE(dim == 3 && classes == 3);
	}
	expect_load_err("foo", PT_EINVAL, "synthetic:N");
	expect_load_err("synthetic:0", PT_EINVAL, "1 to 10000000");
	expect_load_err(NULL, PT_EINVAL, "--data");
}

// ---------------------------------------------------------------------
// Synthetic
// ---------------------------------------------------------------------

static int same_split(const pti_dataset *a, const pti_dataset *b)
{
	return a->n == b->n && a->dim == b->dim &&
	    memcmp(a->x, b->x, (size_t)a->n * a->dim) == 0 &&
	    memcmp(a->y, b->y, a->n) == 0;
}

static void test_data_synthetic_shapes(void)
{
	pti_data d;
	PT_TEST_OK(pti_data_load(&d, "synthetic:1000", 5));
	PT_TEST_TRUE(d.train.n == 1000 && d.test.n == 200);
	PT_TEST_TRUE(d.train.dim == 64 && d.test.dim == 64);
	PT_TEST_TRUE(d.train.classes == 10 && d.test.classes == 10);
	uint32_t count[10] = {0};
	int bad = 0;
	for (uint32_t i = 0; i < d.train.n; i++) {
		if (d.train.y[i] >= 10)
			bad = 1;
		else
			count[d.train.y[i]]++;
	}
	PT_TEST_TRUE(!bad);
	for (int c = 0; c < 10; c++)
		PT_TEST_TRUE(count[c] > 50); // about 100 each
	pti_data_fini(&d);
	PT_TEST_OK(pti_data_load(&d, "synthetic:1", 5));
	PT_TEST_TRUE(d.train.n == 1 && d.test.n == 1);
	PT_TEST_TRUE(d.test.y[0] < 10);
	pti_data_fini(&d);
	PT_TEST_OK(pti_data_load(&d, "synthetic:9", 5));
	PT_TEST_TRUE(d.train.n == 9 && d.test.n == 1);
	pti_data_fini(&d);
}

static void test_data_synthetic_deterministic(void)
{
	pti_data a, b, c;
	PT_TEST_OK(pti_data_load(&a, "synthetic:500", 42));
	PT_TEST_OK(pti_data_load(&b, "synthetic:500", 42));
	PT_TEST_OK(pti_data_load(&c, "synthetic:500", 43));
	PT_TEST_TRUE(same_split(&a.train, &b.train));
	PT_TEST_TRUE(same_split(&a.test, &b.test));
	PT_TEST_TRUE(!same_split(&a.train, &c.train));
	PT_TEST_TRUE(!same_split(&a.test, &c.test));
	// Test examples come from their own stream, not a copy of the train.
	PT_TEST_TRUE(memcmp(a.train.x, a.test.x, 100 * 64) != 0);
	pti_data_fini(&a);
	pti_data_fini(&b);
	pti_data_fini(&c);
}

// test_data_synthetic_learnable fits a softmax classifier with plain SGD
// and checks it does far better than chance on the test split.
static void test_data_synthetic_learnable(void)
{
	enum { D = 64, K = 10 };
	static float w[K][D + 1];
	pti_data d;
	float x[D];
	uint8_t y;
	PT_TEST_OK(pti_data_load(&d, "synthetic:2000", 7));
	memset(w, 0, sizeof(w));
	for (int epoch = 0; epoch < 5; epoch++) {
		for (uint32_t i = 0; i < d.train.n; i++) {
			float z[K], zmax = -1e30f, sum = 0;
			pti_data_gather(x, &y, &d.train, &i, 1);
			for (int k = 0; k < K; k++) {
				z[k] = w[k][D];
				for (int j = 0; j < D; j++)
					z[k] += w[k][j] * x[j];
				zmax = z[k] > zmax ? z[k] : zmax;
			}
			for (int k = 0; k < K; k++)
				sum += z[k] = expf(z[k] - zmax);
			for (int k = 0; k < K; k++) {
				float g = z[k] / sum - (k == y);
				for (int j = 0; j < D; j++)
					w[k][j] -= 0.5f * g * x[j];
				w[k][D] -= 0.5f * g;
			}
		}
	}
	uint32_t right = 0;
	for (uint32_t i = 0; i < d.test.n; i++) {
		int best = 0;
		float bz = -1e30f;
		pti_data_gather(x, &y, &d.test, &i, 1);
		for (int k = 0; k < K; k++) {
			float z = w[k][D];
			for (int j = 0; j < D; j++)
				z += w[k][j] * x[j];
			if (z > bz) {
				bz = z;
				best = k;
			}
		}
		right += best == y;
	}
	PT_TEST_TRUE(right > d.test.n * 8 / 10);
	pti_data_fini(&d);
}

// ---------------------------------------------------------------------
// Order and gather
// ---------------------------------------------------------------------

static int is_perm(const uint32_t *p, uint32_t n)
{
	uint8_t *seen = calloc(n > 0 ? n : 1, 1);
	int ok = seen != NULL;
	for (uint32_t i = 0; ok && i < n; i++) {
		if (p[i] >= n || seen[p[i]])
			ok = 0;
		else
			seen[p[i]] = 1;
	}
	free(seen);
	return ok;
}

static void test_data_perm(void)
{
	enum { N = 1000 };
	static uint32_t a[N], b[N], c[N], s[N];
	pti_data_perm(a, N, 9, 0);
	pti_data_perm(b, N, 9, 0);
	pti_data_perm(c, N, 9, 1);
	pti_data_perm(s, N, 10, 0);
	PT_TEST_TRUE(is_perm(a, N) && is_perm(c, N) && is_perm(s, N));
	PT_TEST_TRUE(memcmp(a, b, sizeof(a)) == 0);
	PT_TEST_TRUE(memcmp(a, c, sizeof(a)) != 0);
	PT_TEST_TRUE(memcmp(a, s, sizeof(a)) != 0);
	uint32_t fixed = 0;
	for (uint32_t i = 0; i < N; i++)
		fixed += a[i] == i;
	PT_TEST_TRUE(fixed < 20); // a shuffle leaves about one in place
	// Every position sees many values over epochs: no stuck element.
	uint32_t first_zero = 0;
	for (uint64_t e = 0; e < 200; e++) {
		pti_data_perm(c, 10, 9, e);
		PT_TEST_TRUE(is_perm(c, 10));
		first_zero += c[0] == 0;
	}
	PT_TEST_TRUE(first_zero > 5 && first_zero < 50); // about 20
	pti_data_perm(c, 1, 9, 3);
	PT_TEST_TRUE(c[0] == 0);
	c[0] = 77;
	pti_data_perm(c, 0, 9, 3);
	PT_TEST_TRUE(c[0] == 77);
}

static void test_data_gather(void)
{
	uint8_t x[3 * 4] = {0, 255, 51, 1, 2, 3, 4, 5, 128, 0, 0, 255};
	uint8_t y[3] = {4, 7, 9};
	pti_dataset d = {.n = 3, .dim = 4, .classes = 10, .x = x, .y = y};
	uint32_t idx[4] = {2, 0, 0, 1};
	float xo[4 * 4];
	uint8_t yo[4];
	pti_data_gather(xo, yo, &d, idx, 4);
	PT_TEST_TRUE(yo[0] == 9 && yo[1] == 4 && yo[2] == 4 && yo[3] == 7);
	PT_TEST_TRUE(xo[0] == 128.0f / 255.0f && xo[3] == 1.0f);
	PT_TEST_TRUE(xo[4] == 0.0f && xo[5] == 1.0f);
	PT_TEST_NEAR(xo[6], 0.2, 1e-7);
	PT_TEST_TRUE(memcmp(xo + 4, xo + 8, 4 * sizeof(float)) == 0);
	PT_TEST_TRUE(xo[12] == 2.0f / 255.0f && xo[15] == 5.0f / 255.0f);
	for (int i = 0; i < 16; i++)
		PT_TEST_TRUE(xo[i] >= 0.0f && xo[i] <= 1.0f);
}

// test_data_gather_every_byte: each byte value, in a row long enough for
// the vectorized loop and its tail, becomes exactly v / 255 as a scalar
// division gives it (the values every earlier result was trained on).
static void test_data_gather_every_byte(void)
{
	enum { DIM = 3 * 256 + 7 };
	static uint8_t x[DIM];
	static float xo[DIM];
	uint8_t y = 3, yo;
	uint32_t idx = 0;
	volatile float den = 255.0f; // keeps the reference a scalar divide
	for (int j = 0; j < DIM; j++)
		x[j] = (uint8_t)(j * 7 + 1);
	pti_dataset d = {.n = 1, .dim = DIM, .classes = 10, .x = x, .y = &y};
	pti_data_gather(xo, &yo, &d, &idx, 1);
	int same = 1;
	for (int j = 0; j < DIM; j++)
		same &= memcmp(&xo[j], &(float){(float)x[j] / den},
		    sizeof(float)) == 0;
	PT_TEST_TRUE(same);
	PT_TEST_TRUE(yo == 3);
}

static void test_data_fini_zeroed(void)
{
	pti_data d;
	memset(&d, 0, sizeof(d));
	pti_data_fini(&d);
	d.train.x = malloc(10); // half-built: only some arrays present
	pti_data_fini(&d);
	PT_TEST_TRUE(d.train.x == NULL);
	pti_data_fini(&d);
}

// test_data_holdout: the split keeps every example exactly once, in its
// original order on both sides, and picks the same examples whatever the
// job seed (synthetic:N with another seed has other bytes, so compare
// which original indices went where through a tagged copy).
static void test_data_holdout(void)
{
	pti_data d, e;
	PT_TEST_OK(pti_data_load(&d, "synthetic:500", 3));
	// Tag each example by its index in the first feature byte pair.
	for (uint32_t i = 0; i < d.train.n; i++) {
		d.train.x[(size_t)i * d.train.dim] = (uint8_t)(i & 0xff);
		d.train.x[(size_t)i * d.train.dim + 1] = (uint8_t)(i >> 8);
	}
	PT_TEST_OK(pti_data_load(&e, "synthetic:500", 99));
	for (uint32_t i = 0; i < e.train.n; i++) {
		e.train.x[(size_t)i * e.train.dim] = (uint8_t)(i & 0xff);
		e.train.x[(size_t)i * e.train.dim + 1] = (uint8_t)(i >> 8);
	}
	PT_TEST_OK(pti_data_holdout(&d, 50));
	PT_TEST_OK(pti_data_holdout(&e, 50));
	PT_TEST_TRUE(d.train.n == 450 && d.val.n == 50);
	PT_TEST_TRUE(d.val.dim == d.train.dim && d.val.classes == 10);
	uint8_t seen[500] = {0};
	int ordered = 1;
	const pti_dataset *parts[2] = {&d.train, &d.val};
	for (int k = 0; k < 2; k++) {
		int prev = -1;
		for (uint32_t i = 0; i < parts[k]->n; i++) {
			const uint8_t *x = parts[k]->x + (size_t)i * parts[k]->dim;
			int tag = x[0] | x[1] << 8;
			ordered &= tag > prev;
			prev = tag;
			if (tag < 500)
				seen[tag]++;
		}
	}
	int once = 1;
	for (int i = 0; i < 500; i++)
		once &= seen[i] == 1;
	PT_TEST_TRUE(once);
	PT_TEST_TRUE(ordered);
	// The seeds give other bytes, but the same examples are held out.
	for (uint32_t i = 0; i < 50; i++)
		PT_TEST_TRUE(d.val.x[(size_t)i * d.val.dim] ==
			e.val.x[(size_t)i * e.val.dim] &&
		    d.val.x[(size_t)i * d.val.dim + 1] ==
			e.val.x[(size_t)i * e.val.dim + 1]);
	PT_TEST_ERR(pti_data_holdout(&d, 5), PT_EINVAL); // already split
	pti_data_fini(&d);
	pti_data_fini(&e);
	PT_TEST_OK(pti_data_load(&d, "synthetic:20", 3));
	PT_TEST_ERR(pti_data_holdout(&d, 20), PT_EINVAL);
	PT_TEST_TRUE(d.train.n == 20 && d.val.n == 0);
	PT_TEST_OK(pti_data_holdout(&d, 0));
	PT_TEST_TRUE(d.train.n == 20 && d.val.n == 0);
	pti_data_fini(&d);
}

// A click set: its shapes and dims, the same bytes from the same spec
// whatever the job seed, ids gathered as they are, and a validation
// split that keeps each example's ids, click and planted probability
// together.
static void test_data_ctr(void)
{
	pti_data d, e;
	uint32_t dim, classes;
	const char *spec = "ctr:500,6,1000,7";
	PT_TEST_TRUE(pti_data_sparse(spec) && !pti_data_sparse("synthetic:5"));
	PT_TEST_OK(pti_data_dims(spec, &dim, &classes));
	PT_TEST_TRUE(dim == 6 && classes == 2);
	PT_TEST_OK(pti_data_load(&d, spec, 1));
	PT_TEST_OK(pti_data_load(&e, spec, 2));
	PT_TEST_TRUE(d.train.n == 500 && d.test.n == 100 && d.train.dim == 6);
	PT_TEST_TRUE(d.train.x == NULL && d.train.ids && d.train.p);
	PT_TEST_TRUE(memcmp(d.train.ids, e.train.ids, 500 * 6 * 8) == 0);
	PT_TEST_TRUE(memcmp(d.test.ids, d.train.ids, 100 * 6 * 8) != 0);
	pti_ctr_spec cs;
	PT_TEST_OK(pti_ctr_parse(spec, &cs));
	uint64_t want[18];
	for (uint32_t i = 0; i < 18; i++)
		want[i] = e.train.ids[(i / 6 * 7 + 3) * 6 + i % 6];
	PT_TEST_OK(pti_data_holdout(&e, 50));
	PT_TEST_TRUE(e.train.n == 450 && e.val.n == 50 && e.val.ids &&
		     e.val.p && e.val.x == NULL);
	for (uint32_t i = 0; i < 50; i++) {
		double p = 1 / (1 + exp(-pti_ctr_logit(&cs,
				       e.val.ids + (size_t)i * 6)));
		PT_TEST_NEAR(e.val.p[i], p, 1e-6);
	}
	uint32_t idx[3] = {3, 10, 17};
	uint64_t ids[18];
	uint8_t y[3];
	pti_data_gather_ids(ids, y, &d.train, idx, 3);
	PT_TEST_TRUE(memcmp(ids, want, sizeof(ids)) == 0);
	PT_TEST_TRUE(y[1] == d.train.y[10]);
	PT_TEST_ERR(pti_data_load(&e, "ctr:5,0,10", 1), PT_EINVAL);
	pti_data_fini(&d);
	pti_data_fini(&e);
}

// A hashed set: Fashion-MNIST's images as 378 ids each in [0, 2^20),
// the same for the same image, its labels as they are; a validation
// split keeps the images (not ids) it makes them from.
static void test_data_hashed(void)
{
	pti_data d;
	uint32_t dim, classes;
	PT_TEST_TRUE(pti_data_sparse("fashion-mnist:hashed"));
	if (pti_data_dims("fashion-mnist:hashed", &dim, &classes) == PT_ENOENT) {
		fprintf(stderr, "  skip: no Fashion-MNIST files\n");
		return;
	}
	PT_TEST_TRUE(dim == 378 && classes == 10);
	PT_TEST_OK(pti_data_load(&d, "fashion-mnist:hashed", 1));
	PT_TEST_TRUE(d.test.dim == 378 && d.test.xdim == 784 &&
		     pti_dataset_sparse(&d.test) && d.test.ids == NULL);
	uint32_t idx[2] = {7, 7};
	uint64_t ids[2 * 378];
	uint8_t y[2];
	pti_data_gather_ids(ids, y, &d.test, idx, 2);
	PT_TEST_TRUE(memcmp(ids, ids + 378, 378 * 8) == 0 &&
		     y[0] == d.test.y[7]);
	uint64_t distinct = 0;
	for (int i = 0; i < 378; i++) {
		PT_TEST_TRUE(ids[i] < (1u << PT_DATA_HASH_BITS));
		distinct += i == 0 || ids[i] != ids[i - 1];
	}
	PT_TEST_TRUE(distinct > 100); // fields hash apart
	uint64_t *all = pti_data_all_ids(&d.test);
	PT_TEST_TRUE(all != NULL && memcmp(all + 7 * 378, ids, 378 * 8) == 0);
	free(all);
	PT_TEST_OK(pti_data_holdout(&d, 100));
	PT_TEST_TRUE(d.val.n == 100 && d.val.xdim == 784 && d.val.dim == 378);
	pti_data_fini(&d);
}

static const pti_test_case cases[] = {
	{"test_data_fashion_loads", test_data_fashion_loads},
	{"test_data_dims", test_data_dims},
	{"test_data_fashion_dir_small", test_data_fashion_dir_small},
	{"test_data_batches_ahead_same", test_data_batches_ahead_same},
	{"test_data_missing_file", test_data_missing_file},
	{"test_data_truncated", test_data_truncated},
	{"test_data_gzip_corrupt", test_data_gzip_corrupt},
	{"test_data_bad_magic", test_data_bad_magic},
	{"test_data_wrong_dims", test_data_wrong_dims},
	{"test_data_hostile_header", test_data_hostile_header},
	{"test_data_trailing_bytes", test_data_trailing_bytes},
	{"test_data_uncompressed", test_data_uncompressed},
	{"test_data_count_mismatch", test_data_count_mismatch},
	{"test_data_label_range", test_data_label_range},
	{"test_data_bad_specs", test_data_bad_specs},
	{"test_data_synthetic_shapes", test_data_synthetic_shapes},
	{"test_data_synthetic_deterministic",
	    test_data_synthetic_deterministic},
	{"test_data_synthetic_learnable", test_data_synthetic_learnable},
	{"test_data_perm", test_data_perm},
	{"test_data_gather", test_data_gather},
	{"test_data_gather_every_byte", test_data_gather_every_byte},
	{"test_data_fini_zeroed", test_data_fini_zeroed},
	{"test_data_holdout", test_data_holdout},
	{"test_data_ctr", test_data_ctr},
	{"test_data_hashed", test_data_hashed},
	{NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
