// tests/test.c - runs the cases of one unit test program.
#include "test.h"

int pt_test_failed;

int pt_test_main(int argc, char **argv, const pt_test_case *cases)
{
	int failed = 0, ran = 0;
	for (const pt_test_case *c = cases; c->name != NULL; c++) {
		int want = argc < 2;
		for (int i = 1; i < argc; i++)
			if (strcmp(argv[i], c->name) == 0)
				want = 1;
		if (!want)
			continue;
		pt_test_failed = 0;
		pti_err_clear();
		c->fn();
		ran++;
		printf("%s %s\n", pt_test_failed ? "FAIL" : "ok", c->name);
		fflush(stdout);
		failed += pt_test_failed;
	}
	if (ran == 0) {
		fprintf(stderr, "%s: no test case matched\n", argv[0]);
		return 2;
	}
	return failed ? 1 : 0;
}
