// common/clock.h - pstrain's one clock module: the monotonic clock, for
// deadlines, pauses and durations that wall-clock changes must not
// stretch; the wall clock, for times that processes compare (a job's
// start t0 is seconds since the epoch, handed from the launcher to every
// process, and each CSV row's wall_s counts from it); timed waits.
#ifndef PT_COMMON_CLOCK_H
#define PT_COMMON_CLOCK_H

#include <pthread.h>

// pti_clock_s returns seconds on the monotonic clock (CLOCK_MONOTONIC).
double pti_clock_s(void);

// pti_wall_s returns seconds since the epoch (CLOCK_REALTIME).
double pti_wall_s(void);

// pti_cond_wait_ms waits on cv (mu held, as pthread_cond_timedwait) for
// at most ms milliseconds of wall time, the clock condition variables
// use by default. Spurious and early wake-ups return too: callers loop.
void pti_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms);

#endif // PT_COMMON_CLOCK_H
