// tests/test.h - the small harness every unit test program uses.
// A program lists its cases in a pti_test_case table and calls
// pti_test_main; `prog` runs them all, `prog NAME...` only those named.
// Each case prints "ok NAME" or "FAIL NAME" lines that tests/run.sh counts.
#ifndef PT_TESTS_TEST_H
#define PT_TESTS_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

typedef struct pti_test_case {
	const char *name;
	void (*fn)(void);
} pti_test_case;

extern int pti_test_failed; // set by a failed expectation in this case

#define PT_TEST_FAIL_AT(...)                                                  \
	do {                                                                   \
		fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);              \
		fprintf(stderr, __VA_ARGS__);                                  \
		fprintf(stderr, "\n");                                         \
		pti_test_failed = 1;                                            \
	} while (0)

// PT_TEST_TRUE(cond): the case fails when cond is false.
#define PT_TEST_TRUE(cond)                                                    \
	do {                                                                   \
		if (!(cond))                                                   \
			PT_TEST_FAIL_AT("expected %s", #cond);                 \
	} while (0)

// PT_TEST_OK(expr): expr must return 0.
#define PT_TEST_OK(expr)                                                      \
	do {                                                                   \
		int pti_rv_ = (expr);                                           \
		if (pti_rv_ != 0)                                               \
			PT_TEST_FAIL_AT("%s returned %d (%s)", #expr, pti_rv_,  \
			    pt_errmsg(pti_rv_));                                \
	} while (0)

// PT_TEST_ERR(expr, code): expr must fail with exactly code.
#define PT_TEST_ERR(expr, code)                                               \
	do {                                                                   \
		int pti_rv_ = (expr);                                           \
		if (pti_rv_ != (code))                                          \
			PT_TEST_FAIL_AT("%s returned %d, expected %s (%d)",    \
			    #expr, pti_rv_, #code, (int)(code));                \
	} while (0)

// PT_TEST_NEAR(a, b, tol): |a - b| <= tol.
#define PT_TEST_NEAR(a, b, tol)                                               \
	do {                                                                   \
		double pti_a_ = (a), pti_b_ = (b);                               \
		if (!(fabs(pti_a_ - pti_b_) <= (tol)))                           \
			PT_TEST_FAIL_AT("%s = %.9g, %s = %.9g, tol %g", #a,    \
			    pti_a_, #b, pti_b_, (double)(tol));                  \
	} while (0)

// PT_TEST_STR_HAS(s, sub): string s contains sub.
#define PT_TEST_STR_HAS(s, sub)                                               \
	do {                                                                   \
		const char *pti_s_ = (s);                                       \
		if (pti_s_ == NULL || strstr(pti_s_, (sub)) == NULL)             \
			PT_TEST_FAIL_AT("\"%s\" does not contain \"%s\"",      \
			    pti_s_ ? pti_s_ : "(null)", (sub));                  \
	} while (0)

int pti_test_main(int argc, char **argv, const pti_test_case *cases);

// pti_test_main_isolated is pti_test_main with each case in a process of
// its own when none is named: this program again (`prog NAME`), its lines
// passing through. A case that dies without its verdict, or runs past
// PT_TEST_CASE_S seconds (300; then it is killed), fails by name. A named
// case runs in this process, which then ends with _exit: no atexit
// handler runs (nng 1.5.2's nng_fini can wait forever, tests/ring_test.c
// says when).
int pti_test_main_isolated(int argc, char **argv, const pti_test_case *cases);

// pti_test_tmpdir makes a fresh folder $TMPDIR/PREFIX.XXXXXX (or under
// /tmp) and writes its path to out. Returns 0 or -1.
int pti_test_tmpdir(char *out, size_t size, const char *prefix);

// pti_test_rmdir removes dir and the plain files in it.
void pti_test_rmdir(const char *dir);

#endif // PT_TESTS_TEST_H
