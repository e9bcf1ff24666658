// model/sparse.c - sparse logistic regression and the factorization
// machine over embedding rows (sparse.h).
#include "model/sparse.h"

#include "common/layout.h" // PT_FM_MAX_K
#include "common/sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint32_t pti_sparse_unique(const uint64_t *ids, uint32_t n, uint64_t *uniq,
    uint32_t *slot, uint64_t *scratch)
{
	// (id, position) pairs sorted by id: each run of one id becomes one
	// row, and every position in it points there.
	for (uint32_t i = 0; i < n; i++) {
		scratch[2 * i] = ids[i];
		scratch[2 * i + 1] = i;
	}
	pti_sort_pairs(scratch, n, scratch + 2 * (uint64_t)n); // stable
	uint32_t u = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i == 0 || scratch[2 * i] != scratch[2 * i - 2])
			uniq[u++] = scratch[2 * i];
		slot[scratch[2 * i + 1]] = u - 1;
	}
	return u;
}

void pti_fm_metrics(uint32_t k, const float *rows, const uint32_t *slot,
    uint32_t n, uint32_t fields, float bias, const uint8_t *y,
    float *logits, pti_scored *scored, double *loss, double *acc,
    double *auc)
{
	float scratch[PT_FM_MAX_K];
	pti_fm_logits(k, rows, slot, n, fields, bias, logits, scratch);
	double sum = 0;
	uint64_t right = 0;
	for (uint32_t e = 0; e < n; e++) {
		double z = logits[e];
		sum += pti_softplus(z) - (y[e] ? z : 0);
		right += (z > 0) == (y[e] != 0);
		scored[e] = (pti_scored){logits[e], y[e]};
	}
	*loss = n > 0 ? sum / n : NAN;
	*acc = n > 0 ? (double)right / n : NAN;
	*auc = pti_auc(scored, n);
}

// softmax_logits writes the c logits of one example of rows s[0..fields)
// to z and returns the log of the sum of their exponentials.
static double softmax_logits(uint32_t c, const float *rows, const uint32_t *s,
    uint32_t fields, const float *bias, float *z)
{
	memcpy(z, bias, c * sizeof(float));
	for (uint32_t i = 0; i < fields; i++) {
		const float *r = rows + (size_t)s[i] * c;
		for (uint32_t j = 0; j < c; j++)
			z[j] += r[j];
	}
	double top = z[0], sum = 0;
	for (uint32_t j = 1; j < c; j++)
		top = z[j] > top ? z[j] : top;
	for (uint32_t j = 0; j < c; j++)
		sum += exp(z[j] - top);
	return top + log(sum);
}

void pti_softmax_rows_grad(uint32_t c, const float *rows, uint32_t n_rows,
    const uint32_t *slot, uint32_t b, uint32_t fields, const float *bias,
    const uint8_t *y, float *grows, float *gbias, double *loss,
    float *scratch)
{
	double total = 0;
	memset(grows, 0, (size_t)n_rows * c * sizeof(float));
	memset(gbias, 0, c * sizeof(float));
	for (uint32_t e = 0; e < b; e++) {
		const uint32_t *s = slot + (size_t)e * fields;
		double lse = softmax_logits(c, rows, s, fields, bias, scratch);
		total += lse - scratch[y[e]];
		// d(mean loss)/d(logit j) = (softmax_j - [j = y]) / b
		for (uint32_t j = 0; j < c; j++)
			scratch[j] = (float)((exp(scratch[j] - lse) -
					      (j == y[e])) / b);
		for (uint32_t j = 0; j < c; j++)
			gbias[j] += scratch[j];
		for (uint32_t i = 0; i < fields; i++) {
			float *gr = grows + (size_t)s[i] * c;
			for (uint32_t j = 0; j < c; j++)
				gr[j] += scratch[j];
		}
	}
	*loss = b > 0 ? total / b : 0;
}

void pti_softmax_rows_metrics(uint32_t c, const float *rows,
    const uint32_t *slot, uint32_t n, uint32_t fields, const float *bias,
    const uint8_t *y, float *scratch, double *loss, double *acc)
{
	double total = 0;
	uint64_t right = 0;
	for (uint32_t e = 0; e < n; e++) {
		double lse = softmax_logits(c, rows, slot + (size_t)e * fields,
		    fields, bias, scratch);
		uint32_t best = 0;
		for (uint32_t j = 1; j < c; j++)
			best = scratch[j] > scratch[best] ? j : best;
		total += lse - scratch[y[e]];
		right += best == y[e];
	}
	*loss = n > 0 ? total / n : NAN;
	*acc = n > 0 ? (double)right / n : NAN;
}

double pti_softplus(double z)
{
	return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
}

// fm_logit is the logit of one example of rows s[0..fields); sum (k)
// gets each factor summed over the fields.
static double fm_logit(uint32_t k, const float *rows, const uint32_t *s,
    uint32_t fields, float bias, float *sum)
{
	uint32_t w = 1 + k;
	double z = bias, sq = 0, pairs = 0;
	if (k > 0)
		memset(sum, 0, k * sizeof(float));
	for (uint32_t i = 0; i < fields; i++) {
		const float *r = rows + (size_t)s[i] * w;
		z += r[0];
		for (uint32_t j = 0; j < k; j++) {
			sum[j] += r[1 + j];
			sq += (double)r[1 + j] * r[1 + j];
		}
	}
	for (uint32_t j = 0; j < k; j++)
		pairs += (double)sum[j] * sum[j];
	return z + (pairs - sq) / 2;
}

void pti_fm_logits(uint32_t k, const float *rows, const uint32_t *slot,
    uint32_t b, uint32_t fields, float bias, float *logits, float *scratch)
{
	for (uint32_t e = 0; e < b; e++)
		logits[e] = (float)fm_logit(k, rows, slot + (size_t)e * fields,
		    fields, bias, scratch);
}

void pti_fm_grad(uint32_t k, const float *rows, uint32_t n_rows,
    const uint32_t *slot, uint32_t b, uint32_t fields, float bias,
    const uint8_t *y, float *grows, float *gbias, double *loss,
    float *logits, float *scratch)
{
	uint32_t w = 1 + k;
	float *sum = scratch; // (k) each factor summed over the fields
	double total = 0, gb = 0;
	memset(grows, 0, (size_t)n_rows * w * sizeof(float));
	for (uint32_t e = 0; e < b; e++) {
		const uint32_t *s = slot + (size_t)e * fields;
		double z = fm_logit(k, rows, s, fields, bias, sum);
		if (logits != NULL)
			logits[e] = (float)z;
		// The mean log loss and its derivative in the logit,
		// sigmoid(z) - y, over b.
		total += pti_softplus(z) - (y[e] ? z : 0);
		double g = (1 / (1 + exp(-z)) - (y[e] ? 1 : 0)) / b;
		gb += g;
		for (uint32_t i = 0; i < fields; i++) {
			const float *r = rows + (size_t)s[i] * w;
			float *gr = grows + (size_t)s[i] * w;
			gr[0] += (float)g;
			for (uint32_t j = 0; j < k; j++)
				gr[1 + j] += (float)(g * (sum[j] - r[1 + j]));
		}
	}
	*loss = b > 0 ? total / b : 0;
	*gbias = (float)gb;
}
