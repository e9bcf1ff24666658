// tests/fuzz/fuzz.h - what the fuzzing harnesses and their seed maker
// share: the server every server input runs against, and the framing of
// a server input (a sequence of requests on numbered connections).
//
// A server input: byte 0 picks the mode (sync, async, ssp); then records
// of [connection, length low, length high, length bytes of message].
// Connection 1 is worker 0's and 2 worker 1's (both proven before the
// input runs), 3 a control client's (proven), 4 a stranger's. The rest
// are connection events, with no message (the length is their
// argument): 5 closes worker 1's connection and opens a new one for it,
// unproven (8 the same for worker 0); 6 opens `length % 300` new
// connections that prove nothing (past the table's room the oldest give
// way); 7 says worker (length & 1)'s hello again, with a good proof, on
// its connection (a rejoin, or a rank a live connection still holds).
#ifndef PT_TESTS_FUZZ_H
#define PT_TESTS_FUZZ_H

#include <stdint.h>

#include "common/config.h"
#include "common/layout.h"

#define FUZZ_SECRET "00112233445566778899aabbccddeeff0011223344556677"
#define FUZZ_SPEC "mlp:8"
#define FUZZ_DATA "synthetic:100" // 64 features, 10 classes
#define FUZZ_TABLE_DIM 4 // the layout's one embedding table, "emb"

// fuzz_config fills c for the server of mode 1..3.
static inline void fuzz_config(pti_config *c, int mode)
{
	pti_config_defaults(c);
	c->job.mode = mode;
	c->job.workers = 2;
	c->job.servers = 1;
	c->job.batch = 2;
	c->job.lr = 0.5;
	c->job.staleness = 1;
	c->job.seed = 5;
	snprintf(c->model, sizeof(c->model), "%s", FUZZ_SPEC);
	snprintf(c->data, sizeof(c->data), "%s", FUZZ_DATA);
}

// fuzz_layout fills l: FUZZ_SPEC over FUZZ_DATA's features, and table
// "emb" of FUZZ_TABLE_DIM floats a row. 0, or the layout's error.
static inline int fuzz_layout(pti_layout *l)
{
	int rv = pti_layout_init(l, FUZZ_SPEC, 64, 10);
	return rv != 0 ? rv : pti_layout_table(l, "emb", FUZZ_TABLE_DIM, 0.1);
}

#endif // PT_TESTS_FUZZ_H
