// common/summary.h - what a job leaves beside its processes' own files
// once every process has stopped: DIR/summary.json (results, outcome,
// every option's effective value and the run record of the machine) and
// DIR/staleness.csv, gathered from the processes' files. `pstrain run`
// writes them (run.c), and so does the finishing worker of a job started
// by hand (cli/proc/procs.c). Not the launcher's process handling, which
// is supervise.c's.
#ifndef PT_COMMON_SUMMARY_H
#define PT_COMMON_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "common/config.h"

// The share of chance-level loss ln(classes) below which a job's final
// training loss must fall for it not to count as collapsed.
#define PTI_COLLAPSE_SHARE 0.90

// What the launcher knows of a job that its processes' files do not say.
typedef struct pti_run_facts {
	const pti_config *c;
	const char *cmdline; // as typed, shell-quoted
	uint64_t steps, spe; // global steps, steps per epoch
	uint64_t n_train, n_val;
	uint32_t classes;
	uint32_t worker_restarts, workers_lost, server_restarts;
	uint64_t steps_redone;
	double time_lost;     // seconds
	int64_t resumed_from; // -1 for a fresh job
	const long *csv_from; // (workers) where this job's rows begin
	long eval_from;       // where this job's rows of eval.csv begin
	double t0, wall;      // start (seconds since 1970) and length
	int diverged;
	const char *addresses; // the servers' (allreduce: the ring's), by
			       // rank, comma-separated; "" when unknown
	uint64_t n_params;     // the model's parameters
	const struct pti_hosts *hosts; // the emulated hosts, or NULL
	int program; // a program's job through the library (pt_job_summary):
		     // final.csv optional, model and classes unknown (no
		     // collapse test), nothing printed (the log says it)
} pti_run_facts;

// The finishing worker's final.csv row (NaN where it has no value).
typedef struct pti_final {
	double version, steps, train_s, train_loss, train_acc, test_loss,
	    test_acc, val_loss, val_acc, best_val_acc, best_val_step,
	    best_val_version, best_val_test_loss, best_val_test_acc,
	    eval_wait_s;
	// A click model's (NaN for the others, and in older files).
	double train_auc, test_auc, best_val_test_auc, planted_auc;
} pti_final;

// pti_final_read reads DIR/final.csv into *out. Returns 0, or -1 when it
// is missing or malformed (*out is then untouched).
int pti_final_read(const char *dir, pti_final *out);

// pti_outcome names how a job ended: "diverged" (the workers stopped it),
// "damaged" (a worker lost or restarted, a server restarted), "collapsed"
// (its final training loss is still above PTI_COLLAPSE_SHARE x
// ln(classes), or its final training accuracy is under pti_acc_floor;
// not judged for a program's job), else "ok"; in that order of
// precedence. fin may be NULL (no final.csv). pti_acc_floor is --acc-floor, or twice chance.
const char *pti_outcome(const pti_run_facts *r, const pti_final *fin);
double pti_acc_floor(const pti_run_facts *r);

// pti_record_json is the run record as a JSON object (the caller's):
// command line, pstrain version, host, CPU model and cores, OpenBLAS core
// and threads (and OPENBLAS_CORETYPE if set), nng version, start time.
struct json_t;
struct json_t *pti_record_json(const char *cmdline, double t0);

// pti_ckpt_report sums the checkpoint writes that failed over the
// server-R.json files in c->out into *failures, and copies the error of
// the highest-ranked server that reported one, as "server R: ERROR", into
// last (size n; "" when none).
void pti_ckpt_report(const pti_config *c, uint64_t *failures, char *last,
    size_t n);

// pti_summary_wait_servers gives the servers of c's job up to 30 s, once
// stopped, to write their server-R.json into c->job.out (each whole or
// not at all): the summary gathers them, and a missing one makes the
// job's counts unknown. Files older than t0 (seconds since 1970; 0: any)
// are not this job's. 0 when every one is there, else -1.
int pti_summary_wait_servers(const pti_config *c, double t0);

// pti_summary_write gathers the servers' and workers' files of the job
// in r->c->out, writes staleness.csv and summary.json and prints the
// result to stdout. Returns 0, or -1 after saying on stderr what is
// missing or could not be written. For a program's job (r->program)
// nothing is printed: warnings go to the log, and a failure is
// PT_EIO's message (pt_errmsg).
int pti_summary_write(const pti_run_facts *r);

#endif // PT_COMMON_SUMMARY_H
