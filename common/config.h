// common/config.h - every command-line flag of every subcommand, in one
// table (name, type, default, bounds, target field, help, which commands
// take it), in the spirit of Redis's static_configs. The launcher uses the
// same table to hand its settings on to the processes it starts, so a flag
// means the same thing everywhere.
#ifndef PT_COMMON_CONFIG_H
#define PT_COMMON_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "common/jobopt.h"
#include "common/layout.h"
#include "common/optspec.h"

#define PT_URLS_MAX 8192

// Which subcommands take a flag.
enum {
	PT_CMD_RUN = 1u << 0,
	PT_CMD_SERVER = 1u << 1,
	PT_CMD_WORKER = 1u << 2,
	PT_CMD_EVAL = 1u << 3,
	PT_CMD_COMPARE = 1u << 4, // takes every run flag too
	PT_CMD_NODE = 1u << 5,    // takes every run, server and worker flag
};
// server and worker take every run flag too, so that one command line
// serves every process of a job; each uses what concerns it.

// PT_TRANSPORT_SHM is ipc with the job's dense values in shared memory
// (common/shm.h); pti_cli_finish turns it into ipc and job.shm.
// PT_TRANSPORT_AUTO, run's default, becomes one of the others in
// pti_config_hosts_imply (or pti_config_transport_pick).
enum { PT_TRANSPORT_IPC = 1, PT_TRANSPORT_TCP = 2, PT_TRANSPORT_TLS = 3,
    PT_TRANSPORT_SHM = 4, PT_TRANSPORT_AUTO = 5 };
enum { PT_LR_NONE = 1, PT_LR_LINEAR = 2 };
// --layer-push: off, on, or auto (pti_config_layer_push_resolve).
enum { PT_LP_OFF = 0, PT_LP_ON = 1, PT_LP_AUTO = 2 };
// --placement: no emulated hosts, or each process on a host of its own,
// or server s on worker s's host.
enum { PT_PLACE_NONE = 0, PT_PLACE_DEDICATED = 1, PT_PLACE_COLOCATED = 2 };

// --delay, read: none, exponential with mean a ms, or uniform in [a, b].
enum { PT_DELAY_NONE = 0, PT_DELAY_EXP, PT_DELAY_UNIFORM };
typedef struct pti_delay {
	int kind;
	double a, b;
} pti_delay;

typedef struct pti_config {
	pti_jobopt job; // the job's options, the library's (common/jobopt.h)
	char model[PT_SPEC_MAX];
	char data[PT_PATH_MAX];
	uint32_t epochs;
	uint64_t steps; // 0: derived from epochs
	uint64_t eval_every; // steps; 0: once per epoch
	char save_model[PT_PATH_MAX];
	int transport;
	char link[64];  // run: --link RATE[,DELAY] of each emulated host
	int placement;  // run: PT_PLACE_*
	char send_delay[32]; // server, worker, node: --send-delay DELAY
	// per process, set by the launcher or by hand
	uint32_t rank;
	char listen[PT_PATH_MAX];  // a server's; an allreduce worker's ring's
	char connect[PT_URLS_MAX]; // comma-separated server URLs, by rank
				   // (allreduce: every worker's ring address)
	char ring_dir[PT_PATH_MAX]; // allreduce worker: publish and find the
				    // ring's addresses there
	char cluster[PT_PATH_MAX];
	char config[PT_PATH_MAX]; // --config: flags read from a file
	char ready_file[PT_PATH_MAX];
	char model_file[PT_PATH_MAX];
	double warmup_epochs;
	char resume[PT_PATH_MAX];  // run: the folder to resume from
	uint32_t restart_workers;  // run: restarts allowed for failed workers
	uint32_t restart_servers;  // run: server restarts from a checkpoint
	char gone_workers[PT_PATH_MAX]; // server: "R,R,...": not waited for
	// injected delays (workers)
	char straggler[PT_PATH_MAX]; // "R:MS,R:MS,..."
	char delay[128];             // "", "exp:MEAN_MS", "uniform:LO:HI"
	pti_delay delay_spec;         // --delay, read
	// evaluation and learning-rate matching
	char validation[32];      // "N" examples or "P%" of the training set
	uint32_t evals_per_epoch; // with eval_every 0
	int layer_push;           // PT_LP_*: push each layer as backward ends it
	uint32_t prefetch;        // gather the next batch in a thread
	uint32_t pin;             // run: each process on a core of its own
	uint32_t worker_threads;  // run: OpenBLAS threads of each worker
	uint32_t force;           // run: overwrite a previous run's --out
	// processes started by hand (not under pstrain run)
	uint32_t supervised;   // 1: under pstrain run, which does the rest
	int64_t node_rank;     // node: rank among S+W, servers first; -1
	char job_id[128];      // node: names DIR/nodes/ID
	char advertise[256];   // node: the address other hosts reach it at
	uint32_t port;         // node: servers listen on port+R; 0: any
	double acc_floor;           // run: collapsed under it; 0: 2/classes
	uint32_t dashboard;         // run: serve /metrics over HTTP
	char dashboard_listen[128]; // run: HOST:PORT for it
	// compare
	char modes[PT_PATH_MAX];
	double target_acc;
	double target_auc;        // > 0: the "to A" columns follow the AUC
	char baseline[64];        // the mode the others are paired with
	char lr_grid[256];        // rates to pick each mode's from, or ""
	char tune_seeds[PT_PATH_MAX]; // seeds of that pick: N or S,S,...
	char seeds[PT_PATH_MAX];  // "N" (1..N) or "S,S,..."; "" --seed alone
	uint32_t allow_failures;  // go on past a damaged job
	uint32_t report_only;     // re-make report and plots, run nothing
	char plot_style[16];      // compare's figures: "screen" or "paper"
	uint32_t cmp_resume;      // compare --resume: keep the jobs done
	uint32_t add_seeds;       // compare --add-seeds N: N seeds more
	uint64_t given[2]; // bit i: flag i of the table was on the command line
} pti_config;

// pti_config_defaults fills every field with its table default.
void pti_config_defaults(pti_config *c);

// pti_config_parse reads argv[0..argc) (flags only, no command name) for
// command cmd (one PT_CMD_* bit). Returns 0, or PT_EINVAL with a detail
// naming the flag and what was wrong. "--help" sets *help and returns 0.
int pti_config_parse(pti_config *c, uint32_t cmd, int argc, char **argv,
    int *help);

// pti_config_set sets flag `name` (without dashes, any command's) to
// value, checked as on the command line; a switch takes "1" or "0".
// PT_EINVAL naming the flag.
int pti_config_set(pti_config *c, const char *name, const char *value);

// pti_config_straggler reads --straggler: *ms is the fixed delay per step
// its R:MS entries give worker rank (0 when none). PT_EINVAL naming the
// flag when it does not parse or names a rank beyond --workers.
int pti_config_straggler(const pti_config *c, uint32_t rank, double *ms);

// pti_config_link reads --link RATE[,DELAY]: *bps the rate in bits per
// second (0: none given), *delay_s the one-way delay (0: none). PT_EINVAL
// naming the flag and what a rate or delay looks like.
int pti_config_link(const pti_config *c, double *bps, double *delay_s);

// pti_config_send_delay reads --send-delay into *s (0 without it).
// PT_EINVAL naming the flag when it is no delay of 0-10 s.
int pti_config_send_delay(const pti_config *c, double *s);

// pti_config_hosts_imply makes what --link, --placement and --transport
// auto imply explicit (after pti_config_check, which refused what they
// cannot go with): --link alone means --placement dedicated, emulated
// hosts talk over --transport tcp unless tls was asked for, and on this
// machine auto is ipc with shared memory where --mode has servers
// (pti_config_transport_pick).
void pti_config_hosts_imply(pti_config *c);

// pti_config_transport_pick turns --transport auto into tcp between
// emulated hosts (--link, --placement), else ipc, with the dense values
// in shared memory (job.shm) when `shared`; any other transport stays.
// Compare picks once for all its jobs, run for its own.
void pti_config_transport_pick(pti_config *c, int shared);

// pti_config_shm_auto turns a hand-started server's or worker's (cmd)
// --transport auto into a choice by its addresses, in a mode with
// servers: a server listening at an ipc:// address offers shared memory
// (job.shm 1), a worker whose servers are all at ipc:// addresses uses it
// where they offer it (PTI_SHM_TRY); else, and for any other --transport,
// nothing changes (pstrain run passes its children its own choice).
void pti_config_shm_auto(pti_config *c, uint32_t cmd);

// pti_config_network writes where c's processes run into out (size n):
// "" on this machine, else ", PLACEMENT hosts, link RATE[,DELAY]" (or
// "links not shaped"), for titles and progress.
void pti_config_network(const pti_config *c, char *out, size_t n);

// pti_config_delay reads --delay into *d. PT_EINVAL naming the flag.
int pti_config_delay(const pti_config *c, pti_delay *d);

// pti_jobopt_ckpt_every reads --checkpoint-every: *every versions (or
// seconds, *seconds = 1), 0 for never. PT_EINVAL naming the flag.
int pti_jobopt_ckpt_every(const pti_jobopt *o, uint64_t *every,
    int *seconds);

// The job's options through the same table, for pt_job: pti_jobopt_defaults
// fills o with the defaults of the flags whose field lies in a job's
// options; pti_jobopt_set sets one of them by its flag name (PT_EINVAL
// naming it, or naming a name that is not a job option).
void pti_jobopt_defaults(pti_jobopt *o);
int pti_jobopt_set(pti_jobopt *o, const char *name, const char *value);

// pti_config_file reads FILE's flags (one "key = value" per line, '#'
// starts a comment, a switch takes true or false) into c as --config
// does, for command cmd; each counts as given. 0, or PT_EINVAL/PT_EIO
// naming the file, line and flag.
int pti_config_file(pti_config *c, uint32_t cmd, const char *path);

// pti_config_save writes every flag of cmd given to c (on the command
// line or from a file), but --config and those named in skip (a NULL-
// ended list), to f in the form pti_config_file reads. 0, or PT_EINVAL
// naming a value that the form cannot hold (a '#' or a line break).
int pti_config_save(const pti_config *c, uint32_t cmd,
    const char *const *skip, FILE *f);

// pti_config_given tells whether flag `name` was on the command line.
int pti_config_given(const pti_config *c, const char *name);

// pti_config_help prints the flags of cmd, with defaults, to f.
void pti_config_help(FILE *f, uint32_t cmd);

// pti_config_to_argv appends "--flag value" for every flag that both `from`
// and `to` commands take, to argv starting at *argc (argv must have room
// for 2 * pti_config_count() more entries; strings are strdup'd, the caller
// frees them). Returns PT_ENOMEM.
int pti_config_to_argv(const pti_config *c, uint32_t from, uint32_t to,
    char **argv, int *argc);

// pti_config_count is the number of flags in the table.
int pti_config_count(void);

// pti_config_cluster reads a cluster file: lines "server URL" (in rank
// order) and "worker HOST" (one per worker), '#' comments. It sets
// c->connect, c->servers and c->workers, and for a server c->listen from
// its rank. Returns PT_EINVAL or PT_EIO with a detail naming the file and
// line.
int pti_config_cluster(pti_config *c, uint32_t cmd);

// pti_jobopt_check validates the combination of a job's options (W
// divides B, a mode's own options only with that mode, ...): what
// pti_config_check checks of c->job, for the library's servers and
// workers too. PT_EINVAL with a detail naming the options.
int pti_jobopt_check(const pti_jobopt *o);

// pti_jobopt_check_proc checks one process of the job: a server's
// (PT_CMD_SERVER) or worker's (PT_CMD_WORKER) rank below the job's count,
// its addresses (the one it listens on, or the servers'), and the TLS
// files against them. PT_EINVAL naming the flag.
int pti_jobopt_check_proc(const pti_jobopt *o, uint32_t cmd, uint32_t rank,
    const char *addrs);

// pti_config_length_check: PT_EINVAL naming both when --steps and
// --epochs were both given (one of them would be ignored); else 0. Run,
// compare and node refuse them (pti_config_check; node before it takes
// a server's or a worker's role), not the server and worker a launcher
// starts, which it gives every flag.
int pti_config_length_check(const pti_config *c);

// pti_config_check validates the combination of flags for cmd (W divides
// B, epochs or steps, ...). PT_EINVAL with a detail naming the flags.
int pti_config_check(const pti_config *c, uint32_t cmd);

// pti_config_validation computes how many of n_train training examples
// --validation holds out ("N", or "P%" rounded down) into *n_val.
// PT_EINVAL with a detail when the value is malformed or leaves nothing
// to train on.
int pti_config_validation(const pti_config *c, uint32_t n_train,
    uint32_t *n_val);

// pti_config_load_data loads --data with --seed and holds --validation
// examples out of its training set (pti_data_holdout): what every process
// of a job trains and evaluates on. Returns pti_data_load's codes or
// PT_EINVAL for a --validation that does not fit; on success the caller
// frees *d with pti_data_fini, on failure *d is untouched.
struct pti_data;
int pti_config_load_data(const pti_config *c, struct pti_data *d);

// pti_config_json is every flag that cmd takes, with its effective value
// in c, as one JSON object keyed by flag name (numbers as numbers,
// switches as true/false, the rest as strings), the caller's (NULL when
// out of memory). The table drives it, so no flag is left out.
struct json_t;
struct json_t *pti_config_json(const pti_config *c, uint32_t cmd);

// pti_mode_name returns "sync", "async" or "ssp".
const char *pti_mode_name(int mode);

#endif // PT_COMMON_CONFIG_H
