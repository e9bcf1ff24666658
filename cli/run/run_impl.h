// cli/run/run_impl.h - what the launcher's files share: run.c drives the
// job (prepares it, watches it, ends it); supervise.c starts, reaps and
// stops its processes; recovery.c decides what a failed process costs
// (restart it, go on without it, roll the job back to a checkpoint);
// progress.c shows how far the job is. One thread, the launcher's,
// besides tee.c's, which copies the children's output into their logs.
#ifndef PT_CLI_RUN_RUN_IMPL_H
#define PT_CLI_RUN_RUN_IMPL_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/run/hosts.h"
#include "common/config.h"
#include "common/layout.h"

#define RUN_MAX_PROCS 1280
#define RUN_READY_S 60.0 // seconds a server may take to start listening
#define RUN_RESTART 100  // run_watch: a server died; restart the job
#define RUN_MAX_WORKERS 1024
// seconds a worker may run on after the servers stopped at the job's end
#define RUN_DONE_GRACE 5.0
// seconds the launcher waits for a descriptor to start a process with
#define RUN_FD_WAIT_S 10.0

typedef struct run_proc {
	pid_t pid;
	int server; // 1 server, 0 worker
	uint32_t rank;
	int status; // wait status once exited
	int exited;
	int tee; // its slot in the job's tee (its output), or -1
	char log[PT_PATH_MAX + 32];
} run_proc;

typedef struct run_job {
	pti_config c;
	run_proc procs[RUN_MAX_PROCS];
	uint32_t n_procs;
	char sockdir[PT_PATH_MAX];
	int out_made;    // run_prepare made --out: a failed start removes it
	pti_hosts hosts; // --link, --placement: the emulated hosts
	char urls[PT_URLS_MAX]; // the servers' addresses (allreduce: the
				// ring's, once the job has run)
	uint64_t steps, spe, n_train, n_val;
	uint32_t classes;
	pti_layout layout; // the model's, from run_prepare
	uint32_t worker_restarts, workers_lost, server_restarts;
	uint8_t lost[RUN_MAX_WORKERS]; // workers the job went on without
	uint64_t steps_redone;
	double time_lost; // seconds of training thrown away by rollbacks
	int64_t resumed_from; // --resume's version, -1 for a fresh job
	long csv_from[RUN_MAX_WORKERS]; // where this job's rows begin
	long eval_from;                 // likewise in eval.csv
	char cmdline[8192];             // as typed, for the record
	double t0;
	int tty;
	struct pti_dash *dash; // --dashboard's server, or NULL
	struct pti_tb *tb;     // --tensorboard's files, or NULL
	struct pti_tee *tee;   // the children's output (cli/run/tee.h)
} run_job;

// supervise.c
// The signal (SIGINT, SIGTERM, SIGHUP) the launcher was given, or 0: set
// by run.c's handler, it ends supervise.c's waits too.
extern volatile sig_atomic_t pti_run_signalled;
// pti_run_start starts every server, waits for each to
// listen, then starts every worker (-1 once it has said what failed);
// pti_run_reap collects exited children up to the first that failed
// (returned), pti_run_tell_failure says how a child ended and shows its
// last lines of output (pti_run_tell_output), and whether its log could
// be written; pti_run_how_ended writes "exit status N" or "signal N,
// NAME" into what (size n).
int pti_run_start(run_job *j);
run_proc *pti_run_reap(run_job *j);
void pti_run_tell_failure(run_job *j, const run_proc *p);
void pti_run_tell_output(run_job *j, const run_proc *p);
void pti_run_how_ended(const run_proc *p, char *what, size_t n);
int pti_run_spawn_worker(run_job *j, uint32_t r);
int pti_run_spawn_server(run_job *j, uint32_t s, const char *listen,
    int64_t version, const char *gone);
void pti_run_stop_proc(run_proc *p);
void pti_run_server_url(const run_job *j, uint32_t s, char *url);
int pti_run_wait_server(run_job *j, uint32_t s, char *url);
void pti_run_kill_all(run_job *j);

// progress.c: pti_run_last_row reads the last complete row of the CSV of
// the lowest-ranked worker still in the job; pti_run_progress prints the
// progress line (final: the last one, without an ETA).
int pti_run_last_row(const run_job *j, uint64_t *step, double *wall,
    double *loss);
void pti_run_progress(run_job *j, int final);

// recovery.c
// pti_run_worker_failed: restart a failed worker while --restart-workers
//   allows, else go on without it. 0 when the job goes on.
// pti_run_server_failed: restart a dead server (sync: every server, from
//   the newest checkpoint they all completed) while --restart-servers
//   allows. 0 when the job goes on, RUN_RESTART when only a restart of
//   the whole job will do, -1 when the job ends.
// pti_run_rollback: prepare that restart of the whole job.
// pti_run_find_resume: the newest checkpoint version every server of
//   [lo, hi) completed and that checks out whole, or -1.
// pti_run_gone: the workers whose process has ended, comma-separated in
//   out (PT_PATH_MAX); returns how many finished.
// pti_run_tell_checkpoints: at the end, says which checkpoint writes
//   failed and which checkpoint a --resume would start from.
int pti_run_worker_failed(run_job *j, run_proc *p);
int pti_run_server_failed(run_job *j, run_proc *p);
int pti_run_rollback(run_job *j);
// pti_run_ckpt_ranks: how many servers' checkpoints make one of the
//   job's (allreduce: 1, worker 0's of the whole model, as one server's).
uint32_t pti_run_ckpt_ranks(const pti_config *c);
int64_t pti_run_find_resume(const pti_config *c, const char *dir,
    const pti_layout *l, uint32_t lo, uint32_t hi);
uint32_t pti_run_gone(const run_job *j, char *out);
void pti_run_tell_checkpoints(const run_job *j);

#endif // PT_CLI_RUN_RUN_IMPL_H
