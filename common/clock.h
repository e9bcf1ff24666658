// common/clock.h - the monotonic clock and timed condition waits, for
// deadlines and pauses that wall-clock changes must not stretch.
#ifndef PT_COMMON_CLOCK_H
#define PT_COMMON_CLOCK_H

#include <pthread.h>

// pti_clock_s returns seconds on the monotonic clock (CLOCK_MONOTONIC).
double pti_clock_s(void);

// pti_cond_wait_ms waits on cv (mu held, as pthread_cond_timedwait) for
// at most ms milliseconds of wall time, the clock condition variables
// use by default. Spurious and early wake-ups return too: callers loop.
void pti_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms);

#endif // PT_COMMON_CLOCK_H
