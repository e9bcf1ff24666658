// tests/config_test.c - the flag table: defaults, parsing, errors that
// name the flag, and the hand-on of flags from launcher to children.
#include <stdlib.h>

#include "common/config.h"
#include "common/proto.h"
#include "tests/test.h"

static int parse(pti_config *c, uint32_t cmd, int argc, char **argv)
{
	int help;
	pti_config_defaults(c);
	return pti_config_parse(c, cmd, argc, argv, &help);
}

static void test_config_defaults(void)
{
	pti_config c;
	pti_config_defaults(&c);
	PT_TEST_TRUE(c.job.mode == PT_MODE_SYNC && c.job.servers == 1);
	PT_TEST_TRUE(c.job.batch == 256 && c.job.lr == 0 && c.job.seed == 1);
	PT_TEST_TRUE(strcmp(c.data, "fashion-mnist") == 0);
}

static void test_config_parse(void)
{
	pti_config c;
	char *argv[] = {"--mode", "async", "--workers=4", "--lr", "0.05",
	    "--model", "mlp:8", "--steps", "12"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 9, argv));
	PT_TEST_TRUE(c.job.mode == PT_MODE_ASYNC && c.job.workers == 4);
	PT_TEST_TRUE(c.job.lr == 0.05 && c.steps == 12);
	PT_TEST_TRUE(pti_config_given(&c, "steps"));
	PT_TEST_TRUE(!pti_config_given(&c, "epochs"));
}

static void test_config_errors_name_the_flag(void)
{
	pti_config c;
	char *a1[] = {"--batch", "abc"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 2, a1), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--batch");
	char *a2[] = {"--workers", "0"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 2, a2), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--workers");
	char *a3[] = {"--frobnicate", "1"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 2, a3), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--frobnicate");
	char *a4[] = {"--mode", "fast"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 2, a4), PT_EINVAL);
	char *a5[] = {"--lr"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 1, a5), PT_EINVAL);
	char *a6[] = {"--batch", "-3"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 2, a6), PT_EINVAL);
	// a flag of another command
	char *a7[] = {"--model-file", "x"};
	PT_TEST_ERR(parse(&c, PT_CMD_RUN, 2, a7), PT_EINVAL);
}

static void test_config_check_batch(void)
{
	pti_config c;
	char *argv[] = {"--workers", "3", "--batch", "100", "--out", "x"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 6, argv));
	PT_TEST_ERR(pti_config_check(&c, PT_CMD_RUN), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "not divisible");
}

static void test_config_to_argv_roundtrip(void)
{
	pti_config c, d;
	char *argv[] = {"--mode", "async", "--workers", "4", "--lr",
	    "0.1234567890123", "--seed", "18446744073709551615", "--out", "o"};
	PT_TEST_OK(parse(&c, PT_CMD_RUN, 10, argv));
	char *out[128];
	int n = 0;
	PT_TEST_OK(pti_config_to_argv(&c, PT_CMD_RUN, PT_CMD_WORKER, out, &n));
	PT_TEST_OK(parse(&d, PT_CMD_WORKER, n, out));
	PT_TEST_TRUE(d.job.mode == c.job.mode && d.job.workers == 4);
	PT_TEST_TRUE(d.job.seed == 18446744073709551615ULL);
	PT_TEST_TRUE(strcmp(d.job.out, "o") == 0);
	// --lr goes to workers too (an allreduce worker runs the update)
	PT_TEST_TRUE(d.job.lr == c.job.lr);
	for (int i = 0; i < n; i++)
		free(out[i]);
	n = 0;
	PT_TEST_OK(pti_config_to_argv(&c, PT_CMD_RUN, PT_CMD_SERVER, out, &n));
	PT_TEST_OK(parse(&d, PT_CMD_SERVER, n, out));
	PT_TEST_TRUE(d.job.lr == c.job.lr); // exact: %.17g
	for (int i = 0; i < n; i++)
		free(out[i]);
}

// test_config_straggler_delay: --straggler sums each worker's R:MS
// entries; --delay reads to its kind and parameters; malformed values are
// refused naming the flag.
static void test_config_straggler_delay(void)
{
	pti_config c;
	double ms;
	pti_delay d;
	pti_config_defaults(&c);
	c.job.workers = 3;
	snprintf(c.straggler, sizeof(c.straggler), "0:20,1:5,0:10");
	PT_TEST_OK(pti_config_straggler(&c, 0, &ms));
	PT_TEST_TRUE(ms == 30);
	PT_TEST_OK(pti_config_straggler(&c, 1, &ms));
	PT_TEST_TRUE(ms == 5);
	PT_TEST_OK(pti_config_straggler(&c, 2, &ms));
	PT_TEST_TRUE(ms == 0);
	snprintf(c.straggler, sizeof(c.straggler), "3:20");
	PT_TEST_ERR(pti_config_straggler(&c, 0, &ms), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--straggler 3:20");
	PT_TEST_OK(pti_config_delay(&c, &d));
	PT_TEST_TRUE(d.kind == PT_DELAY_NONE);
	snprintf(c.delay, sizeof(c.delay), "uniform:2:7");
	PT_TEST_OK(pti_config_delay(&c, &d));
	PT_TEST_TRUE(d.kind == PT_DELAY_UNIFORM && d.a == 2 && d.b == 7);
	snprintf(c.delay, sizeof(c.delay), "exp:4");
	PT_TEST_OK(pti_config_delay(&c, &d));
	PT_TEST_TRUE(d.kind == PT_DELAY_EXP && d.a == 4);
	snprintf(c.delay, sizeof(c.delay), "uniform:7:2");
	PT_TEST_ERR(pti_config_delay(&c, &d), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--delay");
}

// Sub-specs are read once, with their flag, into typed fields; a bad one
// is refused there, naming the flag.
static void test_config_specs_read_once(void)
{
	pti_config c;
	int help;
	char *ok[] = {"--delay", "uniform:1:3", "--checkpoint-every", "5s",
	    "--optimizer", "momentum:0.5"};
	pti_config_defaults(&c);
	PT_TEST_TRUE(c.delay_spec.kind == PT_DELAY_NONE && c.job.ckpt_every == 0);
	PT_TEST_TRUE(c.job.optim.kind == PT_OPT_SGD);
	PT_TEST_OK(pti_config_parse(&c, PT_CMD_RUN, 6, ok, &help));
	PT_TEST_TRUE(c.delay_spec.kind == PT_DELAY_UNIFORM &&
		     c.delay_spec.a == 1 && c.delay_spec.b == 3);
	PT_TEST_TRUE(c.job.ckpt_every == 5 && c.job.ckpt_seconds == 1);
	PT_TEST_TRUE(c.job.optim.kind == PT_OPT_MOMENTUM && c.job.optim.momentum == 0.5);
	char *bad[] = {"--checkpoint-every", "5m"};
	PT_TEST_ERR(pti_config_parse(&c, PT_CMD_RUN, 2, bad, &help), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--checkpoint-every 5m");
}

static const pti_test_case cases[] = {
    {"test_config_specs_read_once", test_config_specs_read_once},
    {"test_config_defaults", test_config_defaults},
    {"test_config_straggler_delay", test_config_straggler_delay},
    {"test_config_parse", test_config_parse},
    {"test_config_errors_name_the_flag", test_config_errors_name_the_flag},
    {"test_config_check_batch", test_config_check_batch},
    {"test_config_to_argv_roundtrip", test_config_to_argv_roundtrip},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
