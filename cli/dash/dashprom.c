// cli/dash/dashprom.c - the dashboard's /metrics (dashprom.h): Prometheus's
// text format, read from the jobs' files at each request. Per worker: its
// steps, the last row's global step, loss, gradient norm, step, compute
// and communication times, staleness and lr, and the sums of its step,
// compute and communication seconds; the last evaluation; lost and
// restarted processes (the launcher's counts, or summary.json's). With
// several jobs (compare, pstrain dashboard) every sample also has a
// job="LABEL" label.
#include "cli/dash/dashprom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jsonio.h"
#include "common/outputs.h"

// dash_metric writes one sample; a NaN value (no row yet, a column the
// file lacks) is left out, as Prometheus expects of a missing series.
static void dash_metric(pti_dbuf *b, const char *name, const char *labels,
    double v)
{
	if (!isnan(v))
		pti_dbuf_printf(b, "%s%s %.9g\n", name, labels, v);
}

static void dash_help(pti_dbuf *b, const char *name, const char *type,
    const char *help)
{
	pti_dbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

// dash_labels writes {job="LABEL",worker="R"} into out (size n): job
// only in a view of several jobs, worker only when worker >= 0.
static void dash_labels(char *out, size_t n, const pti_dash_view *v,
    const pti_dash_jobrt *j, long worker)
{
	size_t used = 0;
	out[0] = '\0';
	if (!v->compare && worker < 0)
		return;
	used += (size_t)snprintf(out, n, "{");
	if (v->compare) {
		used += (size_t)snprintf(out + used, n - used, "job=\"");
		// The text format escapes \, " and newlines in label values.
		for (const char *p = j->cfg.label; *p && used + 8 < n; p++)
			used += (size_t)snprintf(out + used, n - used, "%s",
			    *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p ==
			    '\n' ? "\\n" : (char[]){*p, '\0'});
		used += (size_t)snprintf(out + used, n - used, "\"%s",
		    worker >= 0 ? "," : "");
	}
	if (worker >= 0 && used < n)
		used += (size_t)snprintf(out + used, n - used,
		    "worker=\"%ld\"", worker);
	if (used < n)
		snprintf(out + used, n - used, "}");
}

// Per worker, from worker-R.csv: the last row's values, and the sums of
// its step, compute and communication times (counters).
static const char *const dash_worker_cols[] = {"step", "loss", "grad_norm",
    "step_ms", "compute_ms", "comm_ms", "staleness", "lr"};
enum { W_STEP, W_LOSS, W_GNORM, W_STEP_MS, W_COMP_MS, W_COMM_MS, W_STALE,
    W_LR, W_N };

static const struct {
	const char *name, *type, *help;
	int col; // last row's column, -1 the row count, -2..-4 sums below
} dash_worker_metrics[] = {
    {"pstrain_worker_steps_total", "counter", "steps this worker computed",
	-1},
    {"pstrain_worker_step", "gauge", "the global step of its last row",
	W_STEP},
    {"pstrain_worker_loss", "gauge", "training loss of its last step",
	W_LOSS},
    {"pstrain_worker_grad_norm", "gauge", "gradient norm of its last step",
	W_GNORM},
    {"pstrain_worker_step_ms", "gauge", "its last step's time, ms",
	W_STEP_MS},
    {"pstrain_worker_compute_ms", "gauge",
	"computing in its last step, ms", W_COMP_MS},
    {"pstrain_worker_comm_ms", "gauge",
	"push and pull (waiting included) in its last step, ms", W_COMM_MS},
    {"pstrain_worker_staleness", "gauge",
	"staleness of its last gradient", W_STALE},
    {"pstrain_worker_lr", "gauge", "learning rate of its last step", W_LR},
    {"pstrain_worker_step_seconds_total", "counter",
	"time in steps, all rows", -2},
    {"pstrain_worker_compute_seconds_total", "counter",
	"time computing, all rows (its share of the step time is the "
	"utilization)", -3},
    {"pstrain_worker_comm_seconds_total", "counter",
	"time in push and pull, all rows", -4},
};
#define N_WM (sizeof(dash_worker_metrics) / sizeof(dash_worker_metrics[0]))

// One job's worker files, read.
typedef struct prom_job {
	uint32_t workers;
	pti_csv *t; // [workers]
} prom_job;

static double worker_value(const pti_csv *c, int col)
{
	if (col == -1)
		return (double)c->n_rows;
	if (col >= 0)
		return c->n_rows > 0 ? c->v[(c->n_rows - 1) * W_N + col] : NAN;
	int k = col == -2 ? W_STEP_MS : col == -3 ? W_COMP_MS : W_COMM_MS;
	double sum = 0;
	for (size_t i = 0; i < c->n_rows; i++)
		if (!isnan(c->v[i * W_N + k]))
			sum += c->v[i * W_N + k];
	return sum / 1000.0;
}

static void dash_workers(pti_dbuf *b, const pti_dash_view *v)
{
	prom_job *pj = calloc(v->n_jobs, sizeof(*pj));
	char path[PT_PATH_MAX + 160], lab[1024];
	if (pj == NULL) {
		b->failed = 1;
		return;
	}
	for (uint32_t i = 0; i < v->n_jobs && !b->failed; i++) {
		const pti_dash_jobrt *j = &v->jobs[i];
		pj[i].workers = pti_dash_workers(j);
		pj[i].t = calloc(pj[i].workers ? pj[i].workers : 1,
		    sizeof(pti_csv));
		if (pj[i].t == NULL) {
			b->failed = 1;
			break;
		}
		for (uint32_t r = 0; r < pj[i].workers; r++) {
			snprintf(path, sizeof(path), "%s/worker-%u.csv",
			    j->cfg.dir, r);
			if (pti_csv_read(path, 0, dash_worker_cols, W_N,
				&pj[i].t[r]) != 0)
				b->failed = 1;
		}
	}
	for (size_t m = 0; m < N_WM && !b->failed; m++) {
		dash_help(b, dash_worker_metrics[m].name,
		    dash_worker_metrics[m].type, dash_worker_metrics[m].help);
		for (uint32_t i = 0; i < v->n_jobs; i++)
			for (uint32_t r = 0; r < pj[i].workers; r++) {
				dash_labels(lab, sizeof(lab), v, &v->jobs[i],
				    r);
				dash_metric(b, dash_worker_metrics[m].name, lab,
				    worker_value(&pj[i].t[r],
					dash_worker_metrics[m].col));
			}
	}
	for (uint32_t i = 0; i < v->n_jobs; i++) {
		for (uint32_t r = 0; pj[i].t != NULL && r < pj[i].workers; r++)
			free(pj[i].t[r].v);
		free(pj[i].t);
	}
	free(pj);
}

// The last evaluation, from eval.csv (validation columns, or test ones
// in a job without a validation split).
static void dash_eval(pti_dbuf *b, const pti_dash_view *v)
{
	static const char *const want[] = {"step", "val_loss", "val_acc",
	    "test_loss", "test_acc"};
	static const char *const names[] = {"pstrain_evals_total",
	    "pstrain_eval_step", "pstrain_eval_loss", "pstrain_eval_accuracy"};
	static const char *const types[] = {"counter", "gauge", "gauge",
	    "gauge"};
	static const char *const helps[] = {"evaluations so far",
	    "the parameters' version at the last evaluation",
	    ("loss at the last evaluation (validation set, or test set "
		"without one)"),
	    "accuracy at the last evaluation"};
	char path[PT_PATH_MAX + 160], lab[1024];
	pti_csv *t = calloc(v->n_jobs, sizeof(*t));
	if (t == NULL) {
		b->failed = 1;
		return;
	}
	for (uint32_t i = 0; i < v->n_jobs; i++) {
		snprintf(path, sizeof(path), "%s/eval.csv", v->jobs[i].cfg.dir);
		if (pti_csv_read(path, 0, want, 5, &t[i]) != 0)
			b->failed = 1;
	}
	for (int m = 0; m < 4 && !b->failed; m++) {
		dash_help(b, names[m], types[m], helps[m]);
		for (uint32_t i = 0; i < v->n_jobs; i++) {
			const double *last = t[i].n_rows ? t[i].v +
			    (t[i].n_rows - 1) * 5 : NULL;
			int val = t[i].have[2];
			double x = NAN;
			if (m == 0)
				x = (double)t[i].n_rows;
			else if (last != NULL)
				x = m == 1   ? last[0]
				    : m == 2 ? last[val ? 1 : 3]
					     : last[val ? 2 : 4];
			dash_labels(lab, sizeof(lab), v, &v->jobs[i], -1);
			// Loss and accuracy name their set.
			if (m >= 2) {
				size_t n = strlen(lab);
				const char *set = val ? "validation" : "test";
				if (n == 0)
					snprintf(lab, sizeof(lab),
					    "{set=\"%s\"}", set);
				else if (n + 20 < sizeof(lab))
					snprintf(lab + n - 1,
					    sizeof(lab) - n + 1,
					    ",set=\"%s\"}", set);
			}
			dash_metric(b, names[m], lab, x);
		}
	}
	for (uint32_t i = 0; i < v->n_jobs; i++)
		free(t[i].v);
	free(t);
}

// Lost and restarted processes: the launcher's counts, or summary.json's.
static void dash_counts(pti_dbuf *b, const pti_dash_view *v)
{
	static const char *const names[] = {"pstrain_workers_lost",
	    "pstrain_worker_restarts_total", "pstrain_server_restarts_total"};
	static const char *const keys[] = {"workers_lost", "worker_restarts",
	    "server_restarts"};
	static const char *const types[] = {"gauge", "counter", "counter"};
	static const char *const helps[] = {"workers the job went on without",
	    "workers the launcher restarted", "servers the launcher restarted"};
	char path[PT_PATH_MAX + 160], lab[1024];
	for (int m = 0; m < 3; m++) {
		dash_help(b, names[m], types[m], helps[m]);
		for (uint32_t i = 0; i < v->n_jobs; i++) {
			const pti_dash_jobrt *j = &v->jobs[i];
			double x = NAN;
			if (j->counted) {
				x = m == 0 ? j->lost : m == 1 ?
				    j->worker_restarts : j->server_restarts;
			} else {
				snprintf(path, sizeof(path), "%s/summary.json",
				    j->cfg.dir);
				json_t *s = json_load_file(path, 0, NULL);
				const json_t *n = json_object_get(s, keys[m]);
				if (json_is_number(n))
					x = json_number_value(n);
				json_decref(s);
			}
			dash_labels(lab, sizeof(lab), v, j, -1);
			dash_metric(b, names[m], lab, x);
		}
	}
}

// Embedding tables: each server's rows of each table, as its
// server-S-tables.json says (written every 2 s while it runs).
static void dash_tables(pti_dbuf *b, const pti_dash_view *v)
{
	static const char *const names[] = {"pstrain_table_rows",
	    "pstrain_table_evictions_total",
	    "pstrain_table_admission_refusals_total",
	    "pstrain_table_rows_pushed_total", "pstrain_table_rows_pulled_total"};
	static const char *const keys[] = {"rows", "evictions",
	    "admission_refusals", "rows_pushed", "rows_pulled"};
	static const char *const types[] = {"gauge", "counter", "counter",
	    "counter", "counter"};
	static const char *const helps[] = {"rows a server holds of a table",
	    "rows evicted to make room (--table-capacity)",
	    "pushes of ids not admitted yet (--table-admit)",
	    "rows pushed to a server", "rows pulled from a server"};
	char path[PT_PATH_MAX + 160], lab[1024], all[1200];
	for (int m = 0; m < 5; m++) {
		int helped = 0;
		for (uint32_t i = 0; i < v->n_jobs; i++) {
			const pti_dash_jobrt *j = &v->jobs[i];
			dash_labels(lab, sizeof(lab), v, j, -1);
			// The job's label (if any) without its closing brace.
			size_t n = strlen(lab);
			if (n > 0)
				lab[n - 1] = '\0';
			for (uint32_t s = 0; s < 256; s++) {
				snprintf(path, sizeof(path),
				    "%s/server-%u-tables.json", j->cfg.dir, s);
				json_t *o = json_load_file(path, 0, NULL);
				if (o == NULL)
					break;
				const json_t *tb = json_object_get(o, "tables");
				for (size_t k = 0; k < json_array_size(tb); k++) {
					const json_t *t = json_array_get(tb, k);
					const char *name = json_string_value(
					    json_object_get(t, "name"));
					snprintf(all, sizeof(all),
					    "%s%sserver=\"%u\",table=\"%s\"}",
					    n > 0 ? lab : "{", n > 0 ? "," : "",
					    s, name != NULL ? name : "");
					if (!helped++)
						dash_help(b, names[m], types[m],
						    helps[m]);
					dash_metric(b, names[m], all,
					    pti_json_num(t, keys[m]));
				}
				json_decref(o);
			}
		}
	}
}

void pti_dash_prom(pti_dbuf *b, const pti_dash_view *v)
{
	dash_workers(b, v);
	dash_eval(b, v);
	dash_counts(b, v);
	dash_tables(b, v);
}
