// tests/ctr_test.c - the synthetic click set (common/ctr.h) and the
// binary classifier's figures (pti_auc, pti_logloss in common/stats.h):
// the spec, Zipf frequencies, the planted model, and AUC against values
// worked by hand.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/ctr.h"
#include "common/err.h"
#include "common/rng.h"
#include "common/stats.h"
#include "tests/test.h"

static void test_ctr_parse(void)
{
	pti_ctr_spec s;
	PT_TEST_OK(pti_ctr_parse("ctr:1000,26,100000", &s));
	PT_TEST_TRUE(s.n == 1000 && s.fields == 26 && s.vocab == 100000);
	PT_TEST_TRUE(s.seed == 1 && s.skew == 1.1);
	PT_TEST_TRUE(s.k == PTI_CTR_K);
	PT_TEST_OK(pti_ctr_parse("ctr:5,2,7,42,0.5", &s));
	PT_TEST_TRUE(s.seed == 42 && s.skew == 0.5 && s.vocab == 7);
	PT_TEST_OK(pti_ctr_parse("ctr:5,2,7,42,0.5,0", &s));
	PT_TEST_TRUE(s.k == 0);
	const char *bad[] = {"ctr:", "ctr:10", "ctr:10,2", "ctr:0,2,3",
	    "ctr:10,0,3", "ctr:10,2,0", "ctr:10,257,3", "ctr:10,2,3,",
	    "ctr:10,2,3,1,5", "ctr:10,2,3,1.5", "ctr:1.5,2,3", "ctr:-1,2,3",
	    "ctr:10,2,3,1,1,17", "ctr:10,2,3,1,1,1.5", "ctr:10,2,3,1,1,1,1",
	    "ctr:10,2,1e12", "ctr:10,2,3x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PT_TEST_ERR(pti_ctr_parse(bad[i], &s), PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), bad[i]);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "ctr:N,F,V");
	}
}

static void test_ctr_zipf(void)
{
	// 400k draws over 1000 ranks: all in range; rank 1 is 2^1.1 times
	// as frequent as rank 2 and 10^1.1 times rank 10 (within 5%); with
	// skew 0 every rank is as likely.
	static uint32_t count[1001];
	pti_rng r;
	pti_rng_seed(&r, 3, 9);
	for (int i = 0; i < 400000; i++) {
		uint64_t k = pti_zipf(1000, 1.1, &r);
		PT_TEST_TRUE(k >= 1 && k <= 1000);
		count[k]++;
	}
	double r2 = (double)count[1] / count[2], r10 = (double)count[1] / count[10];
	fprintf(stderr, "  skew 1.1: rank 1 / rank 2 %.3f (%.3f), / rank 10 "
	    "%.2f (%.2f)\n", r2, pow(2, 1.1), r10, pow(10, 1.1));
	PT_TEST_NEAR(r2, pow(2, 1.1), 0.05 * pow(2, 1.1));
	PT_TEST_NEAR(r10, pow(10, 1.1), 0.05 * pow(10, 1.1));
	memset(count, 0, sizeof(count));
	for (int i = 0; i < 400000; i++)
		count[pti_zipf(4, 0, &r)]++;
	for (int k = 1; k <= 4; k++)
		PT_TEST_NEAR(count[k], 100000, 2000);
	PT_TEST_TRUE(pti_zipf(1, 1.1, &r) == 1);
	// A vocabulary far too large for a table: ranks still in range.
	for (int i = 0; i < 1000; i++) {
		uint64_t k = pti_zipf(1ull << 39, 1.05, &r);
		PT_TEST_TRUE(k >= 1 && k <= 1ull << 39);
	}
}

static void test_ctr_planted(void)
{
	// The same spec and stream make the same set; another stream
	// another. Ids lie in their field's range, about a quarter of the
	// examples are clicks, p is the planted logit's sigmoid, and the
	// planted probabilities rank clicks well above chance.
	pti_ctr_spec s;
	pti_ctr a, b, c;
	PT_TEST_OK(pti_ctr_parse("ctr:20000,8,1000", &s));
	PT_TEST_OK(pti_ctr_make(&a, &s, s.n, 0));
	PT_TEST_OK(pti_ctr_make(&b, &s, s.n, 0));
	PT_TEST_OK(pti_ctr_make(&c, &s, s.n, 1));
	PT_TEST_TRUE(memcmp(a.ids, b.ids, (size_t)s.n * 8 * 8) == 0);
	PT_TEST_TRUE(memcmp(a.y, b.y, s.n) == 0);
	PT_TEST_TRUE(memcmp(a.ids, c.ids, (size_t)s.n * 8 * 8) != 0);
	uint32_t clicks = 0;
	pti_scored *it = malloc(s.n * sizeof(*it));
	for (uint32_t e = 0; e < s.n; e++) {
		for (uint32_t f = 0; f < 8; f++) {
			uint64_t id = a.ids[(size_t)e * 8 + f];
			PT_TEST_TRUE(id >= f * 1000ull && id < (f + 1) * 1000ull);
		}
		double z = pti_ctr_logit(&s, a.ids + (size_t)e * 8);
		PT_TEST_NEAR(a.p[e], 1 / (1 + exp(-z)), 1e-6);
		clicks += a.y[e];
		it[e].score = a.p[e];
		it[e].y = a.y[e];
	}
	double auc = pti_auc(it, s.n);
	double ll = pti_logloss(a.p, a.y, s.n);
	fprintf(stderr, "  ctr:20000,8,1000: %u clicks, planted AUC %.4f, log "
	    "loss %.4f\n", clicks, auc, ll);
	PT_TEST_TRUE(clicks > 0.15 * s.n && clicks < 0.40 * s.n);
	PT_TEST_TRUE(auc > 0.65 && auc < 0.95);
	// Another data seed plants another model.
	pti_ctr_spec s2 = s;
	s2.seed = 2;
	PT_TEST_TRUE(pti_ctr_logit(&s2, a.ids) != pti_ctr_logit(&s, a.ids));
	free(it);
	pti_ctr_free(&a);
	pti_ctr_free(&b);
	pti_ctr_free(&c);
}

static void test_auc_by_hand(void)
{
	pti_scored perfect[] = {{0.9f, 1}, {0.1f, 0}, {0.8f, 1}, {0.2f, 0}};
	PT_TEST_NEAR(pti_auc(perfect, 4), 1.0, 1e-12);
	pti_scored reversed[] = {{0.1f, 1}, {0.9f, 0}};
	PT_TEST_NEAR(pti_auc(reversed, 2), 0.0, 1e-12);
	pti_scored ties[] = {{0.5f, 1}, {0.5f, 0}, {0.5f, 0}};
	PT_TEST_NEAR(pti_auc(ties, 3), 0.5, 1e-12);
	// positives 0.8, 0.4; negatives 0.6, 0.4, 0.2: of 6 pairs, 0.8 wins
	// 3, 0.4 wins 1 (over 0.2) and ties 1: (3 + 1 + 0.5) / 6.
	pti_scored mixed[] = {{0.8f, 1}, {0.6f, 0}, {0.4f, 1}, {0.4f, 0},
	    {0.2f, 0}};
	PT_TEST_NEAR(pti_auc(mixed, 5), 4.5 / 6, 1e-12);
	pti_scored one[] = {{0.3f, 1}, {0.7f, 1}};
	PT_TEST_TRUE(isnan(pti_auc(one, 2)));
	float p[] = {0.9f, 0.2f, 0.0f};
	uint8_t y[] = {1, 0, 0};
	PT_TEST_NEAR(pti_logloss(p, y, 3),
	    -(log(0.9) + log(0.8) + log(1 - 1e-7)) / 3, 1e-6);
	PT_TEST_TRUE(isnan(pti_logloss(p, y, 0)));
}

// A linear plant (K 0): its logit is the bias and the ids' weights
// alone, the same weights as the FM plant of the same seed has.
static void test_ctr_linear_plant(void)
{
	pti_ctr_spec lin, fm;
	PT_TEST_OK(pti_ctr_parse("ctr:100,3,50,5,1.1,0", &lin));
	PT_TEST_OK(pti_ctr_parse("ctr:100,3,50,5,1.1,4", &fm));
	uint64_t ids[3] = {1, 60, 120};
	double zl = pti_ctr_logit(&lin, ids), zf = pti_ctr_logit(&fm, ids);
	PT_TEST_TRUE(isfinite(zl) && zl != zf);
	// Changing one field's id moves the linear logit by that id's
	// weight only: additive in the fields.
	uint64_t a[3] = {2, 60, 120}, b[3] = {1, 61, 120}, c[3] = {2, 61, 120};
	PT_TEST_NEAR(pti_ctr_logit(&lin, c) - pti_ctr_logit(&lin, a),
	    pti_ctr_logit(&lin, b) - zl, 1e-12);
}

static const pti_test_case cases[] = {
    {"test_ctr_parse", test_ctr_parse},
    {"test_ctr_zipf", test_ctr_zipf},
    {"test_ctr_planted", test_ctr_planted},
    {"test_ctr_linear_plant", test_ctr_linear_plant},
    {"test_auc_by_hand", test_auc_by_hand},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
