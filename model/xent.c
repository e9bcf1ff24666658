// model/xent.c - the softmax cross-entropy (see xent.h).
#include "model/xent.h"

#include <math.h>
#include <stddef.h>

// row_max returns the largest of z[0..n) and writes its first index.
static float row_max(const float *z, uint32_t n, uint32_t *at)
{
	float mx = z[0];
	uint32_t j_max = 0;
	for (uint32_t j = 1; j < n; j++)
		if (z[j] > mx) {
			mx = z[j];
			j_max = j;
		}
	*at = j_max;
	return mx;
}

// pti_xent_mean: subtracting the row's max keeps expf from overflowing;
// the sum and the loss are kept in double.
double pti_xent_mean(float *logits, const uint8_t *y, uint32_t b,
    uint32_t classes)
{
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		float *z = logits + (size_t)i * classes; // (classes)
		uint32_t at;
		float mx = row_max(z, classes, &at);
		double zy = (double)z[y[i]] - mx, sum = 0;
		for (uint32_t j = 0; j < classes; j++) {
			z[j] = expf(z[j] - mx);
			sum += z[j];
		}
		total += log(sum) - zy;
		float scale = (float)(1.0 / (sum * b));
		for (uint32_t j = 0; j < classes; j++)
			z[j] *= scale;
		z[y[i]] -= 1.0f / (float)b;
	}
	return total / b;
}

void pti_xent_sum(double *loss_sum, uint32_t *correct, const float *z,
    const uint8_t *y, uint32_t b, uint32_t classes)
{
	uint32_t ok = 0;
	double total = 0;
	for (uint32_t i = 0; i < b; i++) {
		const float *row = z + (size_t)i * classes;
		uint32_t at;
		float mx = row_max(row, classes, &at);
		double sum = 0;
		for (uint32_t j = 0; j < classes; j++)
			sum += expf(row[j] - mx);
		total += log(sum) - ((double)row[y[i]] - mx);
		ok += at == y[i];
	}
	*loss_sum = total;
	*correct = ok;
}
