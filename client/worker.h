// client/worker.h - the public worker's state, for the files that make
// up pstrain.h's worker: api.c (the variables' push, pull and pushpull)
// and rows.c (embedding tables' rows). Not for anything outside client/.
#ifndef PT_CLIENT_WORKER_H
#define PT_CLIENT_WORKER_H

#include <stdint.h>

#include "client/client.h"
#include "common/config.h"
#include "common/mode.h"
#include "pstrain.h"

// What the worker last read of a table: the rows it pulled (ids
// ascending) and the update count each had, sent back with the rows'
// gradients so that the server can count their staleness (rows.c).
typedef struct pti_row_memo {
	uint64_t *ids;
	uint32_t *count;
	uint64_t n, room;
} pti_row_memo;

struct pt_worker {
	pti_jobopt job;   // the job's options, the worker's own copy
	uint32_t rank;
	char connect[PT_URLS_MAX]; // the servers' addresses, by rank
	const pti_mode *mode; // what the job's mode asks of a worker
	pti_layout l;
	pti_client *client;
	int64_t start;    // the step it went on from at its last hello
	int64_t next_ver; // sync: the version after the last step pushed
	pti_row_memo memo[PT_MAX_TABLES]; // rows.c
};

// pti_worker_rows_free frees what rows.c keeps for w.
void pti_worker_rows_free(pt_worker *w);

#endif // PT_CLIENT_WORKER_H
