// common/stats.c - mean, sample sd, min and max over seeds (pstrain
// compare's report and curves), NaN meaning "no value".
#include "common/stats.h"

#include <math.h>

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
