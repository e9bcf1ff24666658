// bench/bench.h - what the benchmark programs that time nng share: the
// clock, dying with a message, and the ipc buffers pstrain's own
// connections get, for their raw sockets. Static functions: each
// program takes what it uses.
#ifndef PT_BENCH_BENCH_H
#define PT_BENCH_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#include <nng/nng.h>

#include "common/clock.h"
#include "common/err.h" // pt_errmsg
#include "common/transport.h" // pti_transport_widen

static inline double now_us(void)
{
	return pti_clock_s() * 1e6;
}

// die says "PROG: what: the error" (nng's when nng is set, else
// pstrain's) and exits 1. BENCH_PROG names the program.
static inline void die(const char *what, int rv, int nng)
{
	fprintf(stderr, "%s: %s: %s\n", BENCH_PROG, what,
	    nng ? nng_strerror(rv) : pt_errmsg(rv));
	exit(1);
}

// widen_cb gives a raw socket's ipc connections the buffers pstrain's
// own get (a pipe-notify callback).
static inline void widen_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)ev, (void)arg;
	(void)pti_transport_widen(p);
}

#endif // PT_BENCH_BENCH_H
