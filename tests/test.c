// tests/test.c - runs the cases of one unit test program.
#include "test.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

int pt_test_failed;
const char *pt_test_skip;

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
		pt_test_skip = NULL;
		pti_err_clear();
		c->fn();
		ran++;
		if (!pt_test_failed && pt_test_skip != NULL)
			printf("skip %s: %s\n", c->name, pt_test_skip);
		else
			printf("%s %s\n", pt_test_failed ? "FAIL" : "ok",
			    c->name);
		fflush(stdout);
		failed += pt_test_failed;
	}
	if (ran == 0) {
		fprintf(stderr, "%s: no test case matched\n", argv[0]);
		return 2;
	}
	return failed ? 1 : 0;
}

int pt_test_tmpdir(char *out, size_t size, const char *prefix)
{
	const char *base = getenv("TMPDIR");
	if (base == NULL || *base == '\0')
		base = "/tmp";
	snprintf(out, size, "%s/%s.XXXXXX", base, prefix);
	return mkdtemp(out) != NULL ? 0 : -1;
}

void pt_test_rmdir(const char *dir)
{
	char path[4096];
	DIR *d = opendir(dir);
	if (d != NULL) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}
