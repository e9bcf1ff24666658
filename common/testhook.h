// common/testhook.h - fault injection for tests, compiled only into the
// build that tests run (-DPT_TEST_HOOKS: the objects under build/obj and
// build/asan that the test programs link, and build/tests/pstrain). The
// library and bin/pstrain read no PSTRAIN_TEST_* variable: there every
// hook is NULL.
#ifndef PT_COMMON_TESTHOOK_H
#define PT_COMMON_TESTHOOK_H

#include <stdlib.h>

// pti_test_hook: the value of the environment variable `name` (a
// PSTRAIN_TEST_* hook) in a test build, else NULL.
static inline const char *pti_test_hook(const char *name)
{
#ifdef PT_TEST_HOOKS
	return getenv(name);
#else
	(void)name;
	return NULL;
#endif
}

// The points where a test may hold a thread (pti_test_hold), each named
// by its hook in common/testhook.c.
typedef enum pti_hold {
	PTI_HOLD_EVAL, // PSTRAIN_TEST_EVAL_HOLD: before each evaluation
	PTI_HOLD_N
} pti_hold;

// pti_test_hold waits while the file that point's hook names does not
// exist (returns at once without the hook): for a test to hold a thread
// there until it lets it go. In common/testhook.c, for train/ and cli/,
// whose objects bin/pstrain shares with the tests' build: the hook's
// name is not in them.
void pti_test_hold(pti_hold at);

// pti_test_poison: with PSTRAIN_TEST_POISON=R:T:FILE, true once for
// worker R at step T, when FILE does not exist yet (it is made then):
// that worker pushes a poisoned gradient (train/loop.c), once, whether
// or not it is restarted after.
int pti_test_poison(unsigned rank, unsigned long long step);

// pti_test_hold_step: with PSTRAIN_TEST_STEP_HOLD=R:T:FILE, worker R
// waits before step T while FILE does not exist (train/loop.c): a test
// keeps a job running, however fast it trains, until it lets it go.
void pti_test_hold_step(unsigned rank, unsigned long long step);

// pti_test_steps: with PSTRAIN_TEST_STEPS=R:N, worker R's planned steps
// are N instead of `steps` (it finishes early, as one misled would).
unsigned long long pti_test_steps(unsigned rank, unsigned long long steps);

#endif // PT_COMMON_TESTHOOK_H
