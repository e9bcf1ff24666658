// tests/later_test.c - the send delay's line (common/later.h): each item
// runs no sooner than the delay after it was handed over, in the order
// handed over; a flush runs what waits at once; off, an item runs in the
// caller. Only lower bounds on time: a busy machine only adds to them.
#include <pthread.h>

#include "common/clock.h"
#include "common/later.h"
#include "tests/test.h"

#define ITEMS 200

static struct {
	pthread_mutex_t mu;
	int order[ITEMS], n;
	double handed[ITEMS], ran[ITEMS];
	pthread_t caller, runner[ITEMS];
} rec = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void record(void *arg)
{
	int i = (int)(long)arg;
	pthread_mutex_lock(&rec.mu);
	rec.ran[i] = pti_clock_s();
	rec.runner[i] = pthread_self();
	rec.order[rec.n++] = i;
	pthread_mutex_unlock(&rec.mu);
}

static void hand(int i)
{
	rec.handed[i] = pti_clock_s();
	pti_later(record, (void *)(long)i);
}

static void wait_for(int n)
{
	for (;;) {
		pthread_mutex_lock(&rec.mu);
		int done = rec.n >= n;
		pthread_mutex_unlock(&rec.mu);
		if (done)
			return;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

static void test_later_off_runs_now(void)
{
	rec.n = 0;
	PT_TEST_TRUE(!pti_later_on());
	PT_TEST_OK(pti_later_start(0)); // 0: stays off
	PT_TEST_TRUE(!pti_later_on());
	hand(0);
	PT_TEST_TRUE(rec.n == 1 && pthread_equal(rec.runner[0],
				       pthread_self()));
	pti_later_flush(); // off: nothing to do
	pti_later_stop();
}

static void test_later_delays_in_order(void)
{
	// 200 items, more than the line's first ring of 64, handed over in
	// three bursts: each runs 20 ms or more after its hand-over, on the
	// line's thread, all in the order handed over.
	rec.n = 0;
	PT_TEST_OK(pti_later_start(0.020));
	PT_TEST_TRUE(pti_later_on());
	for (int i = 0; i < ITEMS; i++) {
		hand(i);
		if (i == 70 || i == 140) {
			struct timespec ts = {0, 5000000};
			nanosleep(&ts, NULL);
		}
	}
	wait_for(ITEMS);
	int late = 0, order = 0, here = 0;
	for (int i = 0; i < ITEMS; i++) {
		late += rec.ran[i] - rec.handed[i] < 0.020;
		order += rec.order[i] != i;
		here += pthread_equal(rec.runner[i], pthread_self());
	}
	PT_TEST_TRUE(late == 0);
	PT_TEST_TRUE(order == 0);
	PT_TEST_TRUE(here == 0);
	pti_later_stop();
	PT_TEST_TRUE(!pti_later_on());
}

static void test_later_flush_runs_now(void)
{
	// An hour's delay (a flush that waited it out would hang the case):
	// a flush runs both items now, and returns once they have run.
	rec.n = 0;
	PT_TEST_OK(pti_later_start(3600));
	hand(0);
	hand(1);
	PT_TEST_TRUE(rec.n == 0);
	pti_later_flush();
	PT_TEST_TRUE(rec.n == 2 && rec.order[0] == 0 && rec.order[1] == 1);
	hand(2); // stop runs what waits, too
	pti_later_stop();
	PT_TEST_TRUE(rec.n == 3 && rec.order[2] == 2);
}

static const pti_test_case cases[] = {
    {"test_later_off_runs_now", test_later_off_runs_now},
    {"test_later_delays_in_order", test_later_delays_in_order},
    {"test_later_flush_runs_now", test_later_flush_runs_now},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return pti_test_main(argc, argv, cases);
}
