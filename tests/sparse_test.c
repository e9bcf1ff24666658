// tests/sparse_test.c - the sparse models (model/sparse.h): ids made
// unique with every place mapped to its row, the factorization machine's
// logit against its pairwise definition, and its gradient against
// finite differences of a double reference, rows that repeat summed.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/sort.h"
#include "model/sparse.h"
#include "tests/test.h"

static void test_sparse_unique(void)
{
	uint64_t ids[] = {50, 7, 50, 900, 7, 7, 1};
	uint64_t uniq[7], scratch[28];
	uint32_t slot[7];
	uint32_t u = pti_sparse_unique(ids, 7, uniq, slot, scratch);
	PT_TEST_TRUE(u == 4);
	uint64_t want[] = {1, 7, 50, 900};
	PT_TEST_TRUE(memcmp(uniq, want, sizeof(want)) == 0);
	for (int i = 0; i < 7; i++)
		PT_TEST_TRUE(uniq[slot[i]] == ids[i]);
	PT_TEST_TRUE(pti_sparse_unique(ids, 0, uniq, slot, scratch) == 0);
}

static int pair_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	if (x[0] != y[0])
		return (x[0] > y[0]) - (x[0] < y[0]);
	return (x[1] > y[1]) - (x[1] < y[1]);
}

// The radix sorts against qsort: sizes below and above the insertion
// sort's, keys random in all 64 bits, keys sharing their high bytes
// (passes skipped), many repeats; pairs of one key keep their order.
static void test_sort_matches_qsort(void)
{
	pti_rng r;
	pti_rng_seed(&r, 35, 0);
	uint64_t n_of[] = {0, 1, 2, 31, 32, 33, 1000, 6656};
	uint64_t *a = malloc(4 * 6656 * 8), *b = malloc(2 * 6656 * 8);
	PT_TEST_TRUE(a != NULL && b != NULL);
	for (int kind = 0; kind < 3; kind++)
		for (size_t c = 0; c < sizeof(n_of) / sizeof(*n_of); c++) {
			uint64_t n = n_of[c];
			for (uint64_t i = 0; i < n; i++) {
				uint64_t k = pti_rng_u64(&r);
				k = kind == 0 ? k : kind == 1 ? k & 0xffff
							  : k % 7;
				a[2 * i] = b[2 * i] = k;
				a[2 * i + 1] = b[2 * i + 1] = i; // its place
			}
			pti_sort_pairs(a, n, a + 2 * n);
			qsort(b, n, 16, pair_cmp); // by key, then place
			PT_TEST_TRUE(n == 0 || memcmp(a, b, n * 16) == 0);
			for (uint64_t i = 0; i < n; i++)
				a[i] = b[2 * ((i * 7919) % n)];
			pti_sort_u64(a, n, a + n); // the keys, shuffled
			for (uint64_t i = 0; i < n; i++)
				PT_TEST_TRUE(a[i] == b[2 * i]);
		}
	free(a);
	free(b);
}

// A batch of B examples of F fields over U rows of 1 + K floats, some
// rows in several places (the same id in two fields of an example, and
// across examples).
#define B 5
#define F 3
#define K 2
#define U 6
#define W (1 + K)

static const uint32_t slots[B * F] = {0, 1, 2, 3, 3, 4, 0, 5, 1, 2, 2, 2,
    4, 1, 0};
static const uint8_t ys[B] = {1, 0, 1, 0, 1};

// ref_loss is the mean log loss in double from the definition: bias, the
// weights, and every pair's factor dot product.
static double ref_loss(const double *rows, double bias, double *logit)
{
	double total = 0;
	for (int e = 0; e < B; e++) {
		const uint32_t *s = slots + e * F;
		double z = bias;
		for (int i = 0; i < F; i++)
			z += rows[s[i] * W];
		for (int i = 0; i < F; i++)
			for (int j = i + 1; j < F; j++)
				for (int k = 0; k < K; k++)
					z += rows[s[i] * W + 1 + k] *
					     rows[s[j] * W + 1 + k];
		if (logit != NULL)
			logit[e] = z;
		double p = 1 / (1 + exp(-z));
		total -= ys[e] ? log(p) : log(1 - p);
	}
	return total / B;
}

static void test_fm_grad_matches_reference(void)
{
	float rows[U * W], grows[U * W], logits[B], gbias, scratch[K];
	double d[U * W], loss, zref[B];
	pti_rng r;
	pti_rng_seed(&r, 11, 0);
	for (int i = 0; i < U * W; i++) {
		rows[i] = (float)(pti_rng_unit(&r) - 0.5);
		d[i] = rows[i];
	}
	float bias = 0.3f;
	pti_fm_grad(K, rows, U, slots, B, F, bias, ys, grows, &gbias, &loss,
	    logits, scratch);
	double want = ref_loss(d, bias, zref);
	PT_TEST_NEAR(loss, want, 1e-6);
	for (int e = 0; e < B; e++)
		PT_TEST_NEAR(logits[e], zref[e], 1e-5);
	// Central differences in double for every row value and the bias.
	const double h = 1e-6;
	for (int i = 0; i < U * W; i++) {
		double keep = d[i];
		d[i] = keep + h;
		double hi = ref_loss(d, bias, NULL);
		d[i] = keep - h;
		double lo = ref_loss(d, bias, NULL);
		d[i] = keep;
		PT_TEST_NEAR(grows[i], (hi - lo) / (2 * h), 1e-5);
	}
	double gb = (ref_loss(d, bias + h, NULL) - ref_loss(d, bias - h,
	    NULL)) / (2 * h);
	PT_TEST_NEAR(gbias, gb, 1e-5);
	// Row 2 sits three times in example 3: its gradient is no single
	// place's (not vacuous: some row gradients are well away from 0).
	int big = 0;
	for (int i = 0; i < U * W; i++)
		big += fabsf(grows[i]) > 1e-3f;
	PT_TEST_TRUE(big > U * W / 2);
}

static void test_lr_is_fm_without_factors(void)
{
	// k = 0: the logit is the bias plus the weights.
	float rows[U] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, grows[U];
	float logits[B], gbias;
	double loss;
	pti_fm_grad(0, rows, U, slots, B, F, 0.05f, ys, grows, &gbias, &loss,
	    logits, NULL);
	for (int e = 0; e < B; e++) {
		float z = 0.05f;
		for (int i = 0; i < F; i++)
			z += rows[slots[e * F + i]];
		PT_TEST_NEAR(logits[e], z, 1e-6);
	}
	// d loss / d w_u = sum over u's places of (p - y) / B
	double g0 = 0;
	for (int e = 0; e < B; e++)
		for (int i = 0; i < F; i++)
			if (slots[e * F + i] == 0)
				g0 += (1 / (1 + exp(-logits[e])) - ys[e]) / B;
	PT_TEST_NEAR(grows[0], g0, 1e-6);
}

// wd_check: the wide & deep gradient of shape s against central
// differences of its loss, for every row and every dense value it uses.
static void wd_check(const pti_wd *s)
{
	uint32_t dim = s->o + s->k, b = B;
	uint64_t nd = pti_wd_dense(s);
	float *rows = malloc(U * dim * sizeof(float));
	float *dense = calloc(nd, sizeof(float));
	float *grows = malloc(U * dim * sizeof(float));
	float *gdense = malloc(nd * sizeof(float));
	float *gr2 = malloc(U * dim * sizeof(float));
	float *gd2 = malloc(nd * sizeof(float));
	float *scratch = malloc(pti_wd_scratch(s, b) * sizeof(float));
	uint8_t y[B];
	pti_rng r;
	pti_rng_seed(&r, 11, s->o);
	for (uint32_t i = 0; i < U * dim; i++)
		rows[i] = (float)(pti_rng_unit(&r) - 0.5);
	for (uint64_t i = 0; i < nd; i++)
		dense[i] = i < 256 && i >= s->o ? 0 :
			   (float)(pti_rng_unit(&r) - 0.5);
	for (uint32_t e = 0; e < B; e++)
		y[e] = (uint8_t)(s->o == 1 ? ys[e] : (e * 7) % s->o);
	double loss, lp, lm;
	pti_wd_grad(s, rows, U, slots, b, dense, y, grows, gdense, &loss,
	    scratch);
	PT_TEST_TRUE(isfinite(loss) && loss > 0);
	// Small enough that no ReLU input crosses 0 here (at 1e-2 some
	// do, and a difference then meets a kink).
	const float eps = 1e-3f;
	int bad = 0, checked = 0;
	// Every row's value, and every dense value but the bias's unused.
	for (uint64_t i = 0; i < U * dim + nd; i++) {
		float *x = i < U * dim ? &rows[i] : &dense[i - U * dim];
		float g = i < U * dim ? grows[i] : gdense[i - U * dim];
		if (i >= U * dim && i - U * dim >= s->o && i - U * dim < 256)
			continue;
		float v = *x;
		*x = v + eps;
		pti_wd_grad(s, rows, U, slots, b, dense, y, gr2, gd2, &lp,
		    scratch);
		*x = v - eps;
		pti_wd_grad(s, rows, U, slots, b, dense, y, gr2, gd2, &lm,
		    scratch);
		*x = v;
		double fd = (lp - lm) / (2 * eps);
		bad += fabs(fd - g) > 2e-3 + 2e-2 * fabs(fd);
		checked++;
	}
	fprintf(stderr, "  wide-deep O=%u: %d of %d gradients off\n", s->o,
	    bad, checked);
	PT_TEST_TRUE(bad == 0 && checked > 50);
	// Forward only gives the same loss.
	float logits[B * 4];
	pti_scored sc[B];
	double ml, ma, mu;
	pti_wd_metrics(s, rows, slots, B, dense, y, scratch, 2, logits, sc,
	    &ml, &ma, &mu);
	PT_TEST_NEAR(ml, loss, 1e-5);
	PT_TEST_TRUE(s->o == 1 ? !isnan(mu) : isnan(mu));
	free(rows), free(dense), free(grows), free(gdense), free(gr2);
	free(gd2), free(scratch);
}

static void test_wd_grad_matches_differences(void)
{
	pti_wd one = {F, K, 1, 2, {4, 3, 0}};
	pti_wd three = {F, K, 3, 1, {5, 0, 0}};
	wd_check(&one);
	wd_check(&three);
}

static const pti_test_case cases[] = {
    {"test_sparse_unique", test_sparse_unique},
    {"test_sort_matches_qsort", test_sort_matches_qsort},
    {"test_fm_grad_matches_reference", test_fm_grad_matches_reference},
    {"test_lr_is_fm_without_factors", test_lr_is_fm_without_factors},
    {"test_wd_grad_matches_differences", test_wd_grad_matches_differences},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
