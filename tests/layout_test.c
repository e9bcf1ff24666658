// tests/layout_test.c - model specs, placement across servers, and
// initial values computed piecewise.
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/layout.h"
#include "tests/test.h"

static void test_layout_mlp_shapes(void)
{
	pti_layout l;
	PT_TEST_OK(pti_layout_init(&l, "mlp:256,128", 784, 10));
	PT_TEST_TRUE(l.kind == PT_MODEL_MLP && l.n_layers == 3);
	PT_TEST_TRUE(l.n_vars == 6);
	PT_TEST_TRUE(l.vars[0].rows == 784 && l.vars[0].cols == 256);
	PT_TEST_TRUE(l.vars[1].n == 256 && l.vars[1].off == 784 * 256);
	PT_TEST_TRUE(l.vars[4].rows == 128 && l.vars[4].cols == 10);
	PT_TEST_TRUE(l.n_params ==
		     784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
	PT_TEST_OK(pti_layout_init(&l, "softmax", 64, 10));
	PT_TEST_TRUE(l.n_vars == 2 && l.n_params == 650);
}

static void test_layout_bad_specs(void)
{
	pti_layout l;
	const char *bad[] = {"mlp", "mlp:", "mlp:0", "mlp:12,", "mlp:,3",
	    "mlp:-4", "mlp:3x", "mlp:1,2,3,4,5,6,7,8", "mlp:99999999", "cnn",
	    ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PT_TEST_ERR(pti_layout_init(&l, bad[i], 784, 10), PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--model");
	}
}

static void test_layout_cnn_shapes(void)
{
	pti_layout l;
	// cnn:32,64 on 28x28: conv 1->32 at 28, pool 14, conv 32->64, pool 7,
	// dense 3136->10.
	PT_TEST_OK(pti_layout_init(&l, "cnn:32,64", 784, 10));
	PT_TEST_TRUE(l.kind == PT_MODEL_CNN && l.n_layers == 3);
	PT_TEST_TRUE(l.width[0] == 784 && l.width[3] == 10);
	PT_TEST_TRUE(l.width[1] == 14 * 14 * 32 && l.width[2] == 7 * 7 * 64);
	PT_TEST_TRUE(l.side[0] == 28 && l.side[1] == 14 && l.side[2] == 7);
	PT_TEST_TRUE(l.chan[0] == 1 && l.chan[1] == 32 && l.chan[2] == 64);
	PT_TEST_TRUE(l.n_vars == 6);
	const char *names[] = {"w0", "b0", "w1", "b1", "w2", "b2"};
	uint32_t rows[] = {9, 1, 288, 1, 3136, 1};
	uint32_t cols[] = {32, 32, 64, 64, 10, 10};
	uint32_t fan[] = {9, 9, 288, 288, 3136, 3136};
	uint64_t at = 0;
	for (int i = 0; i < 6; i++) {
		const pti_var *v = &l.vars[i];
		PT_TEST_TRUE(strcmp(v->name, names[i]) == 0);
		PT_TEST_TRUE(v->rows == rows[i] && v->cols == cols[i]);
		PT_TEST_TRUE(v->fan_in == fan[i] && v->off == at);
		PT_TEST_TRUE(v->n == (uint64_t)rows[i] * cols[i]);
		PT_TEST_NEAR(v->bound, 1.0 / sqrt(fan[i]), 1e-7);
		at += v->n;
	}
	PT_TEST_TRUE(l.n_params == at && at == 9 * 32 + 32 + 288 * 64 + 64 +
							  3136 * 10 + 10);
	// Odd sides pool with floor: 7 -> 3 -> 1; four layers on 28: 1x1.
	PT_TEST_OK(pti_layout_init(&l, "cnn:4,5", 49, 3));
	PT_TEST_TRUE(l.side[1] == 3 && l.side[2] == 1 && l.width[2] == 5);
	PT_TEST_TRUE(l.vars[4].rows == 5 && l.vars[4].cols == 3);
	PT_TEST_OK(pti_layout_init(&l, "cnn:1,2,3,4", 784, 10));
	PT_TEST_TRUE(l.n_layers == 5 && l.side[4] == 1 && l.width[4] == 4);
	PT_TEST_TRUE(l.vars[6].rows == 27 && l.vars[6].cols == 4);
	// Hidden dense layers after '/': cnn:32,64/1024 is TensorFlow's
	// "deep MNIST" CNN, 3136 -> 1024 -> 10 after the convolutions.
	PT_TEST_OK(pti_layout_init(&l, "cnn:32,64/1024", 784, 10));
	PT_TEST_TRUE(l.n_conv == 2 && l.n_layers == 4 && l.n_vars == 8);
	PT_TEST_TRUE(l.width[2] == 3136 && l.width[3] == 1024 &&
		     l.width[4] == 10);
	PT_TEST_TRUE(l.vars[4].rows == 3136 && l.vars[4].cols == 1024);
	PT_TEST_TRUE(l.vars[6].rows == 1024 && l.vars[6].cols == 10);
	PT_TEST_TRUE(strcmp(l.vars[6].name, "w3") == 0);
	PT_TEST_NEAR(l.vars[6].bound, 1.0 / sqrt(1024), 1e-7);
	PT_TEST_TRUE(l.n_params == 9 * 32 + 32 + 288 * 64 + 64 +
				       3136 * 1024 + 1024 + 1024 * 10 + 10);
	PT_TEST_OK(pti_layout_init(&l, "cnn:4/8,6", 784, 10));
	PT_TEST_TRUE(l.n_conv == 1 && l.n_layers == 4 &&
		     l.width[1] == 14 * 14 * 4 && l.width[2] == 8 &&
		     l.width[3] == 6 && l.width[4] == 10);
}

static void test_layout_cnn_refused(void)
{
	pti_layout l;
	const char *bad[] = {"cnn:", "cnn:0", "cnn:8,", "cnn:,8", "cnn:-4",
	    "cnn:8x", "cnn:1,2,3,4,5", "cnn:1025", "cnnx:8", "cnn", "cnn:8/",
	    "cnn:8/0", "cnn:/8", "cnn:8/4/4", "cnn:8/1,2,3,4", "cnn:8/4,"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PT_TEST_ERR(pti_layout_init(&l, bad[i], 784, 10), PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--model");
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), bad[i]);
	}
	PT_TEST_ERR(pti_layout_init(&l, "cnn:1,2,3,4,5", 784, 10), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "at most 4 conv layers");
	PT_TEST_ERR(pti_layout_init(&l, "cnn:8/1,2,3,4", 784, 10), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "at most 3 hidden dense layers");
	// Not a square image: the message names the spec and the dim.
	uint32_t dims[] = {785, 783, 64 * 3, 2};
	for (int i = 0; i < 4; i++) {
		char dim[16];
		snprintf(dim, sizeof(dim), "%u", dims[i]);
		PT_TEST_ERR(pti_layout_init(&l, "cnn:32,64", dims[i], 10),
		    PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--model cnn:32,64");
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), dim);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "square");
	}
	// Too small for its poolings: 8 -> 4 -> 2 -> 1 -> 0.
	PT_TEST_OK(pti_layout_init(&l, "cnn:2,2,2", 64, 3));
	PT_TEST_ERR(pti_layout_init(&l, "cnn:2,2,2,2", 64, 3), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "too small");
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "64");
	PT_TEST_ERR(pti_layout_init(&l, "cnn:2", 1, 3), PT_EINVAL);
	// Too many values per image for the buffers: 1024 x 1024 pixels of
	// 1024 channels.
	PT_TEST_ERR(pti_layout_init(&l, "cnn:1024", 1024 * 1024, 3), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "values per image");
}

static void test_layout_shards_cover_evenly(void)
{
	pti_layout l;
	PT_TEST_OK(pti_layout_init(&l, "mlp:256,128", 784, 10));
	for (uint32_t s = 1; s <= 7; s++) {
		uint64_t at = 0, min = UINT64_MAX, max = 0;
		for (uint32_t i = 0; i < s; i++) {
			pti_range r = pti_layout_shard(&l, i, s);
			PT_TEST_TRUE(r.lo == at);
			at = r.hi;
			uint64_t n = r.hi - r.lo;
			min = n < min ? n : min;
			max = n > max ? n : max;
		}
		PT_TEST_TRUE(at == l.n_params);
		PT_TEST_TRUE(max - min <= 1);
	}
}

static void test_layout_hash_differs(void)
{
	pti_layout a, b, c;
	PT_TEST_OK(pti_layout_init(&a, "mlp:256,128", 784, 10));
	PT_TEST_OK(pti_layout_init(&b, "mlp:256,128", 784, 10));
	PT_TEST_OK(pti_layout_init(&c, "mlp:128,256", 784, 10));
	PT_TEST_TRUE(pti_layout_hash(&a) == pti_layout_hash(&b));
	PT_TEST_TRUE(pti_layout_hash(&a) != pti_layout_hash(&c));
	// CNNs: the same spec agrees; other channels, order or depth differ.
	const char *cnn[] = {"cnn:8,16", "cnn:16,8", "cnn:8", "cnn:8,16,16",
	    "cnn:8,17"};
	uint64_t h[5];
	for (int i = 0; i < 5; i++) {
		PT_TEST_OK(pti_layout_init(&a, cnn[i], 784, 10));
		h[i] = pti_layout_hash(&a);
		PT_TEST_TRUE(h[i] != pti_layout_hash(&c));
		for (int j = 0; j < i; j++)
			PT_TEST_TRUE(h[i] != h[j]);
	}
	PT_TEST_OK(pti_layout_init(&b, "cnn:8,16", 784, 10));
	PT_TEST_TRUE(pti_layout_hash(&b) == h[0]);
}

static void test_layout_tables(void)
{
	pti_layout a, b;
	PT_TEST_OK(pti_layout_init(&a, "softmax", 784, 10));
	uint64_t bare = pti_layout_hash(&a);
	PT_TEST_OK(pti_layout_table(&a, "emb", 16, 0.01));
	PT_TEST_TRUE(a.n_tables == 1 && a.tables[0].dim == 16);
	PT_TEST_TRUE(pti_layout_hash(&a) != bare);
	// The hash tells tables apart by name, dim and initial bound.
	const char *name[] = {"emb", "emb", "emc"};
	uint32_t dim[] = {16, 8, 16};
	double bound[] = {0.02, 0.01, 0.01};
	for (int i = 0; i < 3; i++) {
		PT_TEST_OK(pti_layout_init(&b, "softmax", 784, 10));
		PT_TEST_OK(pti_layout_table(&b, name[i], dim[i], bound[i]));
		PT_TEST_TRUE(pti_layout_hash(&b) != pti_layout_hash(&a));
	}
	PT_TEST_OK(pti_layout_init(&b, "softmax", 784, 10));
	PT_TEST_OK(pti_layout_table(&b, "emb", 16, 0.01));
	PT_TEST_TRUE(pti_layout_hash(&b) == pti_layout_hash(&a));
	// Names are shared with variables; dims and bounds are bounded.
	PT_TEST_TRUE(pti_layout_table(&b, "emb", 4, 0) == PT_EINVAL);
	PT_TEST_TRUE(pti_layout_table(&b, "w0", 4, 0) == PT_EINVAL);
	PT_TEST_TRUE(pti_layout_table(&b, "x", 0, 0) == PT_EINVAL);
	PT_TEST_TRUE(pti_layout_table(&b, "x", PT_TABLE_MAX_DIM + 1, 0) ==
		     PT_EINVAL);
	PT_TEST_TRUE(pti_layout_table(&b, "x", 4, -1) == PT_EINVAL);
	PT_TEST_TRUE(pti_layout_table(&b, "", 4, 0) == PT_EINVAL);
	pti_layout_vars(&b);
	PT_TEST_OK(pti_layout_table(&b, "t", 4, 0));
	PT_TEST_TRUE(pti_layout_add(&b, "t", 4, 0) == PT_EINVAL);
	for (int i = 1; i < PT_MAX_TABLES; i++) {
		char n[8];
		snprintf(n, sizeof(n), "t%d", i);
		PT_TEST_OK(pti_layout_table(&b, n, 4, 0));
	}
	PT_TEST_TRUE(pti_layout_table(&b, "more", 4, 0) == PT_ERANGE);
}

static void test_layout_init_piecewise(void)
{
	pti_layout l;
	PT_TEST_OK(pti_layout_init(&l, "mlp:16,8", 20, 3));
	float *all = malloc(l.n_params * sizeof(float));
	float *part = malloc(l.n_params * sizeof(float));
	pti_layout_init_values(all, &l, 42, 0, l.n_params);
	for (uint32_t s = 1; s <= 5; s++)
		for (uint32_t i = 0; i < s; i++) {
			pti_range r = pti_layout_shard(&l, i, s);
			pti_layout_init_values(part + r.lo, &l, 42, r.lo, r.hi);
		}
	PT_TEST_TRUE(memcmp(all, part, l.n_params * sizeof(float)) == 0);
	// Within the bound 1/sqrt(fan_in), not all equal, seed-dependent.
	int same = 1;
	for (uint32_t v = 0; v < l.n_vars; v++)
		for (uint64_t i = 0; i < l.vars[v].n; i++) {
			float x = all[l.vars[v].off + i];
			PT_TEST_TRUE(fabsf(x) <= 1.0f /
						    sqrtf(l.vars[v].fan_in));
		}
	pti_layout_init_values(part, &l, 43, 0, l.n_params);
	for (uint64_t i = 0; i < l.n_params; i++)
		same &= part[i] == all[i];
	PT_TEST_TRUE(!same);
	free(all);
	free(part);
	// A CNN's conv weights start within 1/sqrt(9 C_in).
	PT_TEST_OK(pti_layout_init(&l, "cnn:4,6", 64, 3));
	all = malloc(l.n_params * sizeof(float));
	pti_layout_init_values(all, &l, 42, 0, l.n_params);
	float top[6] = {0};
	for (uint32_t v = 0; v < l.n_vars; v++)
		for (uint64_t i = 0; i < l.vars[v].n; i++)
			top[v] = fmaxf(top[v], fabsf(all[l.vars[v].off + i]));
	PT_TEST_TRUE(top[0] <= 1.0f / 3 && top[0] > 0.25f);
	PT_TEST_TRUE(top[2] <= 1.0f / 6 && top[2] > 0.1f);
	free(all);
}

static const pti_test_case cases[] = {
    {"test_layout_mlp_shapes", test_layout_mlp_shapes},
    {"test_layout_bad_specs", test_layout_bad_specs},
    {"test_layout_cnn_shapes", test_layout_cnn_shapes},
    {"test_layout_cnn_refused", test_layout_cnn_refused},
    {"test_layout_shards_cover_evenly", test_layout_shards_cover_evenly},
    {"test_layout_hash_differs", test_layout_hash_differs},
    {"test_layout_tables", test_layout_tables},
    {"test_layout_init_piecewise", test_layout_init_piecewise},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
