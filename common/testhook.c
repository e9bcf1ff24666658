// common/testhook.c - the test hooks that code outside the core calls
// (see testhook.h): train/ and cli/ objects are the same in bin/pstrain
// and the tests' build, so their hooks live here, in the core, which
// only the tests' build compiles with PT_TEST_HOOKS.
#include "common/testhook.h"

#include <unistd.h>

void pti_test_hold(pti_hold at)
{
	static const char *const hooks[PTI_HOLD_N] = {
	    [PTI_HOLD_EVAL] = "PSTRAIN_TEST_EVAL_HOLD"};
	const char *f = pti_test_hook(hooks[at]);
	while (f != NULL && access(f, F_OK) != 0)
		usleep(10 * 1000);
}
