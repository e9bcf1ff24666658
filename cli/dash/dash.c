// cli/dash/dash.c - the dashboard's HTTP server (dash.h): nng's HTTP server
// with a handler per path, the jobs' table that the launcher updates
// (states, counts, events) under a lock.
// /data.json and /metrics are built by dashjson.c and dashprom.c from a
// snapshot of that table (view.h) into a response's buffer (dbuf.h); the
// page's files come from build/web.c (web.h).
#include "cli/dash/dash.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "cli/dash/dashjson.h"
#include "cli/dash/dashprom.h"
#include "cli/dash/dbuf.h"
#include "cli/dash/view.h"
#include "cli/dash/web.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/outputs.h"
#include "common/sockwatch.h"

#define DASH_CHARTJS_MAX (8 << 20) // bytes: far above Chart.js's 200 KB
// nng's HTTP server neither caps nor times out its connections: the
// watcher (dash_watch) closes those idle DASH_IDLE_S seconds, and past
// DASH_CONN_MAX at once the most idle of those idle at least
// DASH_CROWD_S, so that idle connections cannot take the launcher's
// descriptors (a page polls about every second or two).
#define DASH_CONN_MAX 64
#define DASH_IDLE_S 30.0
#define DASH_CROWD_S 2.0
#define DASH_WATCH_MS 250

struct pti_dash {
	nng_http_server *srv;
	nng_url *url;
	char title[256];
	pthread_mutex_t mu; // guards jobs[].state, counts and events
	pti_dash_jobrt *jobs;
	uint32_t n_jobs;
	char *chartjs; // the file's bytes, or a script saying it is missing
	size_t chartjs_len;
	uint16_t port;     // where it listens
	pthread_t watcher; // dash_watch, when `watching`
	int watching, stop; // stop: under mu, with `wake`
	pthread_cond_t wake;
	pti_sock *socks;   // (DASH_SCAN_MAX) the watcher's
	uint64_t closed;   // connections the watcher closed
};
#define DASH_SCAN_MAX 8192

// ---------------------------------------------------------------- handlers

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
	    nng_http_res_set_header(res, "Cache-Control", "no-store") != 0 ||
	    nng_http_res_copy_data(res, body, len) != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

// dash_view takes a snapshot of d's jobs into v (the caller frees
// v->jobs); -1 when out of memory.
static int dash_view_take(pti_dash *d, pti_dash_view *v)
{
	pti_dash_jobrt *jobs = malloc(d->n_jobs * sizeof(*jobs));
	if (jobs == NULL)
		return -1;
	pthread_mutex_lock(&d->mu);
	memcpy(jobs, d->jobs, d->n_jobs * sizeof(*jobs));
	pthread_mutex_unlock(&d->mu);
	v->compare = d->n_jobs > 1 || d->jobs[0].cfg.label[0] != '\0';
	v->title = d->title;
	v->jobs = jobs;
	v->n_jobs = d->n_jobs;
	v->now = pti_wall_s();
	return 0;
}

static void dash_oom(nng_aio *aio)
{
	static const char oom[] = "out of memory\n";
	dash_reply(aio, "text/plain", oom, sizeof(oom) - 1,
	    NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR);
}

static void dash_metrics_cb(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	pti_dash *d = nng_http_handler_get_data(h);
	pti_dash_view v;
	pti_dbuf b = {0};
	if (dash_view_take(d, &v) != 0) {
		dash_oom(aio);
		return;
	}
	pti_dash_prom(&b, &v);
	if (b.failed)
		dash_oom(aio);
	else
		dash_reply(aio, "text/plain; version=0.0.4; charset=utf-8",
		    b.p, b.len, NNG_HTTP_STATUS_OK);
	free(b.p);
	free((void *)v.jobs);
}

static void dash_data_cb(nng_aio *aio)
{
	nng_http_req *req = nng_aio_get_input(aio, 0);
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	pti_dash *d = nng_http_handler_get_data(h);
	const char *uri = nng_http_req_get_uri(req);
	const char *q = uri != NULL ? strchr(uri, '?') : NULL;
	pti_dash_view v;
	pti_dbuf b = {0};
	if (dash_view_take(d, &v) != 0) {
		dash_oom(aio);
		return;
	}
	int rv = pti_dash_json(&b, &v, q != NULL ? q + 1 : NULL);
	if (rv != 0) {
		char msg[256];
		int n = snprintf(msg, sizeof(msg), "%s\n", pt_errmsg(rv));
		dash_reply(aio, "text/plain; charset=utf-8", msg,
		    n < (int)sizeof(msg) ? (size_t)n : sizeof(msg) - 1,
		    NNG_HTTP_STATUS_BAD_REQUEST);
	} else if (b.failed) {
		dash_oom(aio);
	} else {
		dash_reply(aio, "application/json", b.p, b.len,
		    NNG_HTTP_STATUS_OK);
	}
	free(b.p);
	free((void *)v.jobs);
}

static int dash_add(pti_dash *d, nng_http_handler *h)
{
	int rv = nng_http_server_add_handler(d->srv, h);
	if (rv != 0)
		nng_http_handler_free(h);
	return rv;
}

static int dash_handler(pti_dash *d, const char *path, void (*cb)(nng_aio *))
{
	nng_http_handler *h;
	int rv = nng_http_handler_alloc(&h, path, cb);
	if (rv != 0)
		return rv;
	if ((rv = nng_http_handler_set_data(h, d, NULL)) != 0) {
		nng_http_handler_free(h);
		return rv;
	}
	return dash_add(d, h);
}

static int dash_static(pti_dash *d, const char *path, const void *data,
    size_t len, const char *type)
{
	nng_http_handler *h;
	int rv = nng_http_handler_alloc_static(&h, path, data, len, type);
	return rv != 0 ? rv : dash_add(d, h);
}

static const char *dash_type(const char *name)
{
	const char *dot = strrchr(name, '.');
	if (dot != NULL && strcmp(dot, ".js") == 0)
		return "text/javascript; charset=utf-8";
	if (dot != NULL && strcmp(dot, ".css") == 0)
		return "text/css; charset=utf-8";
	return "text/html; charset=utf-8";
}

// dash_chartjs reads Chart.js into d, or a script that tells the page it
// is missing (the page then shows numbers without charts).
static int dash_chartjs(pti_dash *d)
{
	FILE *f = fopen(PT_CHARTJS, "rb");
	char *p = NULL;
	size_t n = 0;
	if (f != NULL && (p = malloc(DASH_CHARTJS_MAX)) != NULL)
		n = fread(p, 1, DASH_CHARTJS_MAX, f);
	if (f != NULL)
		fclose(f);
	if (p != NULL && n > 0 && n < DASH_CHARTJS_MAX) {
		d->chartjs = p;
		d->chartjs_len = n;
		return 0;
	}
	free(p);
	json_t *path = pti_json_str(PT_CHARTJS);
	char *s = path != NULL ? json_dumps(path, JSON_ENCODE_ANY) : NULL;
	json_decref(path);
	if (s == NULL)
		return NNG_ENOMEM;
	size_t len = strlen(s) + 64;
	if ((d->chartjs = malloc(len)) == NULL) {
		free(s);
		return NNG_ENOMEM;
	}
	d->chartjs_len = (size_t)snprintf(d->chartjs, len,
	    "window.ptChartMissing = %s;\n", s);
	free(s);
	return 0;
}

static int dash_handlers(pti_dash *d)
{
	int rv;
	for (const pti_web_file *w = pti_web_files; w->name != NULL; w++) {
		char path[64];
		const char *type = dash_type(w->name);
		snprintf(path, sizeof(path), "/%s", w->name);
		if ((rv = dash_static(d, path, w->data, w->len, type)) != 0)
			return rv;
		if (strcmp(w->name, "index.html") == 0 &&
		    (rv = dash_static(d, "/", w->data, w->len, type)) != 0)
			return rv;
	}
	if ((rv = dash_chartjs(d)) != 0 ||
	    (rv = dash_static(d, "/chart.js", d->chartjs, d->chartjs_len,
		 "text/javascript; charset=utf-8")) != 0 ||
	    (rv = dash_handler(d, "/data.json", dash_data_cb)) != 0)
		return rv;
	return dash_handler(d, "/metrics", dash_metrics_cb);
}

// ---------------------------------------------------------------- the API

// ---------------------------------------------------------------- watcher

static int dash_more_idle(const void *a, const void *b)
{
	double x = ((const pti_sock *)a)->idle_s, y = ((const pti_sock *)b)->idle_s;
	return (x < y) - (x > y);
}

// dash_cut closes the dashboard's connections that are idle too long, or
// too many: see DASH_CONN_MAX.
static void dash_cut(pti_dash *d)
{
	int n = pti_sock_scan(d->port, d->socks, DASH_SCAN_MAX);
	qsort(d->socks, (size_t)n, sizeof(pti_sock), dash_more_idle);
	for (int i = 0; i < n; i++) {
		const pti_sock *c = &d->socks[i];
		int crowd = n - i > DASH_CONN_MAX && c->idle_s >= DASH_CROWD_S;
		if ((c->idle_s >= DASH_IDLE_S || crowd) && pti_sock_cut(c) == 0)
			d->closed++;
	}
}

static void *dash_watch(void *arg)
{
	pti_dash *d = arg;
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		pthread_mutex_unlock(&d->mu);
		dash_cut(d);
		pthread_mutex_lock(&d->mu);
		if (!d->stop)
			pti_cond_wait_ms(&d->wake, &d->mu, DASH_WATCH_MS);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

int pti_dash_open(pti_dash **out, const char *flag, const char *listen,
    const char *title, const pti_dash_job *jobs, uint32_t n, char *url,
    size_t n_url)
{
	char u[300];
	const char *colon = strrchr(listen, ':');
	if (colon == NULL || colon == listen || colon[1] == '\0' ||
	    strlen(listen) > 256)
		return pti_err_set(PT_EINVAL, "%s %s: expected HOST:PORT",
		    flag, listen);
	pti_dash *d = calloc(1, sizeof(*d));
	if (d == NULL || n == 0 ||
	    (d->jobs = calloc(n, sizeof(*d->jobs))) == NULL) {
		free(d);
		return pti_err_set(PT_ENOMEM, "dashboard");
	}
	snprintf(d->title, sizeof(d->title), "%s", title);
	d->n_jobs = n;
	for (uint32_t i = 0; i < n; i++) {
		d->jobs[i].cfg = jobs[i];
		d->jobs[i].state = jobs[i].state;
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->wake, NULL);
	snprintf(u, sizeof(u), "http://%s", listen);
	int rv = nng_url_parse(&d->url, u);
	if (rv == 0)
		rv = nng_http_server_hold(&d->srv, d->url);
	if (rv == 0 && (rv = dash_handlers(d)) == 0)
		rv = nng_http_server_start(d->srv);
	nng_sockaddr sa;
	if (rv == 0 && (rv = nng_http_server_get_addr(d->srv, &sa)) == 0 &&
	    sa.s_family != NNG_AF_INET)
		rv = NNG_EADDRINVAL;
	if (rv != 0) {
		pti_dash_close(d);
		return pti_err_set(rv == NNG_ENOMEM ? PT_ENOMEM :
		    PT_ETRANSPORT, "%s %s: %s", flag, listen,
		    nng_strerror(rv));
	}
	char host[64];
	inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof(host));
	snprintf(url, n_url, "http://%s:%u/", host, ntohs(sa.s_in.sa_port));
	d->port = ntohs(sa.s_in.sa_port);
	if ((d->socks = calloc(DASH_SCAN_MAX, sizeof(pti_sock))) == NULL ||
	    pthread_create(&d->watcher, NULL, dash_watch, d) != 0) {
		pti_dash_close(d);
		return pti_err_set(PT_ENOMEM, "%s: the dashboard's watcher", flag);
	}
	d->watching = 1;
	*out = d;
	return 0;
}

static void dash_event(pti_dash_jobrt *j, int kind, uint32_t total)
{
	pti_dash_event *e = &j->ev[j->n_ev++ % PTI_DASH_EVENTS];
	e->t = j->cfg.t0 > 0 ? pti_wall_s() - j->cfg.t0 : NAN;
	e->kind = kind;
	e->total = total;
}

void pti_dash_counts(pti_dash *d, uint32_t job, uint32_t workers_lost,
    uint32_t worker_restarts, uint32_t server_restarts)
{
	if (d == NULL || job >= d->n_jobs)
		return;
	pthread_mutex_lock(&d->mu);
	pti_dash_jobrt *j = &d->jobs[job];
	if (workers_lost > j->lost)
		dash_event(j, PTI_DEV_LOST, workers_lost);
	if (worker_restarts > j->worker_restarts)
		dash_event(j, PTI_DEV_WORKER_RESTART, worker_restarts);
	if (server_restarts > j->server_restarts)
		dash_event(j, PTI_DEV_SERVER_RESTART, server_restarts);
	j->counted = 1;
	j->lost = workers_lost;
	j->worker_restarts = worker_restarts;
	j->server_restarts = server_restarts;
	pthread_mutex_unlock(&d->mu);
}

void pti_dash_state(pti_dash *d, uint32_t job, int state, double t0)
{
	if (d == NULL || job >= d->n_jobs)
		return;
	pthread_mutex_lock(&d->mu);
	d->jobs[job].state = state;
	if (t0 > 0)
		d->jobs[job].cfg.t0 = t0;
	pthread_mutex_unlock(&d->mu);
}

void pti_dash_close(pti_dash *d)
{
	if (d == NULL)
		return;
	if (d->watching) {
		pthread_mutex_lock(&d->mu);
		d->stop = 1;
		pthread_cond_signal(&d->wake);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->watcher, NULL);
	}
	// nng_http_server_stop returns once every connection is reaped,
	// its handler's callback included: nothing uses d after it.
	if (d->srv != NULL) {
		nng_http_server_stop(d->srv);
		nng_http_server_release(d->srv);
	}
	if (d->url != NULL)
		nng_url_free(d->url);
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->mu);
	free(d->socks);
	free(d->chartjs);
	free(d->jobs);
	free(d);
}
