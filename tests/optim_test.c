// tests/optim_test.c - each optimizer's first steps against values
// computed by hand: p0 = 1, gradient 0.5 every step, lr 0.1.
#include <stdlib.h>

#include "common/job.h"
#include "common/optim.h"
#include "tests/test.h"

// run applies `steps` updates of gradient sum g (of gdiv gradients) to one
// parameter starting at 1 and returns it after each step in out.
static void run(const char *spec, double wd, float g, double gdiv,
    int steps, float *out)
{
	pti_optim o;
	float p = 1, s1 = 0, s2 = 0;
	PT_TEST_OK(pti_optim_parse(&o, spec));
	o.weight_decay = wd;
	for (int t = 1; t <= steps; t++) {
		pti_optim_apply(&o, &p, &s1, &s2, &g, 1, gdiv, 0.1, (uint64_t)t);
		out[t - 1] = p;
	}
}

static void test_optim_sgd(void)
{
	float p[2];
	run("sgd", 0, 0.5f, 1, 2, p);
	PT_TEST_NEAR(p[0], 0.95, 1e-7);
	PT_TEST_NEAR(p[1], 0.90, 1e-7);
	run("sgd", 0, 1.0f, 2, 1, p); // a sum of two gradients: their mean
	PT_TEST_NEAR(p[0], 0.95, 1e-7);
}

static void test_optim_weight_decay(void)
{
	float p[2];
	run("sgd", 0.01, 0.5f, 1, 2, p);
	PT_TEST_NEAR(p[0], 1 - 0.1 * 0.51, 1e-7); // g + wd * p
	PT_TEST_NEAR(p[1], 0.949 - 0.1 * (0.5 + 0.01 * 0.949), 1e-7);
}

static void test_optim_momentum(void)
{
	float p[3];
	run("momentum:0.9", 0, 0.5f, 1, 3, p);
	PT_TEST_NEAR(p[0], 0.95, 1e-7);   // v = 0.5
	PT_TEST_NEAR(p[1], 0.855, 1e-6);  // v = 0.95
	PT_TEST_NEAR(p[2], 0.7195, 1e-6); // v = 1.355
}

static void test_optim_nesterov(void)
{
	float p[2];
	run("nesterov:0.9", 0, 0.5f, 1, 2, p);
	PT_TEST_NEAR(p[0], 1 - 0.1 * (0.5 + 0.9 * 0.5), 1e-7);
	PT_TEST_NEAR(p[1], 0.905 - 0.1 * (0.5 + 0.9 * 0.95), 1e-6);
}

static void test_optim_adagrad(void)
{
	float p[2];
	run("adagrad", 0, 0.5f, 1, 2, p);
	PT_TEST_NEAR(p[0], 0.9, 1e-6);                    // s = 0.25
	PT_TEST_NEAR(p[1], 0.9 - 0.05 / sqrt(0.5), 1e-6); // s = 0.5
}

static void test_optim_adam(void)
{
	float p[3];
	// With a constant gradient the bias-corrected moments are exactly
	// g and g^2, so each step is lr * g / (|g| + eps) = 0.1.
	// (float32 state: within 1e-5 of the exact values)
	run("adam", 0, 0.5f, 1, 3, p);
	PT_TEST_NEAR(p[0], 0.9, 1e-5);
	PT_TEST_NEAR(p[1], 0.8, 1e-5);
	PT_TEST_NEAR(p[2], 0.7, 1e-5);
	// b1 = 0.5: m1 = 0.25, v1 = 0.00025 (b2 = 0.999); hat m = 0.5.
	run("adam:0.5,0.999,1e-8", 0, 0.5f, 1, 1, p);
	PT_TEST_NEAR(p[0], 0.9, 1e-5);
	// a changing gradient: g = 0.5 then 1.5 with b1 = 0.9, b2 = 0.999
	pti_optim o;
	float q = 1, s1 = 0, s2 = 0, g1 = 0.5f, g2 = 1.5f;
	PT_TEST_OK(pti_optim_parse(&o, "adam"));
	pti_optim_apply(&o, &q, &s1, &s2, &g1, 1, 1, 0.1, 1);
	pti_optim_apply(&o, &q, &s1, &s2, &g2, 1, 1, 0.1, 2);
	double m = 0.9 * 0.05 + 0.1 * 1.5, v = 0.999 * 0.00025 + 0.001 * 2.25;
	double want = 0.9 - 0.1 * (m / 0.19) / (sqrt(v / (1 - 0.998001)) + 1e-8);
	PT_TEST_NEAR(q, want, 1e-5);
}

static void test_optim_ftrl(void)
{
	// FTRL-proximal (McMahan et al. 2013), alpha = lr = 0.1, beta 1:
	// from p0 = 1 and g = 0.5, n = 0.25, sigma = 0.5 / 0.1 = 5,
	// z = 0.5 - 5 = -4.5, p = 4.5 / ((1 + 0.5) / 0.1) = 0.3; then
	// n = 0.5, sigma = (sqrt(0.5) - 0.5) / 0.1, z -= ..., p from z.
	float p[2];
	run("ftrl", 0, 0.5f, 1, 2, p);
	PT_TEST_NEAR(p[0], 0.3, 1e-6);
	double sigma = (sqrt(0.5) - 0.5) / 0.1, z = -4.5 + 0.5 - sigma * 0.3;
	PT_TEST_NEAR(p[1], -z / ((1 + sqrt(0.5)) / 0.1), 1e-5);
	// L1 at least |z| gives an exact 0; L2 adds to the denominator.
	run("ftrl:1,5,0", 0, 0.5f, 1, 1, p);
	PT_TEST_TRUE(p[0] == 0.0f);
	run("ftrl:1,1,2", 0, 0.5f, 1, 1, p);
	PT_TEST_NEAR(p[0], 3.5 / (15 + 2), 1e-6);
}

static void test_optim_bad_specs(void)
{
	pti_optim o;
	const char *bad[] = {"", "sgd2", "momentum", "momentum:1.5",
	    "nesterov:x", "adam:0.9", "adam:0.9,0.999", "adam:1,0.9,1e-8",
	    "rmsprop", "ftrl:1", "ftrl:1,-1,0", "ftrlx"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		PT_TEST_ERR(pti_optim_parse(&o, bad[i]), PT_EINVAL);
		PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--optimizer");
	}
}

// test_optim_lr_warmup: the rate ramps linearly over the warm-up steps
// (step 0 gets base / warmup) and is base from then on, or at once
// without a warm-up.
static void test_optim_lr_warmup(void)
{
	pti_lr_rule r = {0.4, 4, 0, 0}, none = {0.4, 0, 0, 0};
	PT_TEST_NEAR(pti_lr(&r, 0, 0), 0.1, 1e-15);
	PT_TEST_NEAR(pti_lr(&r, 2, 0), 0.3, 1e-15);
	PT_TEST_TRUE(pti_lr(&r, 3, 0) == 0.4);
	PT_TEST_TRUE(pti_lr(&r, 1000, 0) == 0.4);
	PT_TEST_TRUE(pti_lr(&none, 0, 0) == 0.4);
}

// test_optim_lr_rule: the job's one rule (pti_job_lr_rule, pti_lr): the
// optimizer's usual rate when --lr is unset, B/256 scaling, warm-up, and
// in async and ssp only, lr / W with --matched-lr and lr / staleness
// with --staleness-lr.
static void test_optim_lr_rule(void)
{
	pti_jobopt o;
	pti_jobopt_defaults(&o);
	pti_lr_rule r = pti_job_lr_rule(&o);
	PT_TEST_TRUE(pti_lr(&r, 0, 0) == 0.1); // sgd's usual rate
	PT_TEST_OK(pti_jobopt_set(&o, "optimizer", "adam"));
	r = pti_job_lr_rule(&o);
	PT_TEST_TRUE(pti_lr(&r, 5, 0) == 0.001);
	PT_TEST_OK(pti_jobopt_set(&o, "lr", "0.4"));
	PT_TEST_OK(pti_jobopt_set(&o, "batch", "512"));
	PT_TEST_OK(pti_jobopt_set(&o, "lr-scaling", "linear"));
	PT_TEST_OK(pti_jobopt_set(&o, "workers", "4"));
	PT_TEST_OK(pti_jobopt_set(&o, "matched-lr", "1"));
	PT_TEST_OK(pti_jobopt_set(&o, "staleness-lr", "1"));
	o.warmup = 4; // sync: neither division applies
	r = pti_job_lr_rule(&o);
	PT_TEST_NEAR(pti_lr(&r, 0, 3), 0.2, 1e-15);
	PT_TEST_TRUE(pti_lr(&r, 9, 3) == 0.8);
	PT_TEST_OK(pti_jobopt_set(&o, "mode", "async"));
	o.warmup = 0;
	r = pti_job_lr_rule(&o);
	PT_TEST_NEAR(pti_lr(&r, 9, 1), 0.2, 1e-15);
	PT_TEST_NEAR(pti_lr(&r, 9, 4), 0.05, 1e-15);
	// Only a job's options: a flag of pstrain's own trainer is not one.
	PT_TEST_ERR(pti_jobopt_set(&o, "epochs", "3"), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "epochs");
}

static const pti_test_case cases[] = {
    {"test_optim_sgd", test_optim_sgd},
    {"test_optim_weight_decay", test_optim_weight_decay},
    {"test_optim_momentum", test_optim_momentum},
    {"test_optim_nesterov", test_optim_nesterov},
    {"test_optim_adagrad", test_optim_adagrad},
    {"test_optim_ftrl", test_optim_ftrl},
    {"test_optim_adam", test_optim_adam},
    {"test_optim_bad_specs", test_optim_bad_specs},
    {"test_optim_lr_warmup", test_optim_lr_warmup},
    {"test_optim_lr_rule", test_optim_lr_rule},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
