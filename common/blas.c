// common/blas.c - pti_blas_* on OpenBLAS, and their plain-loop twins.
// The only file that includes <cblas.h>; keep it that way so the rest of
// pstrain builds against one small interface.
#include "common/blas.h"

#include <cblas.h>
#include <stdio.h>

#include "common/err.h"

void pti_blas_sgemm(int trans_a, int trans_b, uint32_t m, uint32_t n,
    uint32_t k, float alpha, const float *a, uint32_t lda, const float *b,
    uint32_t ldb, float beta, float *c, uint32_t ldc)
{
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
	    trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
	    (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
	    (blasint)ldc);
}

void pti_blas_sgemm_ref(int trans_a, int trans_b, uint32_t m, uint32_t n,
    uint32_t k, float alpha, const float *a, uint32_t lda, const float *b,
    uint32_t ldb, float beta, float *c, uint32_t ldc)
{
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			double s = 0;
			for (uint32_t p = 0; p < k; p++) {
				float x = trans_a ? a[(size_t)p * lda + i]
						  : a[(size_t)i * lda + p];
				float y = trans_b ? b[(size_t)j * ldb + p]
						  : b[(size_t)p * ldb + j];
				s += (double)x * y;
			}
			float *o = &c[(size_t)i * ldc + j];
			// As in BLAS, beta == 0 means c is output only.
			*o = (float)(alpha * s +
				     (beta != 0.0f ? (double)beta * *o : 0.0));
		}
}

double pti_blas_sumsq(const float *x, uint64_t n)
{
	double s = 0;
	// OpenBLAS takes an int count: long vectors go in parts.
	for (uint64_t i = 0; i < n; i += 1u << 30) {
		uint64_t k = n - i < (1u << 30) ? n - i : (1u << 30);
		s += cblas_dsdot((blasint)k, x + i, 1, x + i, 1);
	}
	return s;
}

double pti_blas_sumsq_ref(const float *x, uint64_t n)
{
	double s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	return s;
}

int pti_blas_threads(int n)
{
	if (n < 1)
		return pti_err_set(PT_EINVAL, "BLAS threads: %d, need >= 1",
		    n);
	openblas_set_num_threads(n);
	return 0;
}

int pti_blas_info(char *core, size_t n)
{
	const char *name = openblas_get_corename();
	snprintf(core, n, "%s", name ? name : "unknown");
	return openblas_get_num_threads();
}
