// common/blas.c - pti_blas_* on OpenBLAS, and their plain-loop twins.
// The only file that includes <cblas.h>; keep it that way so the rest of
// pstrain builds against one small interface.
#include "common/blas.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// The x86-64 kernels of OpenBLAS by the widest vectors they use: 3
// AVX-512, 2 AVX2 and FMA, 1 AVX, 0 older; -1 for a name not listed
// (another architecture, a newer kernel), which is never second-guessed.
static const struct blas_kernel {
	const char *name;
	int level;
} blas_kernels[] = {
    {"SkylakeX", 3}, {"Cooperlake", 3}, {"SapphireRapids", 3},
    {"Haswell", 2}, {"Zen", 2}, {"Excavator", 2},
    {"Sandybridge", 1}, {"Bulldozer", 1}, {"Piledriver", 1},
    {"Steamroller", 1},
    {"Prescott", 0}, {"Core2", 0}, {"Penryn", 0}, {"Dunnington", 0},
    {"Nehalem", 0}, {"Atom", 0}, {"Opteron", 0}, {"Barcelona", 0},
    {"Katmai", 0}, {"Coppermine", 0}, {"Northwood", 0}, {"Banias", 0},
};
// The kernel to name for each level.
static const char *const blas_best[] = {"", "Sandybridge", "Haswell",
    "SkylakeX"};
static const char *const blas_vectors[] = {"", "AVX", "AVX2",
    "AVX-512"};

static int kernel_level(const char *name)
{
	for (size_t i = 0; i < sizeof(blas_kernels) / sizeof(blas_kernels[0]);
	     i++)
		if (strcasecmp(blas_kernels[i].name, name) == 0)
			return blas_kernels[i].level;
	return -1;
}

// cpu_level: the widest vectors /proc/cpuinfo's flags (those the kernel
// lets programs use) offer, as kernel_level counts; -1 unknown.
static int cpu_level(void)
{
	static char line[8192];
	FILE *f = fopen("/proc/cpuinfo", "r");
	int level = -1;
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		int has[7] = {0};
		static const char *const want[] = {"avx", "avx2", "fma",
		    "avx512f", "avx512bw", "avx512vl", "avx512dq"};
		for (char *t = strtok(strchr(line, ':'), " :\t\n"); t != NULL;
		     t = strtok(NULL, " \t\n"))
			for (int k = 0; k < 7; k++)
				has[k] |= strcmp(t, want[k]) == 0;
		level = has[3] && has[4] && has[5] && has[6] ? 3
			: has[1] && has[2]		     ? 2
			: has[0]			     ? 1
							     : 0;
		break;
	}
	fclose(f);
	return level;
}

int pti_blas_kernel_note(char *msg, size_t n)
{
	char core[64];
	pti_blas_info(core, sizeof(core));
	int have = kernel_level(core), can = cpu_level();
	if (have < 0 || can <= have)
		return 0;
	const char *env = getenv("OPENBLAS_CORETYPE");
	snprintf(msg, n, "OpenBLAS uses its %s kernel on a CPU with %s%s: "
	    "its products run slower than this CPU allows (Prescott's "
	    "about 3x slower than SkylakeX's for an MLP); set "
	    "OPENBLAS_CORETYPE=%s for the faster one (results then differ "
	    "in their last bits, as between any two kernels)", core,
	    blas_vectors[can], env != NULL && env[0] != '\0'
	    ? " (OPENBLAS_CORETYPE chose it)" : "", blas_best[can]);
	return 1;
}
