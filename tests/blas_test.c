// tests/blas_test.c - the OpenBLAS kernels against their plain-loop twins
// on random inputs: every transpose combination, odd and padded shapes.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/blas.h"
#include "common/rng.h"
#include "tests/test.h"

// fill_normal writes n standard normal floats from r.
static void fill_normal(float *x, size_t n, pti_rng *r)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)pti_rng_normal(r);
}

// gemm_case compares the two sgemm paths on one shape, with row strides
// pad elements longer than needed. Returns the largest error relative to
// the magnitude |alpha| |op(a)| |op(b)| + |beta| |c| of each element.
static double gemm_case(int ta, int tb, uint32_t m, uint32_t n, uint32_t k,
    uint32_t pad, float alpha, float beta, uint64_t seed)
{
	pti_rng r;
	pti_rng_seed(&r, seed, (uint64_t)m << 32 | n << 16 | k);
	uint32_t a_rows = ta ? k : m, a_cols = ta ? m : k;
	uint32_t b_rows = tb ? n : k, b_cols = tb ? k : n;
	uint32_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
	size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb;
	size_t nc = (size_t)m * ldc;
	float *a = malloc(na * sizeof(float)); // (a_rows, lda)
	float *b = malloc(nb * sizeof(float)); // (b_rows, ldb)
	float *c = malloc(nc * sizeof(float)); // (m, ldc)
	float *ref = malloc(nc * sizeof(float));
	float *mag = malloc(nc * sizeof(float));
	float *abs_a = malloc(na * sizeof(float));
	float *abs_b = malloc(nb * sizeof(float));
	fill_normal(a, na, &r);
	fill_normal(b, nb, &r);
	fill_normal(c, nc, &r);
	for (size_t i = 0; i < na; i++)
		abs_a[i] = fabsf(a[i]);
	for (size_t i = 0; i < nb; i++)
		abs_b[i] = fabsf(b[i]);
	for (size_t i = 0; i < nc; i++) {
		ref[i] = c[i];
		mag[i] = fabsf(c[i]);
	}
	pti_blas_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	pti_blas_sgemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, ref,
	    ldc);
	pti_blas_sgemm_ref(ta, tb, m, n, k, fabsf(alpha), abs_a, lda, abs_b,
	    ldb, fabsf(beta), mag, ldc);
	double worst = 0;
	for (uint32_t i = 0; i < m; i++) {
		for (uint32_t j = 0; j < n; j++) {
			size_t at = (size_t)i * ldc + j;
			double e = fabs((double)c[at] - ref[at]) /
				   ((double)mag[at] + 1e-30);
			worst = e > worst ? e : worst;
		}
		// The padding past column n must be left alone.
		for (uint32_t j = n; j < ldc; j++) {
			size_t at = (size_t)i * ldc + j;
			if (c[at] != ref[at])
				worst = INFINITY;
		}
	}
	free(a);
	free(b);
	free(c);
	free(ref);
	free(mag);
	free(abs_a);
	free(abs_b);
	return worst;
}

static void test_blas_sgemm_matches_ref(void)
{
	static const uint32_t shapes[][3] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9},
	    {3, 4, 1}, {7, 13, 5}, {17, 33, 65}, {64, 10, 128},
	    {31, 29, 257}};
	int n_shapes = (int)(sizeof(shapes) / sizeof(shapes[0]));
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			for (int s = 0; s < n_shapes; s++) {
				const uint32_t *d = shapes[s];
				double e = gemm_case(ta, tb, d[0], d[1], d[2],
				    (uint32_t)s % 3, 0.75f, -1.25f, 7);
				if (!(e < 1e-5))
					PT_TEST_FAIL_AT("trans %d,%d (%u, %u, "
							"%u): rel error %g",
					    ta, tb, d[0], d[1], d[2], e);
			}
}

static void test_blas_sgemm_model_shapes(void)
{
	// The products of an MLP 784-256-128-10 step with batch 64.
	static const int shapes[][5] = {{0, 0, 64, 256, 784},
	    {1, 0, 784, 256, 64}, {0, 1, 64, 256, 128}, {1, 0, 128, 10, 64},
	    {0, 1, 64, 128, 10}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		const int *d = shapes[s];
		double e = gemm_case(d[0], d[1], (uint32_t)d[2],
		    (uint32_t)d[3], (uint32_t)d[4], 0, 1.0f, 0.0f, 11);
		if (!(e < 1e-5))
			PT_TEST_FAIL_AT("shape %zu: rel error %g", s, e);
	}
}

static void test_blas_sgemm_beta_zero_ignores_c(void)
{
	float a[6] = {1, 2, 3, 4, 5, 6}; // (2, 3)
	float b[6] = {1, 0, 0, 1, 1, 1}; // (3, 2)
	float c[4], ref[4];
	for (int i = 0; i < 4; i++)
		c[i] = ref[i] = NAN;
	pti_blas_sgemm(0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
	pti_blas_sgemm_ref(0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, ref, 2);
	const float want[4] = {4, 5, 10, 11};
	for (int i = 0; i < 4; i++) {
		PT_TEST_NEAR(c[i], want[i], 1e-6);
		PT_TEST_NEAR(ref[i], want[i], 1e-6);
	}
}

// The squared norm in double, against the loop in index order, over a
// length that is no multiple of any vector width.
static void test_blas_sumsq_matches_ref(void)
{
	enum { N = 100003 };
	static float x[N];
	uint64_t st = 7;
	for (int i = 0; i < N; i++) {
		st = st * 6364136223846793005ULL + 1442695040888963407ULL;
		x[i] = (float)((int64_t)(st >> 33) % 2001 - 1000) * 1e-3f;
	}
	double got = pti_blas_sumsq(x, N), want = pti_blas_sumsq_ref(x, N);
	PT_TEST_TRUE(want > 1000);
	PT_TEST_NEAR(got, want, 1e-9 * want);
	PT_TEST_NEAR(pti_blas_sumsq(x, 3),
	    (double)x[0] * x[0] + (double)x[1] * x[1] + (double)x[2] * x[2],
	    1e-12);
	PT_TEST_TRUE(pti_blas_sumsq(x, 0) == 0);
}

static void test_blas_threads(void)
{
	PT_TEST_OK(pti_blas_threads(2));
	double e = gemm_case(1, 0, 97, 83, 131, 1, 1.0f, 0.5f, 3);
	PT_TEST_TRUE(e < 1e-5);
	PT_TEST_OK(pti_blas_threads(1));
	PT_TEST_ERR(pti_blas_threads(0), PT_EINVAL);
	PT_TEST_ERR(pti_blas_threads(-3), PT_EINVAL);
}

static const pti_test_case cases[] = {
    {"test_blas_sgemm_matches_ref", test_blas_sgemm_matches_ref},
    {"test_blas_sgemm_model_shapes", test_blas_sgemm_model_shapes},
    {"test_blas_sgemm_beta_zero_ignores_c",
	test_blas_sgemm_beta_zero_ignores_c},
    {"test_blas_sumsq_matches_ref", test_blas_sumsq_matches_ref},
    {"test_blas_threads", test_blas_threads},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
