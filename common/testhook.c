// common/testhook.c - the test hooks that code outside the core calls
// (see testhook.h): train/ and cli/ objects are the same in bin/pstrain
// and the tests' build, so their hooks live here, in the core, which
// only the tests' build compiles with PT_TEST_HOOKS.
#include "common/testhook.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

void pti_test_hold(pti_hold at)
{
	static const char *const hooks[PTI_HOLD_N] = {
	    [PTI_HOLD_EVAL] = "PSTRAIN_TEST_EVAL_HOLD"};
	const char *f = pti_test_hook(hooks[at]);
	while (f != NULL && access(f, F_OK) != 0)
		usleep(10 * 1000);
}

// at: the FILE of hook `name` set to R:T:FILE when R is rank and T step,
// else NULL.
static const char *at(const char *name, unsigned rank, unsigned long long step)
{
	const char *e = pti_test_hook(name);
	unsigned r;
	unsigned long long t;
	int n = 0;
	if (e == NULL || sscanf(e, "%u:%llu:%n", &r, &t, &n) != 2 || n == 0 ||
	    r != rank || t != step)
		return NULL;
	return e + n;
}

int pti_test_poison(unsigned rank, unsigned long long step)
{
	const char *f = at("PSTRAIN_TEST_POISON", rank, step);
	int fd = f != NULL ? open(f, O_WRONLY | O_CREAT | O_EXCL, 0600) : -1;
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

void pti_test_hold_step(unsigned rank, unsigned long long step)
{
	const char *f = at("PSTRAIN_TEST_STEP_HOLD", rank, step);
	while (f != NULL && access(f, F_OK) != 0)
		usleep(10 * 1000);
}

unsigned long long pti_test_steps(unsigned rank, unsigned long long steps)
{
	const char *e = pti_test_hook("PSTRAIN_TEST_STEPS");
	unsigned r;
	unsigned long long n;
	if (e == NULL || sscanf(e, "%u:%llu", &r, &n) != 2 || r != rank)
		return steps;
	return n;
}
