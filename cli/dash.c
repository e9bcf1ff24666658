// cli/dash.c - the launcher's HTTP view of a running job (dash.h).
#include "dash.h"

#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "config.h"
#include "err.h"
#include "outputs.h"

struct pti_dash {
	nng_http_server *srv;
	nng_url *url;
	char dir[PT_PATH_MAX];
	uint32_t workers;
	pthread_mutex_t mu; // guards the counts
	uint32_t lost, worker_restarts, server_restarts;
};

// A growing text buffer for one response; on failure it stays short and
// the response is refused.
typedef struct dash_buf {
	char *p;
	size_t len, cap;
	int failed;
} dash_buf;

static void dash_printf(dash_buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL,
		    b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if (b->p != NULL && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		char *q = realloc(b->p, cap);
		if (q == NULL) {
			b->failed = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
}

// dash_metric writes one sample; a NaN value (no row yet, a column the
// file lacks) is left out, as Prometheus expects of a missing series.
static void dash_metric(dash_buf *b, const char *name, const char *labels,
    double v)
{
	if (!isnan(v))
		dash_printf(b, "%s%s %.9g\n", name, labels, v);
}

static void dash_help(dash_buf *b, const char *name, const char *type,
    const char *help)
{
	dash_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

// Per worker, from worker-R.csv: the last row's values, and the sums of
// its step, compute and communication times (counters).
static const char *const dash_worker_cols[] = {"step", "loss", "grad_norm",
    "step_ms", "compute_ms", "comm_ms", "staleness", "lr"};
enum { W_STEP, W_LOSS, W_GNORM, W_STEP_MS, W_COMP_MS, W_COMM_MS, W_STALE,
    W_LR, W_N };

static const struct {
	const char *name, *type, *help;
	int col; // last row's column, or -1 for a counter below
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

static void dash_workers(dash_buf *b, const pti_dash *d)
{
	pti_csv *t = calloc(d->workers, sizeof(*t));
	if (t == NULL) {
		b->failed = 1;
		return;
	}
	char path[PT_PATH_MAX + 32];
	for (uint32_t r = 0; r < d->workers; r++) {
		snprintf(path, sizeof(path), "%s/worker-%u.csv", d->dir, r);
		if (pti_csv_read(path, 0, dash_worker_cols, W_N, &t[r]) != 0)
			b->failed = 1;
	}
	for (size_t m = 0; m < N_WM && !b->failed; m++) {
		dash_help(b, dash_worker_metrics[m].name,
		    dash_worker_metrics[m].type, dash_worker_metrics[m].help);
		for (uint32_t r = 0; r < d->workers; r++) {
			char lab[32];
			const pti_csv *c = &t[r];
			int col = dash_worker_metrics[m].col;
			double v = NAN, sum = 0;
			snprintf(lab, sizeof(lab), "{worker=\"%u\"}", r);
			if (col == -1)
				v = (double)c->n_rows;
			else if (col >= 0 && c->n_rows > 0)
				v = c->v[(c->n_rows - 1) * W_N + col];
			else if (col < -1) {
				int k = col == -2 ? W_STEP_MS : col == -3
				    ? W_COMP_MS : W_COMM_MS;
				for (size_t i = 0; i < c->n_rows; i++)
					if (!isnan(c->v[i * W_N + k]))
						sum += c->v[i * W_N + k];
				v = sum / 1000.0;
			}
			dash_metric(b, dash_worker_metrics[m].name, lab, v);
		}
	}
	for (uint32_t r = 0; r < d->workers; r++)
		free(t[r].v);
	free(t);
}

// The last evaluation, from eval.csv (validation columns, or test ones
// in a job without a validation split).
static void dash_eval(dash_buf *b, const pti_dash *d)
{
	static const char *const want[] = {"step", "val_loss", "val_acc",
	    "test_loss", "test_acc"};
	char path[PT_PATH_MAX + 32];
	pti_csv t;
	snprintf(path, sizeof(path), "%s/eval.csv", d->dir);
	if (pti_csv_read(path, 0, want, 5, &t) != 0) {
		b->failed = 1;
		return;
	}
	const double *last = t.n_rows ? t.v + (t.n_rows - 1) * 5 : NULL;
	int val = t.have[1];
	const char *set = val ? "{set=\"validation\"}" : "{set=\"test\"}";
	dash_help(b, "pstrain_evals_total", "counter", "evaluations so far");
	dash_metric(b, "pstrain_evals_total", "", (double)t.n_rows);
	dash_help(b, "pstrain_eval_step", "gauge",
	    "the parameters' version at the last evaluation");
	dash_metric(b, "pstrain_eval_step", "", last ? last[0] : NAN);
	dash_help(b, "pstrain_eval_loss", "gauge", "loss at the last "
	    "evaluation (validation set, or test set without one)");
	dash_metric(b, "pstrain_eval_loss", set,
	    last ? last[val ? 1 : 3] : NAN);
	dash_help(b, "pstrain_eval_accuracy", "gauge",
	    "accuracy at the last evaluation");
	dash_metric(b, "pstrain_eval_accuracy", set,
	    last ? last[val ? 2 : 4] : NAN);
	free(t.v);
}

static void dash_reply(nng_aio *aio, const char *type, const char *body,
    size_t len, uint16_t status)
{
	nng_http_res *res;
	if (nng_http_res_alloc(&res) != 0) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	if (nng_http_res_set_status(res, status) != 0 ||
	    nng_http_res_set_header(res, "Content-Type", type) != 0 ||
	    nng_http_res_copy_data(res, body, len) != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void dash_metrics_cb(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	pti_dash *d = nng_http_handler_get_data(h);
	dash_buf b = {0};
	uint32_t lost, wr, sr;
	pthread_mutex_lock(&d->mu);
	lost = d->lost;
	wr = d->worker_restarts;
	sr = d->server_restarts;
	pthread_mutex_unlock(&d->mu);
	dash_workers(&b, d);
	dash_eval(&b, d);
	dash_help(&b, "pstrain_workers_lost", "gauge",
	    "workers the job went on without");
	dash_metric(&b, "pstrain_workers_lost", "", lost);
	dash_help(&b, "pstrain_worker_restarts_total", "counter",
	    "workers the launcher restarted");
	dash_metric(&b, "pstrain_worker_restarts_total", "", wr);
	dash_help(&b, "pstrain_server_restarts_total", "counter",
	    "servers the launcher restarted");
	dash_metric(&b, "pstrain_server_restarts_total", "", sr);
	if (b.failed) {
		static const char oom[] = "out of memory\n";
		dash_reply(aio, "text/plain", oom, sizeof(oom) - 1,
		    NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR);
	} else {
		dash_reply(aio, "text/plain; version=0.0.4; charset=utf-8",
		    b.p, b.len, NNG_HTTP_STATUS_OK);
	}
	free(b.p);
}

// The page at / says what is served (the charts are not built yet).
static void dash_index_cb(nng_aio *aio)
{
	static const char page[] =
	    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
	    "<title>pstrain</title></head><body>\n<h1>pstrain job</h1>\n"
	    "<p><a href=\"/metrics\">/metrics</a>: the job's figures in "
	    "Prometheus's text format, read from its files at each request."
	    "</p>\n<p>A page with live charts is not built yet.</p>\n"
	    "</body></html>\n";
	dash_reply(aio, "text/html; charset=utf-8", page, sizeof(page) - 1,
	    NNG_HTTP_STATUS_OK);
}

static int dash_handler(pti_dash *d, const char *path, void (*cb)(nng_aio *))
{
	nng_http_handler *h;
	int rv = nng_http_handler_alloc(&h, path, cb);
	if (rv != 0)
		return rv;
	if ((rv = nng_http_handler_set_data(h, d, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(d->srv, h)) != 0)
		nng_http_handler_free(h);
	return rv;
}

int pti_dash_open(pti_dash **out, const char *listen, const char *dir,
    uint32_t workers, char *url, size_t n)
{
	char u[300];
	const char *colon = strrchr(listen, ':');
	if (colon == NULL || colon == listen || colon[1] == '\0' ||
	    strlen(listen) > 256)
		return pti_err_set(PT_EINVAL, "--dashboard-listen %s: expected "
		    "HOST:PORT", listen);
	pti_dash *d = calloc(1, sizeof(*d));
	if (d == NULL)
		return pti_err_set(PT_ENOMEM, "dashboard");
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	d->workers = workers;
	pthread_mutex_init(&d->mu, NULL);
	snprintf(u, sizeof(u), "http://%s", listen);
	int rv = nng_url_parse(&d->url, u);
	if (rv == 0)
		rv = nng_http_server_hold(&d->srv, d->url);
	if (rv == 0 && (rv = dash_handler(d, "/metrics", dash_metrics_cb)) ==
	    0 && (rv = dash_handler(d, "/", dash_index_cb)) == 0)
		rv = nng_http_server_start(d->srv);
	nng_sockaddr sa;
	if (rv == 0 && (rv = nng_http_server_get_addr(d->srv, &sa)) == 0 &&
	    sa.s_family != NNG_AF_INET)
		rv = NNG_EADDRINVAL;
	if (rv != 0) {
		pti_dash_close(d);
		return pti_err_set(PT_ETRANSPORT, "--dashboard-listen %s: %s",
		    listen, nng_strerror(rv));
	}
	char host[64];
	inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof(host));
	snprintf(url, n, "http://%s:%u/", host, ntohs(sa.s_in.sa_port));
	*out = d;
	return 0;
}

void pti_dash_counts(pti_dash *d, uint32_t workers_lost,
    uint32_t worker_restarts, uint32_t server_restarts)
{
	if (d == NULL)
		return;
	pthread_mutex_lock(&d->mu);
	d->lost = workers_lost;
	d->worker_restarts = worker_restarts;
	d->server_restarts = server_restarts;
	pthread_mutex_unlock(&d->mu);
}

void pti_dash_close(pti_dash *d)
{
	if (d == NULL)
		return;
	if (d->srv != NULL) {
		nng_http_server_stop(d->srv);
		nng_http_server_release(d->srv);
	}
	if (d->url != NULL)
		nng_url_free(d->url);
	pthread_mutex_destroy(&d->mu);
	free(d);
}
