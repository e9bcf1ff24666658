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

#endif // PT_COMMON_TESTHOOK_H
