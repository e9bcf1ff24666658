// common/later.c - the send delay of a process (see later.h).
#include "common/later.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"
#include "common/err.h"

typedef struct later_item {
	pti_later_fn fn;
	void *arg;
	double due; // pti_clock_s
} later_item;

// The line: a ring of items in the order handed over, which is the
// order they fall due (one delay for all).
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv; // on the monotonic clock
	pthread_t th;
	atomic_int on;
	double delay_s;
	later_item *q;
	size_t cap, head, n;
	int busy;  // the thread runs an item
	int flush; // flushes under way: run everything now
	int stop;
} line = {.mu = PTHREAD_MUTEX_INITIALIZER};

// later_grow doubles the ring (mu held). PT_ENOMEM when it cannot.
static int later_grow(void)
{
	size_t cap = line.cap ? 2 * line.cap : 64;
	later_item *q = malloc(cap * sizeof(*q));
	if (q == NULL)
		return PT_ENOMEM;
	for (size_t i = 0; i < line.n; i++)
		q[i] = line.q[(line.head + i) % line.cap];
	free(line.q);
	line.q = q;
	line.cap = cap;
	line.head = 0;
	return 0;
}

static void later_wait_until(double due)
{
	double t = due - pti_clock_s(), whole;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double frac = modf(t, &whole);
	ts.tv_sec += (time_t)whole;
	ts.tv_nsec += (long)(frac * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&line.cv, &line.mu, &ts);
}

static void *later_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&line.mu);
	for (;;) {
		if (line.n == 0) {
			if (line.stop)
				break;
			pthread_cond_wait(&line.cv, &line.mu);
			continue;
		}
		later_item it = line.q[line.head];
		if (!line.flush && !line.stop && it.due > pti_clock_s()) {
			later_wait_until(it.due);
			continue;
		}
		line.head = (line.head + 1) % line.cap;
		line.n--;
		line.busy = 1;
		pthread_mutex_unlock(&line.mu);
		it.fn(it.arg);
		pthread_mutex_lock(&line.mu);
		line.busy = 0;
		if (line.n == 0)
			pthread_cond_broadcast(&line.cv); // flushes wait for it
	}
	pthread_mutex_unlock(&line.mu);
	return NULL;
}

int pti_later_start(double delay_s)
{
	pthread_condattr_t a;
	if (delay_s <= 0 || atomic_load(&line.on))
		return 0;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&line.cv, &a);
	pthread_condattr_destroy(&a);
	line.delay_s = delay_s;
	line.stop = 0;
	if (later_grow() != 0)
		return pti_err_set(PT_ENOMEM, "--send-delay: the line");
	if (pthread_create(&line.th, NULL, later_main, NULL) != 0)
		return pti_err_set(PT_EIO, "--send-delay: cannot start its "
		    "thread");
	atomic_store(&line.on, 1);
	return 0;
}

int pti_later_on(void)
{
	return atomic_load(&line.on);
}

void pti_later(pti_later_fn fn, void *arg)
{
	if (!atomic_load(&line.on)) {
		fn(arg);
		return;
	}
	pthread_mutex_lock(&line.mu);
	if (line.stop || (line.n == line.cap && later_grow() != 0)) {
		// Stopping, or no memory for the line: the message goes now.
		pthread_mutex_unlock(&line.mu);
		fn(arg);
		return;
	}
	line.q[(line.head + line.n) % line.cap] =
	    (later_item){fn, arg, pti_clock_s() + line.delay_s};
	if (line.n++ == 0)
		pthread_cond_broadcast(&line.cv);
	pthread_mutex_unlock(&line.mu);
}

void pti_later_flush(void)
{
	if (!atomic_load(&line.on))
		return;
	pthread_mutex_lock(&line.mu);
	line.flush++;
	pthread_cond_broadcast(&line.cv);
	while (line.n > 0 || line.busy)
		pthread_cond_wait(&line.cv, &line.mu);
	line.flush--;
	pthread_mutex_unlock(&line.mu);
}

void pti_later_stop(void)
{
	if (!atomic_load(&line.on))
		return;
	pthread_mutex_lock(&line.mu);
	line.stop = 1;
	pthread_cond_broadcast(&line.cv);
	pthread_mutex_unlock(&line.mu);
	pthread_join(line.th, NULL);
	atomic_store(&line.on, 0);
	free(line.q);
	line.q = NULL;
	line.cap = line.head = line.n = 0;
	pthread_cond_destroy(&line.cv);
}
