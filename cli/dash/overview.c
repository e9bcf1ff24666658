// cli/dash/overview.c - a worker-R.csv in few rows (overview.h).
#include "cli/dash/overview.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define DASH_DROPPED 500 // dropped gradients listed per file (the latest)

// The columns drawn as lines, whose lowest and highest rows are kept.
static const int drawn_cols[] = {PTI_DW_LOSS, PTI_DW_GRAD_NORM,
    PTI_DW_STEP_MS};
#define N_DRAWN ((int)(sizeof(drawn_cols) / sizeof(drawn_cols[0])))

// keep_extremes marks in keep, in each of about points / 2 runs of the n
// rows of t, the lowest and the highest row of each drawn column; and
// the first and the last row.
static void keep_extremes(const pti_csv *t, size_t points, uint8_t *keep)
{
	size_t n = t->n_rows, runs = points / 2 ? points / 2 : 1;
	size_t k = (n + runs - 1) / runs;
	for (size_t i = 0; i < n; i += k) {
		size_t end = i + k < n ? i + k : n;
		for (int c = 0; c < N_DRAWN; c++) {
			size_t lo = SIZE_MAX, hi = SIZE_MAX;
			for (size_t m = i; m < end; m++) {
				double y = t->v[m * t->n_cols + drawn_cols[c]];
				if (isnan(y))
					continue;
				if (lo == SIZE_MAX ||
				    y < t->v[lo * t->n_cols + drawn_cols[c]])
					lo = m;
				if (hi == SIZE_MAX ||
				    y > t->v[hi * t->n_cols + drawn_cols[c]])
					hi = m;
			}
			if (lo != SIZE_MAX)
				keep[lo] = keep[hi] = 1;
		}
	}
	keep[0] = keep[n - 1] = 1;
}

// keep_even marks about m rows of n at even intervals, the first and
// the last among them.
static void keep_even(size_t n, size_t m, uint8_t *keep)
{
	if (m < 2)
		m = 2;
	for (size_t i = 0; i < m; i++)
		keep[(size_t)((double)i * (double)(n - 1) / (double)(m - 1))] = 1;
}

// agg_json writes what the page sums over every row of t.
static void agg_json(pti_dbuf *b, const pti_csv *t)
{
	double ms[3] = {0, 0, 0}, stale_sum = 0;
	size_t hist[PTI_DASH_STALE_BINS] = {0}, stale_n = 0, dropped = 0;
	int bins = 0;
	for (size_t i = 0; i < t->n_rows; i++) {
		const double *r = t->v + i * t->n_cols;
		if (!isnan(r[PTI_DW_STEP_MS]) && !isnan(r[PTI_DW_COMPUTE_MS]) &&
		    !isnan(r[PTI_DW_COMM_MS])) {
			ms[0] += r[PTI_DW_STEP_MS];
			ms[1] += r[PTI_DW_COMPUTE_MS];
			ms[2] += r[PTI_DW_COMM_MS];
		}
		double s = r[PTI_DW_STALENESS];
		if (!isnan(s)) {
			long bin = lround(s < 0 ? 0 : s);
			if (bin >= PTI_DASH_STALE_BINS)
				bin = PTI_DASH_STALE_BINS - 1;
			hist[bin]++;
			bins = (int)bin + 1 > bins ? (int)bin + 1 : bins;
			stale_n++;
			stale_sum += s;
		}
		dropped += r[PTI_DW_LR] == 0;
	}
	pti_dbuf_printf(b, "{\"rows\": %zu, \"step_ms\": ", t->n_rows);
	pti_dbuf_num(b, ms[0]);
	pti_dbuf_printf(b, ", \"compute_ms\": ");
	pti_dbuf_num(b, ms[1]);
	pti_dbuf_printf(b, ", \"comm_ms\": ");
	pti_dbuf_num(b, ms[2]);
	pti_dbuf_printf(b, ", \"stale_rows\": %zu, \"stale_sum\": ", stale_n);
	pti_dbuf_num(b, stale_sum);
	pti_dbuf_printf(b, ", \"stale\": [");
	for (int s = 0; s < bins; s++)
		pti_dbuf_printf(b, "%s%zu", s ? "," : "", hist[s]);
	// The latest DASH_DROPPED dropped gradients, as [step, wall_s].
	pti_dbuf_printf(b, "], \"dropped\": %zu, \"dropped_rows\": [", dropped);
	size_t skip = dropped > DASH_DROPPED ? dropped - DASH_DROPPED : 0;
	const char *sep = "";
	for (size_t i = 0; i < t->n_rows; i++) {
		const double *r = t->v + i * t->n_cols;
		if (r[PTI_DW_LR] != 0 || (skip > 0 && skip--))
			continue;
		pti_dbuf_printf(b, "%s[", sep);
		pti_dbuf_num(b, r[PTI_DW_STEP]);
		pti_dbuf_printf(b, ",");
		pti_dbuf_num(b, r[PTI_DW_WALL]);
		pti_dbuf_printf(b, "]");
		sep = ",";
	}
	pti_dbuf_printf(b, "]}");
}

void pti_dash_overview(pti_dbuf *b, const pti_csv_at *at, const pti_csv *t,
    size_t points, int drawn)
{
	size_t n = t->n_rows;
	uint8_t *keep = calloc(n ? n : 1, 1);
	if (keep == NULL) {
		b->failed = 1;
		return;
	}
	if (n > 0 && drawn && n > points)
		keep_extremes(t, points, keep);
	else if (n > 0 && !drawn && n > points / 8)
		keep_even(n, points / 8, keep);
	else
		for (size_t i = 0; i < n; i++)
			keep[i] = 1;
	pti_dbuf_printf(b, "{\"from\": %ld, \"next\": %ld, \"more\": false, "
	    "\"drawn\": %s, \"rows\": [", at->start, at->next,
	    drawn ? "true" : "false");
	const char *sep = "";
	for (size_t i = 0; i < n; i++) {
		if (!keep[i])
			continue;
		const double *r = t->v + i * t->n_cols;
		pti_dbuf_printf(b, "%s[", sep);
		for (int k = 0; k < PTI_DW_N; k++) {
			if (k)
				pti_dbuf_printf(b, ",");
			pti_dbuf_num(b, r[k]);
		}
		pti_dbuf_printf(b, "]");
		sep = ",\n";
	}
	pti_dbuf_printf(b, "],\n \"index\": [");
	sep = "";
	for (size_t i = 0; i < n; i++) {
		if (keep[i]) {
			pti_dbuf_printf(b, "%s%zu", sep, i);
			sep = ",";
		}
	}
	pti_dbuf_printf(b, "],\n \"agg\": ");
	agg_json(b, t);
	pti_dbuf_printf(b, "}");
	free(keep);
}
