// cli/dash/view.h - what a dashboard serves, as its responses read it:
// dash.c runs the HTTP server and keeps what the launcher tells it (job
// states, counts, events) in a table of pti_dash_jobrt under a lock;
// each request takes a snapshot of that table (a pti_dash_view), and
// dashjson.c builds /data.json and dashprom.c /metrics from it and from
// the jobs' files. Everything here reads; nothing locks.
#ifndef PT_CLI_DASH_VIEW_H
#define PT_CLI_DASH_VIEW_H

#include <stdint.h>

#include "cli/dash/dash.h"

#define PTI_DASH_EVENTS 64    // launcher events kept per job (the latest)
#define PTI_DASH_WORKERS 1024 // worker-R.csv files looked for, at most

enum { PTI_DEV_LOST, PTI_DEV_WORKER_RESTART, PTI_DEV_SERVER_RESTART };

typedef struct pti_dash_event {
	double t;       // seconds since the job's start
	int kind;       // PTI_DEV_*
	uint32_t total; // the count after it
} pti_dash_event;

// What the dashboard knows of one job beyond its files.
typedef struct pti_dash_jobrt {
	pti_dash_job cfg;
	int state;   // PTI_DASH_*
	int counted; // pti_dash_counts was called: lost, wr, sr hold
	uint32_t lost, worker_restarts, server_restarts;
	pti_dash_event ev[PTI_DASH_EVENTS];
	uint32_t n_ev; // events so far; the last PTI_DASH_EVENTS are kept
} pti_dash_jobrt;

// The view a dashboard serves, and its jobs (a snapshot).
typedef struct pti_dash_view {
	int compare; // several jobs (compare, pstrain dashboard)
	const char *title;
	const pti_dash_jobrt *jobs;
	uint32_t n_jobs;
	double now; // seconds since 1970
} pti_dash_view;

// pti_dash_workers is how many workers job j has: its cfg's count, or
// else the worker-R.csv files in its folder, R from 0 on, now (at most
// PTI_DASH_WORKERS).
uint32_t pti_dash_workers(const pti_dash_jobrt *j);

#endif // PT_CLI_DASH_VIEW_H
