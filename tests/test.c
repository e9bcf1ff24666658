// tests/test.c - runs the cases of one unit test program.
#include "tests/test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

int pti_test_failed;

int pti_test_main(int argc, char **argv, const pti_test_case *cases)
{
	int failed = 0, ran = 0;
	for (const pti_test_case *c = cases; c->name != NULL; c++) {
		int want = argc < 2;
		for (int i = 1; i < argc; i++)
			if (strcmp(argv[i], c->name) == 0)
				want = 1;
		if (!want)
			continue;
		pti_test_failed = 0;
		pti_err_clear();
		c->fn();
		ran++;
		printf("%s %s\n", pti_test_failed ? "FAIL" : "ok", c->name);
		fflush(stdout);
		failed += pti_test_failed;
	}
	if (ran == 0) {
		fprintf(stderr, "%s: no test case matched\n", argv[0]);
		return 2;
	}
	return failed ? 1 : 0;
}

// case_proc runs case c as `self NAME` and waits for it; 1 when it
// failed (its own FAIL line, or one said here for it), else 0.
static int case_proc(const char *self, const pti_test_case *c, double limit)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		printf("FAIL %s: fork: %s\n", c->name, strerror(errno));
		return 1;
	}
	if (pid == 0) {
		execl("/proc/self/exe", self, c->name, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	struct timespec tick = {0, 10 * 1000 * 1000};
	for (double waited = 0; waitpid(pid, &st, WNOHANG) == 0;
	     waited += 0.01) {
		if (waited >= limit) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			printf("FAIL %s: still running after %.0f s, killed\n",
			    c->name, limit);
			return 1;
		}
		nanosleep(&tick, NULL);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) <= 1)
		return WEXITSTATUS(st); // its verdict is printed
	if (WIFSIGNALED(st))
		printf("FAIL %s: died of signal %d\n", c->name, WTERMSIG(st));
	else
		printf("FAIL %s: exited %d\n", c->name, WEXITSTATUS(st));
	return 1;
}

int pti_test_main_isolated(int argc, char **argv, const pti_test_case *cases)
{
	if (argc > 1) {
		int rv = pti_test_main(argc, argv, cases);
		fflush(NULL);
#ifdef __SANITIZE_ADDRESS__
		// _exit skips LeakSanitizer's own check at exit: done here.
		__lsan_do_leak_check();
#endif
		_exit(rv);
	}
	const char *e = getenv("PT_TEST_CASE_S");
	double limit = e != NULL && atof(e) > 0 ? atof(e) : 300;
	int failed = 0;
	for (const pti_test_case *c = cases; c->name != NULL; c++)
		failed += case_proc(argv[0], c, limit);
	return failed ? 1 : 0;
}

int pti_test_tmpdir(char *out, size_t size, const char *prefix)
{
	const char *base = getenv("TMPDIR");
	if (base == NULL || *base == '\0')
		base = "/tmp";
	snprintf(out, size, "%s/%s.XXXXXX", base, prefix);
	return mkdtemp(out) != NULL ? 0 : -1;
}

void pti_test_rmdir(const char *dir)
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
