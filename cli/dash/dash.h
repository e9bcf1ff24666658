// cli/dash/dash.h - watching jobs over HTTP, served with nng's HTTP server
// by the process that runs them or reads them: pstrain run --dashboard
// (one job), pstrain compare --dashboard (every mode and seed as they run)
// and pstrain dashboard DIR... (folders of runs and comparisons, later).
// It serves the page (cli/dash/web/, compiled in), Debian's Chart.js at
// /chart.js, /data.json (the rows the jobs' files gained since the page
// last asked, docs/OUTPUTS.md) and /metrics in Prometheus's text format.
// Every request reads the jobs' files (worker-R.csv, eval.csv,
// summary.json, the checkpoint folder) at that moment, on nng's threads:
// read-only, off the servers' and workers' path. Not thread-safe between
// calls of these functions: one thread (the launcher's) calls them.
#ifndef PT_CLI_DASH_DASH_H
#define PT_CLI_DASH_DASH_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

typedef struct pti_dash pti_dash;

// What state a job is in, as the dashboard shows it.
enum {
	PTI_DASH_PENDING,  // compare: not started yet
	PTI_DASH_RUNNING,  // being run by this process
	PTI_DASH_DONE,     // run to its end by this process
	PTI_DASH_FAILED,   // ended with an error
	PTI_DASH_FILES,    // only its files are known (pstrain dashboard):
			   // finished when it has a summary.json
};

// One job to show: the caller fills it, pti_dash_open copies it.
typedef struct pti_dash_job {
	char label[256];            // "" for a lone run, else "LABEL/seed-S"
	char dir[PT_PATH_MAX + 96]; // its --out folder
	char mode[32];              // "sync", ...; "" to read summary.json's
	char ckpt_dir[PT_PATH_MAX]; // its --checkpoint-dir; "" none or
				    // summary.json's
	uint32_t workers; // 0: as many worker-R.csv files as there are
	uint64_t steps;   // global steps planned; 0: summary.json's, if any
	uint32_t batch;   // global batch; 0: summary.json's, if any
	double t0;        // its start, seconds since 1970; 0 unknown
	int state;        // PTI_DASH_*
} pti_dash_job;

// pti_dash_open serves jobs[0..n) (copied; n >= 1; compare: several
// jobs, shown side by side) on http://listen ("HOST:PORT"; port 0 picks
// a free one), titled title, and writes the address it serves at into
// url (size n_url). flag names listen in errors ("--dashboard-listen").
// Returns 0 and *out (the caller's, to pti_dash_close); PT_EINVAL naming
// flag and listen when it is not HOST:PORT; PT_ETRANSPORT naming them
// when nng cannot serve there; PT_ENOMEM.
int pti_dash_open(pti_dash **out, const char *flag, const char *listen,
    const char *title, const pti_dash_job *jobs, uint32_t n, char *url,
    size_t n_url);

// pti_dash_counts sets the launcher's counts of job `job` (lost workers,
// worker and server restarts); each rise is kept as an event, timed now.
// From the launcher's thread, while requests are served on nng's.
void pti_dash_counts(pti_dash *d, uint32_t job, uint32_t workers_lost,
    uint32_t worker_restarts, uint32_t server_restarts);

// pti_dash_state moves job `job` to state (PTI_DASH_*); t0 (seconds since
// 1970, 0 to keep the one known) is its start.
void pti_dash_state(pti_dash *d, uint32_t job, int state, double t0);

// pti_dash_close stops serving and frees d; NULL is fine.
void pti_dash_close(pti_dash *d);

#endif // PT_CLI_DASH_DASH_H
