// common/stats.c - mean, sample sd, min and max over seeds (pstrain
// compare's report and curves), NaN meaning "no value".
#include "common/stats.h"

#include <math.h>
#include <stdlib.h>

void pti_stats_of(pti_stats *out, const double *x, uint32_t n)
{
	double sum = 0, lo = NAN, hi = NAN;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (isnan(x[i]))
			continue;
		sum += x[i];
		lo = k == 0 || x[i] < lo ? x[i] : lo;
		hi = k == 0 || x[i] > hi ? x[i] : hi;
		k++;
	}
	out->n = k;
	out->mean = k > 0 ? sum / k : NAN;
	out->min = lo;
	out->max = hi;
	out->sd = NAN;
	if (k < 2)
		return;
	// Two passes: the sum of squared deviations from the mean does not
	// cancel the way sum(x^2) - n mean^2 does for values close together.
	double ss = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!isnan(x[i]))
			ss += (x[i] - out->mean) * (x[i] - out->mean);
	out->sd = sqrt(ss / (k - 1));
}

void pti_stats_curve(pti_stats *out, const double *const *ys,
    const size_t *lens, uint32_t n_series, size_t n_points)
{
	double col[256]; // one value per series; more series are ignored
	uint32_t m = n_series < 256 ? n_series : 256;
	for (size_t i = 0; i < n_points; i++) {
		for (uint32_t s = 0; s < m; s++)
			col[s] = i < lens[s] ? ys[s][i] : NAN;
		pti_stats_of(&out[i], col, m);
	}
}

void pti_stats_smooth(double *out, const double *x, size_t n,
    size_t window)
{
	if (window == 0)
		window = 1;
	// Summed afresh for each point, not as a running sum: one inf (a
	// diverging loss) would otherwise turn every later point into NaN.
	for (size_t i = 0; i < n; i++) {
		double sum = 0;
		size_t k = 0;
		for (size_t j = i + 1 > window ? i + 1 - window : 0; j <= i; j++)
			if (!isnan(x[j])) {
				sum += x[j];
				k++;
			}
		out[i] = k > 0 ? sum / k : NAN;
	}
}

double pti_t975(uint32_t df)
{
	static const double t[31] = {NAN, 12.7062, 4.3027, 3.1824, 2.7764,
	    2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788,
	    2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
	    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484,
	    2.0452, 2.0423};
	if (df <= 30)
		return t[df];
	// Cornish-Fisher: z + g1(z)/df + g2(z)/df^2 + g3(z)/df^3.
	double z = 1.959963985, v = df, z3 = z * z * z, z5 = z3 * z * z,
	       z7 = z5 * z * z;
	return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
	       (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

void pti_paired_of(pti_paired *out, const double *a, const double *b,
    uint32_t n)
{
	double d[256] = {0};
	uint32_t k = 0;
	out->a_more = out->b_more = out->ties = 0;
	for (uint32_t i = 0; i < n && k < 256; i++) {
		if (isnan(a[i]) || isnan(b[i]))
			continue;
		d[k++] = a[i] - b[i];
		out->a_more += a[i] > b[i];
		out->b_more += a[i] < b[i];
		out->ties += a[i] == b[i];
	}
	pti_stats_of(&out->d, d, k);
	out->lo = out->hi = NAN;
	if (k >= 2) {
		double half = pti_t975(k - 1) * out->d.sd / sqrt((double)k);
		out->lo = out->d.mean - half;
		out->hi = out->d.mean + half;
	}
}

static int scored_cmp(const void *a, const void *b)
{
	float x = ((const pti_scored *)a)->score;
	float y = ((const pti_scored *)b)->score;
	return (x > y) - (x < y);
}

double pti_auc(pti_scored *items, uint32_t n)
{
	qsort(items, n, sizeof(*items), scored_cmp);
	double pos = 0, rank_sum = 0;
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i, p = 0;
		while (j < n && items[j].score == items[i].score)
			p += items[j++].y != 0;
		// ranks i + 1 .. j share their mean
		rank_sum += p * (i + 1 + j) / 2.0;
		pos += p;
		i = j;
	}
	double neg = n - pos;
	if (pos == 0 || neg == 0)
		return NAN;
	return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

double pti_logloss(const float *p, const uint8_t *y, uint32_t n)
{
	if (n == 0)
		return NAN;
	double sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		double q = fmin(fmax(p[i], 1e-7), 1 - 1e-7);
		sum -= y[i] ? log(q) : log(1 - q);
	}
	return sum / n;
}
