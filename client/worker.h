// client/worker.h - the public worker's state, for the files that make
// up pstrain.h's worker: api.c (the variables' push, pull and pushpull)
// and rows.c (embedding tables' rows). Not for anything outside client/.
#ifndef PT_CLIENT_WORKER_H
#define PT_CLIENT_WORKER_H

#include <stdint.h>
#include <stdio.h>

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

// A program's records (record.c): what pstrain's own workers write,
// under the job's option out, from pt_worker_step and pt_worker_eval.
typedef struct pti_worker_rec {
	FILE *csv, *eval;    // worker-R.csv and eval.csv, opened at first use
	double t0;           // the first step's start (pti_clock_s), 0 before
	double last;         // the previous row's end, 0 before the first
	double first_send;   // the first request sent since then, 0: none
	pti_client_step acc; // what the replies since then said
	uint32_t versions;   // replies with values among them
	int64_t pulled;      // the version of the last values pulled
	double loss;         // the last step's
	uint32_t evals;      // eval.csv rows written: the last and the best
	double val_loss, val_acc, best_acc, best_step, best_ver;
	uint64_t tx, rx;     // the connection's bytes at the previous row
	int64_t steps;       // steps recorded: the last one's number + 1
} pti_worker_rec;

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
	pti_worker_rec rec; // record.c
};

// pti_worker_rows_free frees what rows.c keeps for w.
void pti_worker_rows_free(pt_worker *w);

// For record.c: pti_rec_sent notes a request sent (the first since the
// last row starts a first step), pti_rec_reply what a reply said,
// pti_rec_close closes the files.
void pti_rec_sent(pt_worker *w);
void pti_rec_reply(pt_worker *w, const pti_client_step *st);
void pti_rec_close(pt_worker *w);

#endif // PT_CLIENT_WORKER_H
