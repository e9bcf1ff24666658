// tests/layout_test.c - model specs, placement across servers, and
// initial values computed piecewise.
#include <stdlib.h>

#include "layout.h"
#include "test.h"

static void test_layout_mlp_shapes(void)
{
	pt_layout l;
	PT_TEST_OK(pt_layout_init(&l, "mlp:256,128", 784, 10));
	PT_TEST_TRUE(l.kind == PT_MODEL_MLP && l.n_layers == 3);
	PT_TEST_TRUE(l.n_vars == 6);
	PT_TEST_TRUE(l.vars[0].rows == 784 && l.vars[0].cols == 256);
	PT_TEST_TRUE(l.vars[1].n == 256 && l.vars[1].off == 784 * 256);
	PT_TEST_TRUE(l.vars[4].rows == 128 && l.vars[4].cols == 10);
	PT_TEST_TRUE(l.n_params ==
		     784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
	PT_TEST_OK(pt_layout_init(&l, "softmax", 64, 10));
	PT_TEST_TRUE(l.n_vars == 2 && l.n_params == 650);
}

static void test_layout_bad_specs(void)
{
	pt_layout l;
	const char *bad[] = {"mlp", "mlp:", "mlp:0", "mlp:12,", "mlp:,3",
	    "mlp:-4", "mlp:3x", "mlp:1,2,3,4,5,6,7,8", "mlp:99999999", "cnn",
	    ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PT_TEST_ERR(pt_layout_init(&l, bad[i], 784, 10), PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--model");
	}
}

static void test_layout_shards_cover_evenly(void)
{
	pt_layout l;
	PT_TEST_OK(pt_layout_init(&l, "mlp:256,128", 784, 10));
	for (uint32_t s = 1; s <= 7; s++) {
		uint64_t at = 0, min = UINT64_MAX, max = 0;
		for (uint32_t i = 0; i < s; i++) {
			pt_range r = pt_layout_shard(&l, i, s);
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
	pt_layout a, b, c;
	PT_TEST_OK(pt_layout_init(&a, "mlp:256,128", 784, 10));
	PT_TEST_OK(pt_layout_init(&b, "mlp:256,128", 784, 10));
	PT_TEST_OK(pt_layout_init(&c, "mlp:128,256", 784, 10));
	PT_TEST_TRUE(pt_layout_hash(&a) == pt_layout_hash(&b));
	PT_TEST_TRUE(pt_layout_hash(&a) != pt_layout_hash(&c));
}

static void test_layout_init_piecewise(void)
{
	pt_layout l;
	PT_TEST_OK(pt_layout_init(&l, "mlp:16,8", 20, 3));
	float *all = malloc(l.n_params * sizeof(float));
	float *part = malloc(l.n_params * sizeof(float));
	pt_layout_init_values(all, &l, 42, 0, l.n_params);
	for (uint32_t s = 1; s <= 5; s++)
		for (uint32_t i = 0; i < s; i++) {
			pt_range r = pt_layout_shard(&l, i, s);
			pt_layout_init_values(part + r.lo, &l, 42, r.lo, r.hi);
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
	pt_layout_init_values(part, &l, 43, 0, l.n_params);
	for (uint64_t i = 0; i < l.n_params; i++)
		same &= part[i] == all[i];
	PT_TEST_TRUE(!same);
	free(all);
	free(part);
}

static const pt_test_case cases[] = {
    {"test_layout_mlp_shapes", test_layout_mlp_shapes},
    {"test_layout_bad_specs", test_layout_bad_specs},
    {"test_layout_shards_cover_evenly", test_layout_shards_cover_evenly},
    {"test_layout_hash_differs", test_layout_hash_differs},
    {"test_layout_init_piecewise", test_layout_init_piecewise},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pt_test_main(argc, argv, cases);
}
