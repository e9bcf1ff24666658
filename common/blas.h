// common/blas.h - the dense kernels the model needs, behind pti_blas_*.
// common/blas.c is the only file in pstrain that includes <cblas.h>
// (OpenBLAS); each kernel has a plain-loop twin (suffix _ref) with the
// same signature, for tests to compare against. Not a general BLAS: only
// what worker/model.c calls. All matrices are row-major; callers own
// every buffer and nothing here allocates.
#ifndef PT_COMMON_BLAS_H
#define PT_COMMON_BLAS_H

#include <stddef.h>
#include <stdint.h>

// pti_blas_sgemm computes c = alpha * op(a) op(b) + beta * c, where op(a)
// is (m, k) and op(b) is (k, n): a is stored (m, k) with row stride lda,
// or (k, m) when trans_a is set; likewise b is (k, n) with row stride
// ldb, or (n, k) when trans_b is set; c is (m, n) with row stride ldc.
// When beta is 0, c is not read (NaN in c does not leak through). Safe
// from any thread on distinct outputs; OpenBLAS may use its own threads
// (see pti_blas_threads).
void pti_blas_sgemm(int trans_a, int trans_b, uint32_t m, uint32_t n,
    uint32_t k, float alpha, const float *a, uint32_t lda, const float *b,
    uint32_t ldb, float beta, float *c, uint32_t ldc);

// pti_blas_sgemm_ref is pti_blas_sgemm as plain loops, accumulating in
// double; slow, for tests.
void pti_blas_sgemm_ref(int trans_a, int trans_b, uint32_t m, uint32_t n,
    uint32_t k, float alpha, const float *a, uint32_t lda, const float *b,
    uint32_t ldb, float beta, float *c, uint32_t ldc);

// pti_blas_sumsq returns the sum of x[i]^2 over n floats, accumulated in
// double (a gradient's squared norm); the order of the sum is OpenBLAS's.
double pti_blas_sumsq(const float *x, uint64_t n);

// pti_blas_sumsq_ref is pti_blas_sumsq as a plain loop, in index order.
double pti_blas_sumsq_ref(const float *x, uint64_t n);

// pti_blas_threads sets how many threads OpenBLAS uses for each call from
// now on (process-wide). Returns 0, or PT_EINVAL when n < 1.
int pti_blas_threads(int n);

// pti_blas_info copies the name of the kernel OpenBLAS chose for this
// CPU (e.g. "Haswell") into core (size n) and returns the threads it
// uses per call. Results of one job differ between kernels in the last
// bits, which is why a run records it.
int pti_blas_info(char *core, size_t n);

// pti_blas_kernel_note: 1, with what to say in msg (size n), when the
// kernel OpenBLAS uses is older than this CPU's vectors allow (Prescott's
// on an AVX-512 CPU, as OpenBLAS falls back to where it does not know
// the CPU), naming the OPENBLAS_CORETYPE that fixes it; else 0.
int pti_blas_kernel_note(char *msg, size_t n);

#endif // PT_COMMON_BLAS_H
