// common/stats.h - summary statistics over a handful of runs (seeds):
// mean, sample standard deviation, min and max, skipping NaN (a value
// that was null or missing), per value list or per point index of
// several curves of unequal length; paired differences with a 95% t
// interval; AUC and log loss of a binary classifier. Pure functions, no
// allocation of their own (pti_auc sorts in place with qsort), safe from
// any thread.
#ifndef PT_COMMON_STATS_H
#define PT_COMMON_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct pti_stats {
	uint32_t n;    // values that were not NaN
	double mean;   // NaN when n == 0
	double sd;     // sample sd (n - 1 denominator); NaN when n < 2
	double min;    // NaN when n == 0
	double max;    // NaN when n == 0
} pti_stats;

// pti_stats_of summarises x[0..n), ignoring NaN entries, into *out.
void pti_stats_of(pti_stats *out, const double *x, uint32_t n);

// pti_stats_curve summarises n_series curves point by point: out[i]
// covers ys[s][i] for every series s with lens[s] > i (NaN ignored), so
// out[i].n says how many series have point i. The caller owns out, which
// has room for n_points entries (usually the longest of lens). Only
// the first 256 series count.
void pti_stats_curve(pti_stats *out, const double *const *ys,
    const size_t *lens, uint32_t n_series, size_t n_points);

// pti_stats_smooth writes to out[i] the mean of the non-NaN values among
// x[i - window + 1 .. i] (fewer at the start), NaN when there are none.
// out and x may not overlap; window 0 counts as 1.
void pti_stats_smooth(double *out, const double *x, size_t n,
    size_t window);

// pti_t975 is Student's t quantile at 0.975 for df degrees of freedom
// (df >= 1): the half-width of a two-sided 95% interval, in standard
// errors. A table to df 30, a Cornish-Fisher expansion above (within
// 1e-4 of the exact value); NaN for df < 1.
double pti_t975(uint32_t df);

// A paired comparison of two lists over the same seeds: the differences
// a[i] - b[i] of the pairs where neither is NaN, and how often each was
// the larger.
typedef struct pti_paired {
	pti_stats d;         // of the differences
	double lo, hi;       // the mean's 95% t interval; NaN when d.n < 2
	uint32_t a_more, b_more, ties;
} pti_paired;

// pti_paired_of compares a[0..n) with b[0..n), pair by pair, into *out.
void pti_paired_of(pti_paired *out, const double *a, const double *b,
    uint32_t n);

// One example of a binary classifier: its score and its label (0, 1).
typedef struct pti_scored {
	float score;
	uint8_t y;
} pti_scored;

// pti_auc sorts items[0..n) by score and returns the area under the ROC
// curve: the chance that a random positive scores above a random
// negative, a tie counting half (the Mann-Whitney U over the counts).
// NaN when every label is the same.
double pti_auc(pti_scored *items, uint32_t n);

// pti_logloss is the mean of -log p(label) over n probabilities p of
// label 1, each clipped to [1e-7, 1 - 1e-7]; NaN for n = 0.
double pti_logloss(const float *p, const uint8_t *y, uint32_t n);

#endif // PT_COMMON_STATS_H
