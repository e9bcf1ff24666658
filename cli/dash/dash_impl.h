// cli/dash/dash_impl.h - what the dashboard's files share: dash.c runs the
// HTTP server and keeps what the launcher tells it (job states, counts,
// events); dashjson.c builds /data.json and dashprom.c /metrics from the
// jobs' files; build/web.c (made by scripts/embed.sh from cli/dash/web/) holds
// the page. Requests are served on nng's threads, each from a snapshot of
// the jobs taken under the lock; everything else there reads files.
#ifndef PT_CLI_DASH_DASH_IMPL_H
#define PT_CLI_DASH_DASH_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "cli/dash/dash.h"

// Debian's Chart.js (libjs-chart.js), served at /chart.js; the Makefile
// may name another file.
#ifndef PT_CHARTJS
#define PT_CHARTJS "/usr/share/javascript/chart.js/chart.min.js"
#endif

// One file of the page, compiled in (build/web.c); the table ends with a
// NULL name.
typedef struct pti_web_file {
	const char *name; // "index.html", "dash.js", ...
	const unsigned char *data;
	size_t len;
} pti_web_file;
extern const pti_web_file pti_web_files[];

#define PTI_DASH_EVENTS 64 // launcher events kept per job (the latest)

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

// A growing text buffer for one response; on failure it stays short,
// failed is set and the response is refused.
typedef struct pti_dbuf {
	char *p;
	size_t len, cap;
	int failed;
} pti_dbuf;

void pti_dbuf_printf(pti_dbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// pti_dbuf_str appends s as a JSON string (bytes that are not UTF-8
// become '?'); pti_dbuf_num a number, or null for NaN and infinities.
void pti_dbuf_str(pti_dbuf *b, const char *s);
void pti_dbuf_num(pti_dbuf *b, double v);
// pti_dbuf_secs appends seconds (since 1970, or since a job's start) to
// the millisecond, or null.
void pti_dbuf_secs(pti_dbuf *b, double v);

// The view a dashboard serves, and its jobs (a snapshot).
typedef struct pti_dash_view {
	int compare; // several jobs (compare, pstrain dashboard)
	const char *title;
	const pti_dash_jobrt *jobs;
	uint32_t n_jobs;
	double now; // seconds since 1970
} pti_dash_view;

// pti_dash_json writes /data.json of v into b; query is the request's
// query string after '?' (may be NULL). PT_EINVAL naming what in it is
// malformed (the request gets 400); else 0, b->failed telling whether
// memory ran out.
int pti_dash_json(pti_dbuf *b, const pti_dash_view *v, const char *query);

// pti_dash_prom writes /metrics of v into b (Prometheus's text format).
void pti_dash_prom(pti_dbuf *b, const pti_dash_view *v);

// pti_dash_workers is how many workers job j has: its cfg's count, or
// else the worker-R.csv files in its folder, R from 0 on, now.
uint32_t pti_dash_workers(const pti_dash_jobrt *j);

#endif // PT_CLI_DASH_DASH_IMPL_H
