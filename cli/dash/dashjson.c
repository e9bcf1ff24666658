// cli/dash/dashjson.c - the dashboard's /data.json (dashjson.h), built from
// the jobs' files at each request: per job the rows that each worker-R.csv
// and eval.csv gained since the byte offsets the page gives in ?from=
// (at most DASH_ROWS a file and DASH_BUDGET in all, "more" telling the
// page to ask again at once; with ?points=, a file read from its start
// as an overview, overview.c), the counts of lost and restarted processes
// (the launcher's while it runs the job, else summary.json's), the
// checkpoints written while it ran, and a few summary.json figures once
// the job has one. docs/OUTPUTS.md describes the format.
#include "cli/dash/dashjson.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cli/dash/overview.h"
#include "cli/dash/web.h"
#include "common/err.h"
#include "common/outputs.h"

#define DASH_ROWS 2000     // rows of one file in one response, at most
#define DASH_BUDGET 20000  // rows of every file in one response
#define DASH_CKPTS 200     // checkpoints listed per job (the newest)
#define DASH_DIGITS 18     // of one offset in ?from=

// The worker-R.csv columns sent, in overview.h's PTI_DW_* order
// ("worker_cols").
static const int dash_wcols[PTI_DW_N] = {PTI_WK_STEP, PTI_WK_WALL,
    PTI_WK_LOSS, PTI_WK_GRAD_NORM, PTI_WK_STEP_MS, PTI_WK_COMPUTE_MS,
    PTI_WK_COMM_MS, PTI_WK_STALENESS, PTI_WK_LR, PTI_WK_VERSION};
#define DASH_NW PTI_DW_N

// What the page asked for: byte offsets (from=), for each job the worker
// it draws (draw=, compare view; 0 when absent), and points= (0: every
// row; else a file read from its start comes as an overview).
typedef struct dash_query {
	const char *from, *draw;
	size_t from_n, draw_n;
	size_t points;
} dash_query;

// eval.csv's columns read (both sets' names), and those sent.
static const char *const dash_ecols_in[] = {"step", "wall_s", "val_loss",
    "val_acc", "test_loss", "test_acc", "worker_step", "val_auc",
    "test_auc"};
enum { E_STEP, E_WALL, E_VLOSS, E_VACC, E_TLOSS, E_TACC, E_WSTEP, E_VAUC,
    E_TAUC, E_N };
static const char *const dash_ecols_out[] = {"step", "wall_s", "loss", "acc",
    "worker_step", "auc"};
#define DASH_NE ((int)(sizeof(dash_ecols_out) / sizeof(dash_ecols_out[0])))

// ---------------------------------------------------------------- ?from=

// from_check: the value of from= is byte offsets, '.' between a job's
// files (eval.csv, then worker-0.csv, ...), ',' between jobs.
static int from_check(const char *s, size_t n)
{
	size_t digits = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9') {
			if (++digits > DASH_DIGITS)
				return -1;
		} else if (s[i] == '.' || s[i] == ',') {
			digits = 0;
		} else {
			return -1;
		}
	}
	return 0;
}

// from_offset is the k-th offset of job `job` in s (n bytes), 0 when
// s does not give it.
static long from_offset(const char *s, size_t n, uint32_t job, uint32_t k)
{
	size_t i = 0;
	for (uint32_t g = 0; g < job; g++) {
		while (i < n && s[i] != ',')
			i++;
		if (i++ >= n)
			return 0;
	}
	for (uint32_t f = 0; f < k; f++) {
		while (i < n && s[i] != ',' && s[i] != '.')
			i++;
		if (i >= n || s[i++] != '.')
			return 0;
	}
	long v = 0;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		v = v * 10 + (s[i] - '0'); // at most 18 digits: no overflow
	return v;
}

// query_get finds name= in the query string q; *s and *n are its value
// (NULL, 0 when absent). PT_EINVAL when it is not digits, '.' and ','.
static int query_get(const char *q, const char *name, const char **s,
    size_t *n)
{
	size_t name_n = strlen(name);
	*s = NULL;
	*n = 0;
	while (q != NULL && *q != '\0') {
		size_t len = strcspn(q, "&");
		if (len > name_n && strncmp(q, name, name_n) == 0 &&
		    q[name_n] == '=') {
			if (from_check(q + name_n + 1, len - name_n - 1) != 0)
				return pti_err_set(PT_EINVAL, "%s: expected "
				    "numbers, '.' between a job's files and "
				    "',' between jobs (0.120.130,0.0.0)",
				    name);
			*s = q + name_n + 1;
			*n = len - name_n - 1;
		}
		q += len;
		if (*q == '&')
			q++;
	}
	return 0;
}

// ---------------------------------------------------------------- CSV rows

// part_read reads the complete rows of the CSV at path from byte offset
// from (when that is where a row starts, else from the first row), at
// most max_rows, into t (the caller frees t->v), with where they begin
// and end in *at. A missing file has no rows and offsets 0. -1 when out
// of memory.
static int part_read(const char *path, long from, const char *const *want,
    int n_want, size_t max_rows, pti_csv_at *at, pti_csv *t)
{
	*at = (pti_csv_at){.from = from, .row_start = 1, .max_rows = max_rows};
	return pti_csv_read_at(path, want, n_want, at, t);
}

// part_json writes the rows t read at at as {"from", "next", "more",
// "rows"}, each row the columns cols[0..n) of t's.
static void part_json(pti_dbuf *b, const pti_csv_at *at, const pti_csv *t,
    const int *cols, int n)
{
	pti_dbuf_printf(b, "{\"from\": %ld, \"next\": %ld, \"more\": %s, "
	    "\"rows\": [", at->start, at->next, at->more ? "true" : "false");
	for (size_t i = 0; i < t->n_rows && !b->failed; i++) {
		const double *row = t->v + i * t->n_cols;
		pti_dbuf_printf(b, "%s[", i ? ",\n" : "");
		for (int k = 0; k < n; k++) {
			if (k)
				pti_dbuf_printf(b, ",");
			pti_dbuf_num(b, row[cols[k]]);
		}
		pti_dbuf_printf(b, "]");
	}
	pti_dbuf_printf(b, "]}");
}

// ---------------------------------------------------------------- a job

// What a job's summary.json adds to what the dashboard was told.
typedef struct dash_info {
	json_t *sum; // summary.json, or NULL
	char mode[32];
	char ckpt_dir[PT_PATH_MAX];
	double steps, batch, t0, end; // NaN unknown; end: its last second
} dash_info;

static double info_start(const json_t *sum)
{
	const json_t *rec = json_object_get(sum, "record");
	const char *s = json_string_value(json_object_get(rec, "start_time"));
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) == NULL)
		return NAN;
	return (double)timegm(&tm);
}

static void info_read(const pti_dash_jobrt *j, double now, dash_info *in)
{
	char path[PT_PATH_MAX + 160];
	memset(in, 0, sizeof(*in));
	snprintf(path, sizeof(path), "%s/summary.json", j->cfg.dir);
	in->sum = json_load_file(path, 0, NULL); // NULL when not there yet
	const json_t *cfg = json_object_get(in->sum, "config");
	const char *s = json_string_value(json_object_get(in->sum, "mode"));
	snprintf(in->mode, sizeof(in->mode), "%s", j->cfg.mode[0] ? j->cfg.mode
	    : s != NULL ? s : "");
	s = json_string_value(json_object_get(cfg, "checkpoint-dir"));
	snprintf(in->ckpt_dir, sizeof(in->ckpt_dir), "%s", j->cfg.ckpt_dir[0]
	    ? j->cfg.ckpt_dir : s != NULL ? s : "");
	const json_t *v = json_object_get(in->sum, "steps");
	in->steps = j->cfg.steps > 0 ? (double)j->cfg.steps
		    : json_is_number(v) ? json_number_value(v) : NAN;
	v = json_object_get(in->sum, "batch");
	in->batch = j->cfg.batch > 0 ? (double)j->cfg.batch
		    : json_is_number(v) ? json_number_value(v) : NAN;
	in->t0 = j->cfg.t0 > 0 ? j->cfg.t0 : info_start(in->sum);
	v = json_object_get(in->sum, "wall_s");
	in->end = j->state == PTI_DASH_RUNNING || !json_is_number(v) ||
		  isnan(in->t0) ? now : in->t0 + json_number_value(v);
}

static const char *state_name(const pti_dash_jobrt *j, const dash_info *in)
{
	switch (j->state) {
	case PTI_DASH_PENDING: return "pending";
	case PTI_DASH_RUNNING: return "running";
	case PTI_DASH_DONE: return "finished";
	case PTI_DASH_FAILED: return "failed";
	default: return in->sum != NULL ? "finished" : "unfinished";
	}
}

// job_counts: lost and restarted processes, from the launcher while it
// runs the job, else from summary.json; "none" when neither knows yet.
static void job_counts(pti_dbuf *b, const pti_dash_jobrt *j,
    const dash_info *in)
{
	static const char *const keys[] = {"workers_lost", "worker_restarts",
	    "server_restarts"};
	const uint32_t mine[] = {j->lost, j->worker_restarts,
	    j->server_restarts};
	const char *src = j->counted ? "launcher"
			  : in->sum  ? "summary"
				     : "none";
	pti_dbuf_printf(b, "{\"source\": \"%s\"", src);
	for (int k = 0; k < 3; k++) {
		pti_dbuf_printf(b, ", \"%s\": ", keys[k]);
		if (j->counted)
			pti_dbuf_printf(b, "%u", mine[k]);
		else
			pti_dbuf_num(b, json_number_value(
			    json_object_get(in->sum, keys[k])));
	}
	pti_dbuf_printf(b, "}");
}

static void job_events(pti_dbuf *b, const pti_dash_jobrt *j)
{
	static const char *const what[] = {"worker lost", "worker restarted",
	    "server restarted"};
	uint32_t n = j->n_ev < PTI_DASH_EVENTS ? j->n_ev : PTI_DASH_EVENTS;
	pti_dbuf_printf(b, "[");
	for (uint32_t i = 0; i < n; i++) {
		const pti_dash_event *e =
		    &j->ev[(j->n_ev - n + i) % PTI_DASH_EVENTS];
		pti_dbuf_printf(b, "%s{\"t\": ", i ? ", " : "");
		pti_dbuf_secs(b, e->t);
		pti_dbuf_printf(b, ", \"what\": \"%s\", \"total\": %u}",
		    what[e->kind], e->total);
	}
	pti_dbuf_printf(b, "]");
}

typedef struct dash_ckpt {
	unsigned server;
	long long version;
	double mtime;
} dash_ckpt;

static int ckpt_cmp(const void *a, const void *b)
{
	double x = ((const dash_ckpt *)a)->mtime;
	double y = ((const dash_ckpt *)b)->mtime;
	return x < y ? -1 : x > y;
}

// job_checkpoints lists the checkpoints (server-R-vV.ckpt) of the job's
// checkpoint folder written while it ran, the newest DASH_CKPTS.
static void job_checkpoints(pti_dbuf *b, const dash_info *in)
{
	dash_ckpt *c = NULL;
	size_t n = 0, room = 0;
	DIR *d = in->ckpt_dir[0] ? opendir(in->ckpt_dir) : NULL;
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
		unsigned server;
		long long version;
		int used = 0;
		char path[PT_PATH_MAX + 300];
		struct stat sb;
		if (sscanf(e->d_name, "server-%u-v%lld.ckpt%n", &server,
			&version, &used) != 2 || e->d_name[used] != '\0')
			continue;
		snprintf(path, sizeof(path), "%s/%s", in->ckpt_dir, e->d_name);
		if (stat(path, &sb) != 0)
			continue;
		double mt =
		    (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec / 1e9;
		// One second each side: summary.json's start is whole seconds.
		if (!isnan(in->t0) && (mt < in->t0 - 1 || mt > in->end + 1))
			continue;
		if (n == room) {
			room = room ? 2 * room : 32;
			dash_ckpt *q = realloc(c, room * sizeof(*c));
			if (q == NULL) {
				b->failed = 1;
				break;
			}
			c = q;
		}
		c[n++] = (dash_ckpt){server, version, mt};
	}
	if (d != NULL)
		closedir(d);
	if (n > 0)
		qsort(c, n, sizeof(*c), ckpt_cmp);
	size_t first = n > DASH_CKPTS ? n - DASH_CKPTS : 0;
	pti_dbuf_printf(b, "[");
	for (size_t i = first; i < n; i++) {
		pti_dbuf_printf(b, "%s{\"server\": %u, \"version\": %lld, "
		    "\"t\": ", i > first ? ", " : "", c[i].server,
		    c[i].version);
		pti_dbuf_secs(b, c[i].mtime - in->t0);
		pti_dbuf_printf(b, "}");
	}
	pti_dbuf_printf(b, "]");
	free(c);
}

// job_summary: the summary.json figures the page shows, or null.
static void job_summary(pti_dbuf *b, const dash_info *in)
{
	// The figures, then the configuration the page's table shows.
	static const char *const nums[] = {"steps", "wall_s",
	    "dropped_gradients", "idle_fraction", "mean_staleness",
	    "max_staleness_seen", "final_test_acc", "final_val_acc",
	    "best_val_acc", "workers_lost", "worker_restarts",
	    "server_restarts", "checkpoint_failures", "lr", "batch", "seed",
	    "servers", "workers", "epochs"};
	static const char *const texts[] = {"optimizer", "model", "data"};
	if (in->sum == NULL) {
		pti_dbuf_printf(b, "null");
		return;
	}
	const char *o = json_string_value(json_object_get(in->sum, "outcome"));
	pti_dbuf_printf(b, "{\"outcome\": ");
	if (o != NULL)
		pti_dbuf_str(b, o);
	else
		pti_dbuf_printf(b, "null");
	for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
		const json_t *v = json_object_get(in->sum, nums[k]);
		pti_dbuf_printf(b, ", \"%s\": ", nums[k]);
		pti_dbuf_num(b, json_is_number(v) ? json_number_value(v) : NAN);
	}
	for (size_t k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
		const char *t = json_string_value(json_object_get(in->sum,
		    texts[k]));
		pti_dbuf_printf(b, ", \"%s\": ", texts[k]);
		if (t != NULL)
			pti_dbuf_str(b, t);
		else
			pti_dbuf_printf(b, "null");
	}
	// Where it ran: emulated hosts' placement, link rate (bits/s) and
	// delay (s), and each process's host.
	const char *place = json_string_value(json_object_get(in->sum,
	    "placement"));
	const json_t *link = json_object_get(in->sum, "link");
	const json_t *rate = json_object_get(link, "rate_bits_per_s");
	const json_t *delay = json_object_get(link, "delay_s");
	const json_t *hosts = json_object_get(in->sum, "hosts");
	pti_dbuf_printf(b, ", \"placement\": ");
	if (place != NULL)
		pti_dbuf_str(b, place);
	else
		pti_dbuf_printf(b, "null");
	pti_dbuf_printf(b, ", \"link_bits_per_s\": ");
	pti_dbuf_num(b, json_is_number(rate) ? json_number_value(rate) : NAN);
	pti_dbuf_printf(b, ", \"link_delay_s\": ");
	pti_dbuf_num(b, json_is_number(delay) ? json_number_value(delay) : NAN);
	pti_dbuf_printf(b, ", \"hosts\": ");
	if (json_is_object(hosts)) {
		const char *key, *sep = "";
		const json_t *addr;
		pti_dbuf_printf(b, "{");
		json_object_foreach((json_t *)hosts, key, addr) {
			if (!json_is_string(addr))
				continue;
			pti_dbuf_printf(b, "%s", sep);
			pti_dbuf_str(b, key);
			pti_dbuf_printf(b, ": ");
			pti_dbuf_str(b, json_string_value(addr));
			sep = ", ";
		}
		pti_dbuf_printf(b, "}");
	} else {
		pti_dbuf_printf(b, "null");
	}
	pti_dbuf_printf(b, "}");
}

// worker_json writes worker r of job i: an overview (overview.h) when
// the page reads its file from the start and asked for points, else the
// rows since its offset. -1 when out of memory.
static int worker_json(pti_dbuf *b, const pti_dash_view *v, uint32_t i,
    uint32_t r, const dash_query *qy, size_t *budget)
{
	static const int wcols[DASH_NW] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	const char *wnames[DASH_NW];
	char path[PT_PATH_MAX + 160];
	long from = from_offset(qy->from, qy->from_n, i, r + 1);
	int whole = qy->points > 0 && from == 0;
	size_t max = whole ? SIZE_MAX : *budget < DASH_ROWS ? *budget
							    : DASH_ROWS;
	pti_csv_at at;
	pti_csv p;
	for (int k = 0; k < DASH_NW; k++)
		wnames[k] = PTI_COL(pti_csv_worker, dash_wcols[k]);
	snprintf(path, sizeof(path), "%s/worker-%u.csv", v->jobs[i].cfg.dir,
	    r);
	if (part_read(path, from, wnames, DASH_NW, max, &at, &p) != 0)
		return -1;
	if (whole) {
		int drawn = !v->compare ||
			    r == (uint32_t)from_offset(qy->draw, qy->draw_n,
				     i, 0);
		// Its rows are bounded by points: not counted in *budget.
		pti_dash_overview(b, &at, &p, qy->points, drawn);
	} else {
		part_json(b, &at, &p, wcols, DASH_NW);
		*budget -= p.n_rows;
	}
	free(p.v);
	return 0;
}

// job_json writes job i; *budget is the rows the response may still
// carry. -1 when out of memory.
static int job_json(pti_dbuf *b, const pti_dash_view *v, uint32_t i,
    const dash_query *qy, size_t *budget)
{
	const pti_dash_jobrt *j = &v->jobs[i];
	char path[PT_PATH_MAX + 160];
	dash_info in;
	pti_csv_at at;
	pti_csv p;
	int rv = 0;
	info_read(j, v->now, &in);
	uint32_t workers = pti_dash_workers(j);
	if (workers == 0 && in.sum != NULL) {
		const json_t *w = json_object_get(in.sum, "workers");
		double nw = json_is_number(w) ? json_number_value(w) : 0;
		workers = nw >= 1 && nw <= PTI_DASH_WORKERS ? (uint32_t)nw : 0;
	}
	pti_dbuf_printf(b, "%s{\"label\": ", i ? ",\n" : "");
	pti_dbuf_str(b, j->cfg.label);
	pti_dbuf_printf(b, ", \"dir\": ");
	pti_dbuf_str(b, j->cfg.dir);
	pti_dbuf_printf(b, ", \"mode\": ");
	pti_dbuf_str(b, in.mode);
	pti_dbuf_printf(b, ", \"state\": \"%s\", \"workers\": %u, \"steps\": ",
	    state_name(j, &in), workers);
	pti_dbuf_num(b, in.steps);
	pti_dbuf_printf(b, ", \"batch\": ");
	pti_dbuf_num(b, in.batch);
	pti_dbuf_printf(b, ", \"t0\": ");
	pti_dbuf_secs(b, in.t0);
	pti_dbuf_printf(b, ",\n \"worker\": [");
	for (uint32_t r = 0; r < workers && rv == 0; r++) {
		pti_dbuf_printf(b, "%s\n  ", r ? "," : "");
		rv = worker_json(b, v, i, r, qy, budget);
	}
	if (rv == 0) {
		size_t max = *budget < DASH_ROWS ? *budget : DASH_ROWS;
		snprintf(path, sizeof(path), "%s/eval.csv", j->cfg.dir);
		rv = part_read(path, from_offset(qy->from, qy->from_n, i, 0),
		    dash_ecols_in, E_N, max, &at, &p);
	}
	if (rv == 0) {
		int val = p.have[E_VACC] || !p.have[E_TACC];
		int ecols[DASH_NE] = {E_STEP, E_WALL, val ? E_VLOSS : E_TLOSS,
		    val ? E_VACC : E_TACC, E_WSTEP, val ? E_VAUC : E_TAUC};
		*budget -= p.n_rows;
		pti_dbuf_printf(b, "],\n \"eval_set\": %s, \"eval\": ",
		    p.have[E_VACC] ? "\"validation\"" : p.have[E_TACC]
		    ? "\"test\"" : "null");
		part_json(b, &at, &p, ecols, DASH_NE);
		free(p.v);
		pti_dbuf_printf(b, ",\n \"counts\": ");
		job_counts(b, j, &in);
		pti_dbuf_printf(b, ", \"events\": ");
		job_events(b, j);
		pti_dbuf_printf(b, ",\n \"checkpoint_dir\": ");
		if (in.ckpt_dir[0])
			pti_dbuf_str(b, in.ckpt_dir);
		else
			pti_dbuf_printf(b, "null");
		pti_dbuf_printf(b, ", \"checkpoints\": ");
		job_checkpoints(b, &in);
		pti_dbuf_printf(b, ",\n \"summary\": ");
		job_summary(b, &in);
		pti_dbuf_printf(b, "}");
	}
	json_decref(in.sum);
	return rv;
}

int pti_dash_json(pti_dbuf *b, const pti_dash_view *v, const char *query)
{
	dash_query qy = {0};
	const char *pts;
	size_t pts_n, budget = DASH_BUDGET;
	int rv;
	if ((rv = query_get(query, "from", &qy.from, &qy.from_n)) != 0 ||
	    (rv = query_get(query, "draw", &qy.draw, &qy.draw_n)) != 0 ||
	    (rv = query_get(query, "points", &pts, &pts_n)) != 0)
		return rv;
	if (pts != NULL) {
		qy.points = (size_t)from_offset(pts, pts_n, 0, 0);
		if (qy.points < 2 || qy.points > PTI_DASH_POINTS_MAX)
			return pti_err_set(PT_EINVAL, "points: expected 2 to "
			    "%d (the points of a line drawn from a file read "
			    "from its start)", PTI_DASH_POINTS_MAX);
	}
	pti_dbuf_printf(b, "{\"view\": \"%s\", \"title\": ",
	    v->compare ? "compare" : "run");
	pti_dbuf_str(b, v->title);
	pti_dbuf_printf(b, ", \"now\": ");
	pti_dbuf_secs(b, v->now);
	pti_dbuf_printf(b, ",\n\"chartjs\": ");
	pti_dbuf_str(b, PT_CHARTJS);
	pti_dbuf_printf(b, ",\n\"worker_cols\": [");
	for (int k = 0; k < DASH_NW; k++)
		pti_dbuf_printf(b, "%s\"%s\"", k ? ", " : "",
		    PTI_COL(pti_csv_worker, dash_wcols[k]));
	pti_dbuf_printf(b, "],\n\"eval_cols\": [");
	for (int k = 0; k < DASH_NE; k++)
		pti_dbuf_printf(b, "%s\"%s\"", k ? ", " : "",
		    dash_ecols_out[k]);
	pti_dbuf_printf(b, "],\n\"jobs\": [\n");
	for (uint32_t i = 0; i < v->n_jobs && !b->failed; i++)
		if (job_json(b, v, i, &qy, &budget) != 0)
			b->failed = 1;
	pti_dbuf_printf(b, "]}\n");
	return 0;
}
