// bench/split.c - whether this machine's OpenBLAS kernel gives the same
// bits when a layer's matrix product is cut into blocks. Hiding a 1 x 1
// job's round trip behind its compute needs exactly that: the first
// layer's gradient pushed in blocks as backward makes them, and the next
// forward started on the blocks that are back. A sync job must stay
// bit-identical to the uncut product, so make bench records the answer
// with the kernel's name (docs/PERFORMANCE.md).
//
//   split [B N_IN N_OUT BLOCKS]   default 256 784 256 4 (mlp:256,128's
//                                 first layer at batch 256)
//
// Prints one line per product, "NAME identical|differs", for the forward
// product x w cut by columns of w, and the gradient x^T dz cut by its
// columns and by its rows.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas.h"

// fill writes n reproducible values in [-0.5, 0.5), a fraction of them
// zero (as after a ReLU).
static void fill(float *x, size_t n, unsigned *s, float scale, int zeros)
{
	for (size_t i = 0; i < n; i++) {
		*s = *s * 1103515245u + 12345u;
		float v = (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
		x[i] = zeros && v < -0.3f ? 0.0f : v * scale;
	}
}

int main(int argc, char **argv)
{
	uint32_t b = 256, ni = 784, no = 256, k = 4;
	if (argc == 5) {
		b = (uint32_t)atoi(argv[1]);
		ni = (uint32_t)atoi(argv[2]);
		no = (uint32_t)atoi(argv[3]);
		k = (uint32_t)atoi(argv[4]);
	} else if (argc != 1) {
		fprintf(stderr, "usage: split [B N_IN N_OUT BLOCKS]\n");
		return 2;
	}
	if (b == 0 || ni == 0 || no == 0 || k == 0 || no % k || ni % k) {
		fprintf(stderr, "split: need sizes > 0 that BLOCKS divides\n");
		return 2;
	}
	size_t nx = (size_t)b * ni, nw = (size_t)ni * no, nz = (size_t)b * no;
	float *x = malloc(nx * sizeof(float));  // (b, ni)
	float *w = malloc(nw * sizeof(float));  // (ni, no)
	float *dz = malloc(nz * sizeof(float)); // (b, no)
	float *z[2], *dw[3];
	for (int i = 0; i < 2; i++)
		z[i] = malloc(nz * sizeof(float)); // (b, no)
	for (int i = 0; i < 3; i++)
		dw[i] = malloc(nw * sizeof(float)); // (ni, no)
	if (!x || !w || !dz || !z[0] || !z[1] || !dw[0] || !dw[1] || !dw[2]) {
		fprintf(stderr, "split: out of memory\n");
		return 1;
	}
	unsigned s = 7;
	fill(x, nx, &s, 1.0f, 1);
	fill(w, nw, &s, 0.1f, 0);
	fill(z[0], nz, &s, 0.1f, 0); // the bias rows the product adds to
	memcpy(z[1], z[0], nz * sizeof(float));
	fill(dz, nz, &s, 0.01f, 0);

	uint32_t cw = no / k, rw = ni / k;
	pti_blas_sgemm(0, 0, b, no, ni, 1.0f, x, ni, w, no, 1.0f, z[0], no);
	for (uint32_t j = 0; j < k; j++)
		pti_blas_sgemm(0, 0, b, cw, ni, 1.0f, x, ni, w + j * cw, no,
		    1.0f, z[1] + j * cw, no);
	pti_blas_sgemm(1, 0, ni, no, b, 1.0f, x, ni, dz, no, 0.0f, dw[0], no);
	for (uint32_t j = 0; j < k; j++) {
		pti_blas_sgemm(1, 0, ni, cw, b, 1.0f, x, ni, dz + j * cw, no,
		    0.0f, dw[1] + j * cw, no);
		pti_blas_sgemm(1, 0, rw, no, b, 1.0f, x + j * rw, ni, dz, no,
		    0.0f, dw[2] + (size_t)j * rw * no, no);
	}
	const char *v[2] = {"identical", "differs"};
	printf("forward_by_columns %s\n", v[memcmp(z[0], z[1], nz * 4) != 0]);
	printf("gradient_by_columns %s\n",
	    v[memcmp(dw[0], dw[1], nw * 4) != 0]);
	printf("gradient_by_rows %s\n", v[memcmp(dw[0], dw[2], nw * 4) != 0]);
	free(x), free(w), free(dz);
	for (int i = 0; i < 2; i++)
		free(z[i]);
	for (int i = 0; i < 3; i++)
		free(dw[i]);
	return 0;
}
