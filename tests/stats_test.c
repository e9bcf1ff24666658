// tests/stats_test.c - pti_stats against numbers worked out by hand.
#include "common/stats.h"
#include "tests/test.h"

static void test_stats_three(void)
{
	// mean 2.46 / 3 = 0.82; deviations -0.02, 0, 0.02: sd sqrt(0.0008/2)
	double x[] = {0.80, 0.82, 0.84};
	pti_stats s;
	pti_stats_of(&s, x, 3);
	PT_TEST_TRUE(s.n == 3);
	PT_TEST_NEAR(s.mean, 0.82, 1e-12);
	PT_TEST_NEAR(s.sd, 0.02, 1e-12);
	PT_TEST_NEAR(s.min, 0.80, 0);
	PT_TEST_NEAR(s.max, 0.84, 0);
}

static void test_stats_one(void)
{
	double x[] = {5};
	pti_stats s;
	pti_stats_of(&s, x, 1);
	PT_TEST_TRUE(s.n == 1);
	PT_TEST_NEAR(s.mean, 5, 0);
	PT_TEST_TRUE(isnan(s.sd)); // no spread from one value
	PT_TEST_NEAR(s.min, 5, 0);
	PT_TEST_NEAR(s.max, 5, 0);
}

static void test_stats_nan_skipped(void)
{
	// {2, 4, 9} with two NaN: mean 5; deviations -3, -1, 4: ss 26, sd
	// sqrt(13)
	double x[] = {NAN, 2, 4, NAN, 9};
	pti_stats s;
	pti_stats_of(&s, x, 5);
	PT_TEST_TRUE(s.n == 3);
	PT_TEST_NEAR(s.mean, 5, 1e-12);
	PT_TEST_NEAR(s.sd, sqrt(13.0), 1e-12);
	PT_TEST_NEAR(s.min, 2, 0);
	PT_TEST_NEAR(s.max, 9, 0);
}

static void test_stats_empty(void)
{
	double x[] = {NAN, NAN};
	pti_stats s;
	pti_stats_of(&s, x, 0);
	PT_TEST_TRUE(s.n == 0 && isnan(s.mean) && isnan(s.sd));
	PT_TEST_TRUE(isnan(s.min) && isnan(s.max));
	pti_stats_of(&s, x, 2);
	PT_TEST_TRUE(s.n == 0 && isnan(s.mean) && isnan(s.sd));
}

static void test_stats_negative_and_equal(void)
{
	double x[] = {-1, -1, -1, -1}, y[] = {-3, 1};
	pti_stats s;
	pti_stats_of(&s, x, 4);
	PT_TEST_NEAR(s.mean, -1, 0);
	PT_TEST_NEAR(s.sd, 0, 0);
	pti_stats_of(&s, y, 2); // mean -1, deviations -2, 2: sd sqrt(8)
	PT_TEST_NEAR(s.mean, -1, 1e-12);
	PT_TEST_NEAR(s.sd, sqrt(8.0), 1e-12);
}

static void test_stats_curve_unequal(void)
{
	// three seeds, 3, 2 and 1 points: index 0 has all three, 1 has two,
	// 2 only the first
	double a[] = {1, 10, 100}, b[] = {3, 20}, c[] = {5};
	const double *ys[] = {a, b, c};
	size_t lens[] = {3, 2, 1};
	pti_stats out[3];
	pti_stats_curve(out, ys, lens, 3, 3);
	PT_TEST_TRUE(out[0].n == 3 && out[1].n == 2 && out[2].n == 1);
	PT_TEST_NEAR(out[0].mean, 3, 1e-12);
	PT_TEST_NEAR(out[0].sd, 2, 1e-12); // deviations -2, 0, 2
	PT_TEST_NEAR(out[1].mean, 15, 1e-12);
	PT_TEST_NEAR(out[1].sd, sqrt(50.0), 1e-12); // -5, 5: 50 / 1
	PT_TEST_NEAR(out[2].mean, 100, 0);
	PT_TEST_TRUE(isnan(out[2].sd));
}

static void test_stats_smooth(void)
{
	// window 2: 1, (1+3)/2, (3+NaN)->3, (NaN+7)->7, (7+9)/2
	double x[] = {1, 3, NAN, 7, 9}, out[5];
	pti_stats_smooth(out, x, 5, 2);
	PT_TEST_NEAR(out[0], 1, 0);
	PT_TEST_NEAR(out[1], 2, 1e-12);
	PT_TEST_NEAR(out[2], 3, 1e-12);
	PT_TEST_NEAR(out[3], 7, 1e-12);
	PT_TEST_NEAR(out[4], 8, 1e-12);
	// an inf spoils only the windows that hold it
	double y[] = {1, INFINITY, 1, 1};
	pti_stats_smooth(out, y, 4, 2);
	PT_TEST_TRUE(isinf(out[1]) && isinf(out[2]));
	PT_TEST_NEAR(out[3], 1, 0);
	double z[] = {NAN, NAN};
	pti_stats_smooth(out, z, 2, 20);
	PT_TEST_TRUE(isnan(out[0]) && isnan(out[1]));
}

static void test_stats_t975(void)
{
	// Student's t at 0.975 (R's qt(0.975, df)): the table, then the
	// expansion past df 30.
	PT_TEST_NEAR(pti_t975(1), 12.7062, 1e-4);
	PT_TEST_NEAR(pti_t975(4), 2.7764, 1e-4);
	PT_TEST_NEAR(pti_t975(30), 2.0423, 1e-4);
	PT_TEST_NEAR(pti_t975(31), 2.0395, 1e-4);
	PT_TEST_NEAR(pti_t975(63), 1.9983, 1e-4);
	PT_TEST_NEAR(pti_t975(1000), 1.9623, 1e-4);
	PT_TEST_TRUE(isnan(pti_t975(0)));
}

static void test_stats_paired(void)
{
	// pairs (1, 0.5), (2, 1.5), (3, 3.5); the fourth has a NaN
	double a[] = {1, 2, 3, NAN}, b[] = {0.5, 1.5, 3.5, 1};
	pti_paired p;
	pti_paired_of(&p, a, b, 4);
	PT_TEST_TRUE(p.d.n == 3 && p.a_more == 2 && p.b_more == 1 &&
		     p.ties == 0);
	PT_TEST_NEAR(p.d.mean, 1.0 / 6, 1e-12);
	double half = 4.3027 * sqrt(1.0 / 3) / sqrt(3.0); // sd = sqrt(1/3)
	PT_TEST_NEAR(p.lo, 1.0 / 6 - half, 1e-4);
	PT_TEST_NEAR(p.hi, 1.0 / 6 + half, 1e-4);
	// one pair: no interval
	pti_paired_of(&p, a, b, 1);
	PT_TEST_TRUE(p.d.n == 1 && isnan(p.lo) && isnan(p.hi));
}

static const pti_test_case cases[] = {
    {"test_stats_t975", test_stats_t975},
    {"test_stats_paired", test_stats_paired},
    {"test_stats_three", test_stats_three},
    {"test_stats_one", test_stats_one},
    {"test_stats_nan_skipped", test_stats_nan_skipped},
    {"test_stats_empty", test_stats_empty},
    {"test_stats_negative_and_equal", test_stats_negative_and_equal},
    {"test_stats_curve_unequal", test_stats_curve_unequal},
    {"test_stats_smooth", test_stats_smooth},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
