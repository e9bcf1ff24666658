// tests/api_test.c - the public API (pstrain.h) as a program of its own
// uses it: servers served by threads of this process on tcp ports, and
// workers pushing and pulling ranges of named variables through them.
// The lent-value cases also read the client's counters (client.h), to
// see that a lent reply carries the next request once given back.
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "client/api.h"
#include "client/client.h"
#include "common/clock.h"
#include "common/jobopt.h"
#include "common/layout.h"
#include "common/outputs.h"
#include "pstrain.h"
#include "tests/test.h"

#define API_MAX 4

typedef struct api_job {
	pt_job *job;
	pt_server *s[API_MAX];
	pthread_t t[API_MAX];
	uint32_t n;
	char urls[1024];
} api_job;

static void *serve_cb(void *arg)
{
	pt_server_serve(arg);
	return NULL;
}

// api_job_new: variables a (n_a floats) and b (3), the given options
// (the pseudo-option "table" NAME:DIM:INIT declares a table), then n
// servers listening on free ports, each served by a thread.
static void api_job_new(api_job *j, uint64_t n_a, uint32_t servers,
    const char *const *opts)
{
	char buf[16];
	memset(j, 0, sizeof(*j));
	PT_TEST_OK(pt_job_alloc(&j->job));
	PT_TEST_TRUE(pt_job_var(j->job, "a", n_a, 0.5) == 0);
	PT_TEST_TRUE(pt_job_var(j->job, "b", 3, 0.0) == 1);
	snprintf(buf, sizeof(buf), "%u", servers);
	PT_TEST_OK(pt_job_set(j->job, "servers", buf));
	PT_TEST_OK(pt_job_set(j->job, "lr", "0.5"));
	for (; opts && *opts; opts += 2) {
		char name[32];
		unsigned dim;
		double init;
		if (strcmp(opts[0], "table") != 0)
			PT_TEST_OK(pt_job_set(j->job, opts[0], opts[1]));
		else if (sscanf(opts[1], "%31[^:]:%u:%lf", name, &dim,
			     &init) != 3 ||
			 pt_job_table(j->job, name, dim, init) < 0)
			PT_TEST_TRUE(!"a table option that does not parse");
	}
	for (uint32_t i = 0; i < servers; i++) {
		char url[256];
		PT_TEST_OK(pt_server_open(&j->s[i], j->job, i,
		    "tcp://127.0.0.1:0"));
		PT_TEST_OK(pt_server_url(j->s[i], url, sizeof(url)));
		snprintf(j->urls + strlen(j->urls),
		    sizeof(j->urls) - strlen(j->urls), "%s%s", i ? "," : "",
		    url);
		pthread_create(&j->t[i], NULL, serve_cb, j->s[i]);
		j->n++;
	}
}

static void api_job_close(api_job *j)
{
	for (uint32_t i = 0; i < j->n; i++) {
		pt_server_stop(j->s[i]);
		pthread_join(j->t[i], NULL);
		pt_server_close(j->s[i]);
	}
	pt_job_free(j->job);
}

// A variable cut by the shard edge: pushes and pulls of ranges within
// and across it land where they should (sync, one worker: each step
// applies lr x its gradient).
static void test_api_ranges_across_servers(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q, *q2;
	float a0[9], a[9], b[3], g[9], g3[3] = {1, 2, 3}, part[4];
	api_job_new(&j, 9, 2, NULL); // 12 floats: server 0 holds a[0..6)
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_TRUE(pt_worker_start(w) == 0);
	PT_TEST_OK(pt_pull(w, 0, 0, 9, a0, &q));
	PT_TEST_OK(pt_wait(w, q));
	for (int i = 0; i < 9; i++) {
		PT_TEST_TRUE(a0[i] >= -0.5f && a0[i] <= 0.5f);
		g[i] = (float)i;
	}
	// Step 0 in pieces, out of order: b, then a[4..9) (both servers),
	// then a[0..4). Nothing is applied before the last piece.
	PT_TEST_OK(pt_push(w, 0, 1, 0, 3, g3, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_push(w, 0, 0, 4, 5, g + 4, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_push(w, 0, 0, 0, 4, g, &q));
	PT_TEST_OK(pt_pull(w, 0, 0, 9, a, &q2)); // waits for step 0
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_wait(w, q2));
	for (int i = 0; i < 9; i++)
		PT_TEST_NEAR(a[i], a0[i] - 0.5f * g[i], 1e-6);
	PT_TEST_OK(pt_pull(w, 1, 0, 3, b, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_NEAR(b[2], -1.5, 1e-6); // zeros at start
	// A pushpull of a range across the edge, in step 1.
	PT_TEST_OK(pt_pushpull(w, 1, 0, 0, 9, g, a, &q));
	PT_TEST_OK(pt_push(w, 1, 1, 0, 3, g3, &q2));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_NEAR(a[8], a0[8] - 2 * 0.5f * g[8], 1e-5);
	// Ranges within one variable: a[5..9) is on server 0 and 1.
	PT_TEST_OK(pt_pull(w, 0, 5, 4, part, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(memcmp(part, a + 5, sizeof(part)) == 0);
	pt_stats st;
	PT_TEST_OK(pt_worker_stats(w, &st));
	PT_TEST_TRUE(st.version == 2 && st.updates == 4); // 2 steps x 2
	PT_TEST_OK(pt_worker_done(w)); // the only worker stops the servers
	pt_worker_close(w);
	api_job_close(&j);
}

// Initial values the program gives (pt_job_var_values) are what the
// servers start from, across the shard edge; a worker whose job gives
// other values is refused at hello; bad values are refused by name.
static void test_api_var_values(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q;
	float v[9], got[9], b[3];
	for (int i = 0; i < 9; i++)
		v[i] = (float)i - 4.25f;
	memset(&j, 0, sizeof(j));
	PT_TEST_OK(pt_job_alloc(&j.job));
	PT_TEST_TRUE(pt_job_var(j.job, "a", 9, 0.5) == 0);
	PT_TEST_TRUE(pt_job_var(j.job, "b", 3, 0.0) == 1);
	PT_TEST_OK(pt_job_var_values(j.job, 0, v));
	PT_TEST_OK(pt_job_set(j.job, "servers", "2"));
	for (uint32_t i = 0; i < 2; i++) {
		char url[256];
		PT_TEST_OK(pt_server_open(&j.s[i], j.job, i,
		    "tcp://127.0.0.1:0"));
		PT_TEST_OK(pt_server_url(j.s[i], url, sizeof(url)));
		snprintf(j.urls + strlen(j.urls),
		    sizeof(j.urls) - strlen(j.urls), "%s%s", i ? "," : "", url);
		pthread_create(&j.t[i], NULL, serve_cb, j.s[i]);
		j.n++;
	}
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_OK(pt_pull(w, 0, 0, 9, got, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(memcmp(got, v, sizeof(v)) == 0);
	PT_TEST_OK(pt_pull(w, 1, 0, 3, b, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(b[0] == 0 && b[2] == 0); // drawn: bound 0
	// Another job with one value different: not this job.
	pt_job *other;
	pt_worker *w2 = NULL;
	PT_TEST_OK(pt_job_alloc(&other));
	PT_TEST_TRUE(pt_job_var(other, "a", 9, 0.5) == 0);
	PT_TEST_TRUE(pt_job_var(other, "b", 3, 0.0) == 1);
	PT_TEST_OK(pt_job_set(other, "servers", "2"));
	PT_TEST_OK(pt_job_set(other, "rpc-timeout", "5"));
	v[8] = 0.5f;
	PT_TEST_OK(pt_job_var_values(other, 0, v));
	PT_TEST_TRUE(pt_worker_open(&w2, other, 0, j.urls) != 0);
	PT_TEST_STR_HAS(pt_errmsg(0), "model");
	// Refusals: no such variable, a value not finite (named).
	PT_TEST_TRUE(pt_job_var_values(other, 2, v) == PT_ERANGE);
	v[3] = NAN;
	PT_TEST_TRUE(pt_job_var_values(other, 0, v) == PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(0), "variable a: initial value 3");
	pt_job_free(other);
	PT_TEST_OK(pt_worker_done(w));
	pt_worker_close(w);
	api_job_close(&j);
}

// A program's records: with option out, pt_worker_step writes the rows
// of worker-R.csv that pstrain's own workers write, the program's
// figures as given and the library's from its requests and replies;
// pt_worker_eval a row of eval.csv. Without out, nothing is written.
static void test_api_records(void)
{
	char dir[PT_PATH_MAX], path[PT_PATH_MAX + 32], t0[32];
	PT_TEST_OK(pti_test_tmpdir(dir, sizeof(dir), "pt-api-rec"));
	// The job started 1000 s ago (option t0): wall_s counts from there.
	snprintf(t0, sizeof(t0), "%.3f", pti_wall_s() - 1000);
	const char *const opts[] = {"out", dir, "t0", t0, NULL};
	api_job j;
	pt_worker *w;
	pt_req *q;
	float g[12], v[12];
	for (int i = 0; i < 12; i++)
		g[i] = 1;
	api_job_new(&j, 9, 2, opts);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	for (int t = 0; t < 3; t++) {
		PT_TEST_OK(pt_pushpull(w, t, PT_ALL, 0, 12, g, v, &q));
		PT_TEST_OK(pt_wait(w, q));
		PT_TEST_OK(pt_worker_step(w, t, 2.5 - t, 3.0, 1.5));
	}
	PT_TEST_OK(pt_worker_eval(w, -1, 0.75, 0.5, 0.25));
	PT_TEST_ERR(pt_worker_step(w, -1, 0, 0, 0), PT_EINVAL);
	PT_TEST_OK(pt_worker_final(w, 0.625, 0.875));
	PT_TEST_OK(pt_worker_done(w));
	pt_worker_close(w);
	api_job_close(&j); // the servers write server-R.json
	// The job's summary, by a process that holds the same job.
	pt_job *sj;
	PT_TEST_OK(pt_job_alloc(&sj));
	PT_TEST_TRUE(pt_job_var(sj, "a", 9, 0.5) == 0);
	PT_TEST_TRUE(pt_job_var(sj, "b", 3, 0.0) == 1);
	PT_TEST_OK(pt_job_set(sj, "servers", "2"));
	PT_TEST_OK(pt_job_set(sj, "out", dir));
	PT_TEST_OK(pt_job_set(sj, "t0", t0));
	PT_TEST_OK(pt_job_summary(sj));
	pt_job_free(sj);
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json_t *o = json_load_file(path, 0, NULL);
	PT_TEST_TRUE(o != NULL);
	PT_TEST_STR_HAS(json_string_value(json_object_get(o, "outcome")), "ok");
	PT_TEST_TRUE(json_integer_value(json_object_get(o, "steps")) == 3);
	PT_TEST_TRUE(json_integer_value(json_object_get(o, "samples")) == 3 * 256);
	PT_TEST_NEAR(json_real_value(json_object_get(o, "final_test_acc")),
	    0.875, 1e-9);
	PT_TEST_NEAR(json_real_value(json_object_get(o, "best_val_acc")), 0.5,
	    1e-9);
	PT_TEST_TRUE(json_number_value(json_object_get(o, "startup_s")) >= 999);
	PT_TEST_TRUE(json_is_null(json_object_get(o, "server_records_missing"))
	    == 0 && json_array_size(json_object_get(o,
	    "server_records_missing")) == 0);
	json_decref(o);
	pti_csv t;
	snprintf(path, sizeof(path), "%s/worker-0.csv", dir);
	PT_TEST_OK(pti_csv_read_table(path, 0, &pti_csv_worker, &t));
	PT_TEST_TRUE(t.n_rows == 3);
	for (size_t r = 0; r < t.n_rows && t.n_rows == 3; r++) {
		const double *x = t.v + r * PTI_WK_N;
		PT_TEST_TRUE(x[PTI_WK_STEP] == (double)r + 1);
		PT_TEST_NEAR(x[PTI_WK_LOSS], 2.5 - (double)r, 1e-9);
		PT_TEST_NEAR(x[PTI_WK_GRAD_NORM], 3.0, 1e-9);
		PT_TEST_NEAR(x[PTI_WK_COMPUTE_MS], 1.5, 1e-9);
		// The step's length is measured; what is not the program's
		// computing is communication (the first step begins at its
		// first request less the computing).
		PT_TEST_TRUE(x[PTI_WK_STEP_MS] > 0);
		PT_TEST_NEAR(x[PTI_WK_COMM_MS], fmax(x[PTI_WK_STEP_MS] -
		    x[PTI_WK_COMPUTE_MS], 0), 2e-3);
		if (r == 0)
			PT_TEST_TRUE(x[PTI_WK_STEP_MS] >= 1.5);
		PT_TEST_TRUE(x[PTI_WK_VERSION] == (double)r + 1);
		PT_TEST_NEAR(x[PTI_WK_LR], 0.5, 1e-9);
		PT_TEST_TRUE(x[PTI_WK_TX_BYTES] > 12 * sizeof(float));
		PT_TEST_TRUE(x[PTI_WK_RX_BYTES] > 12 * sizeof(float));
		PT_TEST_TRUE(x[PTI_WK_RSS_MB] > 0);
		PT_TEST_TRUE(x[PTI_WK_WALL] >= 1000); // from t0, not the first step
	}
	free(t.v);
	snprintf(path, sizeof(path), "%s/eval.csv", dir);
	PT_TEST_OK(pti_csv_read_table(path, 0, &pti_csv_eval_val, &t));
	PT_TEST_TRUE(t.n_rows == 1);
	if (t.n_rows == 1) {
		PT_TEST_TRUE(t.v[PTI_EV_VERSION] == 3);
		PT_TEST_TRUE(t.v[PTI_EV_WSTEP] == 3);
		PT_TEST_NEAR(t.v[PTI_EV_ACC], 0.5, 1e-9);
		PT_TEST_NEAR(t.v[PTI_EV_EVAL_S], 0.25, 1e-9);
	}
	free(t.v);
	pti_test_rmdir(dir);
	// No out: nothing written (an empty out would name the root folder),
	// nothing refused.
	api_job_new(&j, 9, 1, NULL);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_OK(pt_pushpull(w, 0, PT_ALL, 0, 12, g, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_worker_step(w, 0, 1, 1, 1));
	PT_TEST_OK(pt_worker_eval(w, 1, 1, 1, 1));
	PT_TEST_OK(pt_worker_done(w));
	pt_worker_close(w);
	api_job_close(&j);
	PT_TEST_TRUE(access("/worker-0.csv", F_OK) != 0);
	PT_TEST_TRUE(access("/eval.csv", F_OK) != 0);
}

// Two workers in sync: a step closes only when both gradients are
// whole, and applies their mean.
static void test_api_sync_mean(void)
{
	static const char *const opts[] = {"workers", "2", NULL};
	api_job j;
	pt_worker *w0, *w1;
	pt_req *q0, *q1, *p0;
	float a0[5], a[5], g0[5], g1[5];
	api_job_new(&j, 5, 2, opts);
	PT_TEST_OK(pt_worker_open(&w0, j.job, 0, j.urls));
	PT_TEST_OK(pt_worker_open(&w1, j.job, 1, j.urls));
	PT_TEST_OK(pt_pull(w0, 0, 0, 5, a0, &q0));
	PT_TEST_OK(pt_wait(w0, q0));
	for (int i = 0; i < 5; i++)
		g0[i] = 1, g1[i] = 3;
	PT_TEST_OK(pt_pushpull(w0, 0, 0, 0, 5, g0, a, &p0));
	PT_TEST_OK(pt_push(w1, 0, 0, 0, 2, g1, &q1)); // part of its gradient
	PT_TEST_OK(pt_wait(w1, q1));
	PT_TEST_OK(pt_push(w1, 0, 0, 2, 3, g1 + 2, &q1));
	PT_TEST_OK(pt_wait(w1, q1));
	// b is not pushed yet by either: worker 0's reply waits for it.
	float gb[3] = {0, 0, 0};
	PT_TEST_OK(pt_push(w1, 0, 1, 0, 3, gb, &q1));
	PT_TEST_OK(pt_wait(w1, q1));
	PT_TEST_OK(pt_push(w0, 0, 1, 0, 3, gb, &q0));
	PT_TEST_OK(pt_wait(w0, q0));
	PT_TEST_OK(pt_wait(w0, p0));
	for (int i = 0; i < 5; i++)
		PT_TEST_NEAR(a[i], a0[i] - 0.5 * 2.0, 1e-6);
	pt_worker_close(w0);
	pt_worker_close(w1);
	api_job_close(&j);
}

// api_one_step: a job of one zero-initialized variable of 4 floats on
// one server, with optimizer opt and lr (NULL: never set), after one sync
// step of gradient 1: the values, into v.
static void api_one_step(float v[4], const char *opt, const char *lr)
{
	pt_job *job;
	pt_server *s;
	pt_worker *w;
	pt_req *q;
	pthread_t t;
	char url[256];
	float g[4] = {1, 1, 1, 1};
	memset(v, 0, 4 * sizeof(float));
	PT_TEST_OK(pt_job_alloc(&job));
	PT_TEST_TRUE(pt_job_var(job, "v", 4, 0.0) == 0);
	PT_TEST_OK(pt_job_set(job, "optimizer", opt));
	if (lr != NULL)
		PT_TEST_OK(pt_job_set(job, "lr", lr));
	PT_TEST_OK(pt_server_open(&s, job, 0, "tcp://127.0.0.1:0"));
	PT_TEST_OK(pt_server_url(s, url, sizeof(url)));
	pthread_create(&t, NULL, serve_cb, s);
	PT_TEST_OK(pt_worker_open(&w, job, 0, url));
	PT_TEST_OK(pt_pushpull(w, 0, 0, 0, 4, g, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_worker_done(w));
	pt_worker_close(w);
	pthread_join(t, NULL);
	pt_server_close(s);
	pt_job_free(job);
}

// A job that never sets lr trains at the rate pstrain.h documents for
// its optimizer, exactly as one that sets that rate; SGD's first step of
// gradient 1 moves each value by -0.1.
static void test_api_default_lr(void)
{
	static const char *const opt[][2] = {{"sgd", "0.1"},
	    {"momentum:0.9", "0.1"}, {"nesterov:0.9", "0.1"},
	    {"adagrad", "0.01"}, {"adam", "0.001"}};
	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
		float unset[4], set[4], zero[4];
		api_one_step(unset, opt[i][0], NULL);
		api_one_step(set, opt[i][0], opt[i][1]);
		api_one_step(zero, opt[i][0], "0"); // 0 says the same
		if (memcmp(unset, set, sizeof(set)) != 0 ||
		    memcmp(zero, set, sizeof(set)) != 0 || set[0] == 0)
			PT_TEST_FAIL_AT("%s: lr unset %.9g, 0 %.9g, %s %.9g",
			    opt[i][0], unset[0], zero[0], opt[i][1], set[0]);
	}
	float v[4];
	api_one_step(v, "sgd", NULL);
	PT_TEST_NEAR(v[0], -0.1, 1e-7);
}

// The log: with a function set, the library's messages reach it (a
// server's address as it opens, the shutdown it was asked for), one line
// each without a newline; with none set, nothing is said.
typedef struct api_log {
	int n, levels_ok, newline;
	char listening[200];
} api_log;

static void api_log_cb(void *arg, int level, const char *msg)
{
	api_log *l = arg;
	l->n++;
	l->levels_ok += level >= PT_LOG_ERR && level <= PT_LOG_INFO;
	l->newline += strchr(msg, '\n') != NULL;
	if (strstr(msg, "listening on") != NULL)
		snprintf(l->listening, sizeof(l->listening), "%s", msg);
}

static void test_api_log(void)
{
	api_log l = {0};
	float v[4];
	pt_log_set(api_log_cb, &l);
	api_one_step(v, "sgd", NULL);
	pt_log_set(NULL, NULL);
	PT_TEST_STR_HAS(l.listening, "server 0: listening on tcp://127.0.0.1:");
	PT_TEST_TRUE(l.n >= 2 && l.levels_ok == l.n && l.newline == 0);
	int seen = l.n;
	api_one_step(v, "sgd", NULL); // none set: not called
	PT_TEST_TRUE(l.n == seen);
}

// The library says what it is: the API version it was built with, and a
// version string as `pstrain --version` prints it.
static void test_api_version(void)
{
	PT_TEST_TRUE(pt_api_version() == PT_API_VERSION);
	PT_TEST_TRUE(pt_version() != NULL && pt_version()[0] != '\0');
}

// Bad input is refused with an error that names it, and the job goes on.
static void test_api_refusals(void)
{
	api_job j;
	pt_job *other;
	pt_worker *w, *x;
	pt_req *q, *q2;
	float v[8] = {0}, a[4];
	api_job_new(&j, 4, 1, NULL);
	PT_TEST_ERR(pt_job_set(j.job, "model", "mlp:8"), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "model");
	PT_TEST_ERR(pt_job_set(j.job, "mode", "fast"), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "fast");
	// A job of all-reduce has no servers for a worker to talk to.
	PT_TEST_OK(pt_job_alloc(&other));
	PT_TEST_TRUE(pt_job_var(other, "a", 4, 0) == 0);
	PT_TEST_OK(pt_job_set(other, "mode", "allreduce"));
	PT_TEST_OK(pt_job_set(other, "servers", "0"));
	PT_TEST_ERR(pt_worker_open(&x, other, 0, j.urls), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "allreduce");
	pt_job_free(other);
	PT_TEST_TRUE(pt_job_var(j.job, "a", 2, 0) == -PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "declared twice");
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_ERR(pt_pull(w, 2, 0, 1, v, &q), PT_ERANGE);
	PT_TEST_ERR(pt_pull(w, 1, 2, 2, v, &q), PT_ERANGE);
	PT_TEST_STR_HAS(pt_errmsg(PT_ERANGE), "outside b");
	// The same range twice in a step: the second is refused.
	PT_TEST_OK(pt_push(w, 0, 0, 0, 2, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_push(w, 0, 0, 1, 2, v, &q));
	PT_TEST_ERR(pt_wait(w, q), PT_ESTATE);
	PT_TEST_STR_HAS(pt_errmsg(PT_ESTATE), "already pushed");
	// A worker with other variables is refused at hello.
	PT_TEST_OK(pt_job_alloc(&other));
	PT_TEST_TRUE(pt_job_var(other, "a", 5, 0.5) == 0);
	PT_TEST_ERR(pt_worker_open(&x, other, 0, j.urls), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "another model");
	pt_job_free(other);
	// A worker rank beyond the job's, and no servers' addresses.
	PT_TEST_ERR(pt_worker_open(&x, j.job, 3, j.urls), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--rank 3 is not below");
	PT_TEST_ERR(pt_worker_open(&x, j.job, 0, NULL), PT_EINVAL);
	// A server's rank, and its options checked together, by name.
	pt_server *bad;
	PT_TEST_ERR(pt_server_open(&bad, j.job, 1, "tcp://127.0.0.1:0"),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--rank 1 is not below");
	PT_TEST_OK(pt_job_alloc(&other));
	PT_TEST_TRUE(pt_job_var(other, "a", 4, 0) == 0);
	PT_TEST_OK(pt_job_set(other, "checkpoint-every", "5"));
	PT_TEST_ERR(pt_server_open(&bad, other, 0, "tcp://127.0.0.1:0"),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "--checkpoint-dir");
	PT_TEST_OK(pt_job_set(other, "workers", "3"));
	PT_TEST_ERR(pt_server_open(&bad, other, 0, "tcp://127.0.0.1:0"),
	    PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "not divisible");
	pt_job_free(other);
	// Still serving: the rest of the step goes through.
	PT_TEST_OK(pt_pushpull(w, 0, 0, 2, 2, v, a, &q2));
	PT_TEST_OK(pt_push(w, 0, 1, 0, 3, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_wait(w, q2));
	pt_worker_close(w);
	api_job_close(&j);
}

// ---------------------------------------------------------------- lent values

// Variable a of LENT_N floats: a whole-shard reply of LENT_ALL values is
// large enough (64 KiB and more) for the client to write the next
// request into it.
#define LENT_N 20000
#define LENT_ALL (LENT_N + 3)

static void lent_grad(float *g, uint64_t n, int64_t step)
{
	for (uint64_t i = 0; i < n; i++) {
		int64_t k = (int64_t)((i + (uint64_t)step) % 7);
		g[i] = (float)(k - 3) * 0.01f;
	}
}

// lent_counts reads how many requests reused a reply, and how many
// loans copied their values.
static void lent_counts(pt_worker *w, uint64_t *reused, uint64_t *copied)
{
	uint64_t c;
	pti_client_counts(pti_worker_client(w), reused, copied ? copied : &c);
}

// lent_sum reads every value (so that AddressSanitizer sees a loan read
// after its reply was freed, and UBSan an unaligned one).
static double lent_sum(const float *v, uint64_t n)
{
	double s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += v[i];
	return s;
}

// lent_matches: in one mode, lent pulls and pushpulls give the bytes a
// copying pull gives, waited for at once or with others under way.
static void lent_matches(const char *mode)
{
	const char *const opts[] = {"mode", mode, NULL};
	const size_t bytes = LENT_ALL * sizeof(float);
	api_job j;
	pt_worker *w;
	pt_req *q, *q2, *q3, *q4;
	pt_lent *l, *l2;
	const float *v, *v2;
	float *g = calloc(LENT_ALL, sizeof(float));
	float *c = calloc(LENT_ALL, sizeof(float));
	PT_TEST_TRUE(g != NULL && c != NULL);
	api_job_new(&j, LENT_N, 1, opts);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	// A lent and a copying pull of everything, under way together.
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, NULL, &q));
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, c, &q2));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
	PT_TEST_TRUE(memcmp(v, c, bytes) == 0);
	PT_TEST_TRUE(lent_sum(v, LENT_ALL) != 0); // initial values drawn
	pt_lent_free(w, l);
	// Lent pushpulls of the whole shard (one request), each against a
	// copying pull after it.
	for (int64_t s = 0; s < 3; s++) {
		lent_grad(g, LENT_ALL, s);
		PT_TEST_OK(pt_pushpull(w, s, PT_ALL, 0, LENT_ALL, g, NULL,
		    &q));
		PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
		PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, c, &q2));
		PT_TEST_OK(pt_wait(w, q2));
		PT_TEST_TRUE(memcmp(v, c, bytes) == 0);
		pt_lent_free(w, l);
	}
	// Step 3: a lent pushpull of part of a (in sync mode a push and a
	// pull that waits for the step), and a lent pull of b, while the
	// rest of the step is pushed.
	lent_grad(g, LENT_ALL, 3);
	PT_TEST_OK(pt_pushpull(w, 3, 0, 100, 5000, g + 100, NULL, &q));
	PT_TEST_OK(pt_push(w, 3, 0, 0, 100, g, &q2));
	PT_TEST_OK(pt_push(w, 3, 0, 5100, LENT_N - 5100, g + 5100, &q3));
	PT_TEST_OK(pt_push(w, 3, 1, 0, 3, g + LENT_N, &q4));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_wait(w, q3));
	PT_TEST_OK(pt_wait(w, q4));
	PT_TEST_OK(pt_pull(w, 1, 0, 3, NULL, &q2));
	PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
	PT_TEST_OK(pt_wait_lent(w, q2, &v2, &l2));
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, c, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(memcmp(v, c + 100, 5000 * sizeof(float)) == 0);
	PT_TEST_TRUE(memcmp(v2, c + LENT_N, 3 * sizeof(float)) == 0);
	double b2 = 0; // b starts at zeros
	for (int s = 0; s < 4; s++)
		b2 -= 0.5 * ((LENT_N + 2 + s) % 7 - 3) * 0.01;
	PT_TEST_NEAR(v2[2], b2, 1e-6);
	pt_lent_free(w, l2);
	pt_lent_free(w, l);
	pt_worker_close(w);
	api_job_close(&j);
	free(g);
	free(c);
}

// Lent values are the bytes a copying pull gives, in sync and async mode.
static void test_api_lent_matches_copy(void)
{
	lent_matches("sync");
	lent_matches("async");
}

// A lent range must lie within one server's shard: one across the edge
// is refused, by name, and leaves *req alone; ones within either server
// are lent.
static void test_api_lent_spanning_refused(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q = NULL, *q2;
	pt_lent *l;
	const float *v;
	float g[12] = {0}, c[12];
	api_job_new(&j, 9, 2, NULL); // 12 floats: server 0 holds a[0..6)
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_ERR(pt_pull(w, 0, 0, 9, NULL, &q), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "spans servers 0 to 1");
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "within one server's shard");
	PT_TEST_TRUE(q == NULL);
	PT_TEST_ERR(pt_pull(w, 0, 5, 2, NULL, &q), PT_EINVAL);
	PT_TEST_ERR(pt_pushpull(w, 0, PT_ALL, 0, 12, g, NULL, &q), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "spans servers");
	PT_TEST_TRUE(q == NULL);
	// Nothing was sent: step 0 is still whole to push. Server 1's part
	// of a as a lent pushpull, the rest pushed.
	for (int i = 0; i < 12; i++)
		g[i] = (float)i;
	PT_TEST_OK(pt_pushpull(w, 0, 0, 6, 3, g + 6, NULL, &q));
	PT_TEST_OK(pt_push(w, 0, 0, 0, 6, g, &q2));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_push(w, 0, 1, 0, 3, g + 9, &q2));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, 12, c, &q2));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_TRUE(memcmp(v, c + 6, 3 * sizeof(float)) == 0);
	pt_lent_free(w, l);
	// Server 0's whole shard, lent.
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, 6, NULL, &q));
	PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
	PT_TEST_TRUE(memcmp(v, c, 6 * sizeof(float)) == 0);
	pt_lent_free(w, l);
	pt_worker_close(w);
	api_job_close(&j);
}

// pt_wait_lent refuses a request that lends nothing, after waiting for
// it as pt_wait does (values written, push applied, req freed), and
// writes neither *vals nor *lent; pt_wait takes a lent request.
static void test_api_lent_wait_mismatch(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q;
	pt_lent *l = NULL, *keep;
	const float *v = NULL, *vkeep;
	float a0[4], a[4], c[4], g[7] = {1, 2, 3, 4, 5, 6, 7};
	api_job_new(&j, 4, 1, NULL);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	keep = l = (pt_lent *)&keep; // stand-ins that must stay as they are
	vkeep = v = a;
	memset(a0, 0, sizeof(a0));
	PT_TEST_OK(pt_pull(w, 0, 0, 4, a0, &q));
	PT_TEST_ERR(pt_wait_lent(w, q, &v, &l), PT_EINVAL);
	PT_TEST_STR_HAS(pt_errmsg(PT_EINVAL), "lends no values");
	PT_TEST_TRUE(v == vkeep && l == keep);
	PT_TEST_OK(pt_pull(w, 0, 0, 4, c, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(memcmp(a0, c, sizeof(c)) == 0); // written all the same
	// A push too: refused, and applied (the step closes).
	PT_TEST_OK(pt_push(w, 0, PT_ALL, 0, 7, g, &q));
	PT_TEST_ERR(pt_wait_lent(w, q, &v, &l), PT_EINVAL);
	PT_TEST_TRUE(v == vkeep && l == keep);
	// pt_wait on a lent request: the values are not kept.
	PT_TEST_OK(pt_pull(w, 0, 0, 4, NULL, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_pull(w, 0, 0, 4, a, &q));
	PT_TEST_OK(pt_wait(w, q));
	for (int i = 0; i < 4; i++)
		PT_TEST_NEAR(a[i], a0[i] - 0.5f * g[i], 1e-6);
	// A lent request with nowhere to put the loan: refused, freed.
	PT_TEST_OK(pt_pull(w, 0, 0, 4, NULL, &q));
	PT_TEST_ERR(pt_wait_lent(w, q, NULL, &l), PT_EINVAL);
	PT_TEST_OK(pt_pull(w, 0, 0, 4, NULL, &q));
	PT_TEST_ERR(pt_wait_lent(w, q, &v, NULL), PT_EINVAL);
	PT_TEST_TRUE(v == vkeep && l == keep);
	PT_TEST_ERR(pt_wait_lent(w, NULL, &v, &l), PT_EINVAL);
	pt_lent_free(w, NULL); // nothing
	// A server's refusal comes back as pt_wait's would, with no loan:
	// step 1's a[0..2) is pushed, then a lent pushpull of a[0..4) (a
	// push, refused, and a pull that waits for the step), then the
	// rest of the step.
	pt_req *q2, *q3;
	PT_TEST_OK(pt_push(w, 1, 0, 0, 2, g, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_pushpull(w, 1, 0, 0, 4, g, NULL, &q));
	PT_TEST_OK(pt_push(w, 1, 0, 2, 2, g + 2, &q2));
	PT_TEST_OK(pt_push(w, 1, 1, 0, 3, g + 4, &q3));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_wait(w, q3));
	PT_TEST_ERR(pt_wait_lent(w, q, &v, &l), PT_ESTATE);
	PT_TEST_STR_HAS(pt_errmsg(PT_ESTATE), "already pushed");
	PT_TEST_TRUE(v == vkeep && l == keep);
	pt_worker_close(w);
	api_job_close(&j);
}

// lent_steps runs steps [*step, *step + k) as lent pushpulls of the whole
// key space, checking each step's values against the last ones less
// lr x gradient; with hold, each loan is given back only after the next
// step's request was sent (double buffering).
static void lent_steps(pt_worker *w, int64_t *step, int k, int hold,
    float *prev, float *g)
{
	pt_lent *held = NULL;
	for (int i = 0; i < k; i++, (*step)++) {
		pt_req *q;
		pt_lent *l;
		const float *v;
		lent_grad(g, LENT_ALL, *step);
		PT_TEST_OK(pt_pushpull(w, *step, PT_ALL, 0, LENT_ALL, g, NULL,
		    &q));
		pt_lent_free(w, held);
		held = NULL;
		PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
		double s = lent_sum(v, LENT_ALL), want = 0;
		for (uint64_t e = 0; e < LENT_ALL; e++) {
			float x = prev[e] - 0.5f * g[e];
			want += x;
			if (v[e] != x) {
				PT_TEST_NEAR(v[e], x, 1e-6);
				break;
			}
		}
		PT_TEST_NEAR(s, want, 1e-6);
		memcpy(prev, v, LENT_ALL * sizeof(float));
		if (hold)
			held = l;
		else
			pt_lent_free(w, l);
	}
	pt_lent_free(w, held);
}

// A lent reply, once given back, carries the next pushpull of its
// server: every step after the first writes its request into the last
// step's reply (the client's count of reused messages says so), and so
// it does with the loan given back a step late. Many steps, every value
// read, under AddressSanitizer in make test.
static void test_api_lent_reuse(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q;
	uint64_t r0, r1, r2, r3;
	int64_t step = 0;
	float *g = calloc(LENT_ALL, sizeof(float));
	float *prev = calloc(LENT_ALL, sizeof(float));
	float *c = calloc(LENT_ALL, sizeof(float));
	PT_TEST_TRUE(g != NULL && prev != NULL && c != NULL);
	api_job_new(&j, LENT_N, 1, NULL);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, prev, &q));
	PT_TEST_OK(pt_wait(w, q));
	// The first step's request has no lent reply to go in.
	lent_steps(w, &step, 1, 0, prev, g);
	lent_counts(w, &r0, NULL);
	lent_steps(w, &step, 60, 0, prev, g);
	lent_counts(w, &r1, NULL);
	PT_TEST_TRUE(r1 - r0 == 60);
	// Double buffering: the second step's request goes out while the
	// first's reply is lent and no other is kept, so it needs a new
	// message; each later one takes the reply given back while the
	// step before was under way.
	lent_steps(w, &step, 60, 1, prev, g);
	lent_counts(w, &r2, NULL);
	PT_TEST_TRUE(r2 - r1 == 59);
	// Replies not given back carry nothing: the first of three steps
	// takes the reply kept from before, the other two new messages.
	pt_lent *l[3];
	for (int i = 0; i < 3; i++) {
		const float *v;
		lent_grad(g, LENT_ALL, step);
		PT_TEST_OK(pt_pushpull(w, step++, PT_ALL, 0, LENT_ALL, g, NULL,
		    &q));
		PT_TEST_OK(pt_wait_lent(w, q, &v, &l[i]));
		memcpy(prev, v, LENT_ALL * sizeof(float));
	}
	lent_counts(w, &r3, NULL);
	PT_TEST_TRUE(r3 - r2 == 1);
	pt_lent_free(w, l[0]);
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, c, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(memcmp(c, prev, LENT_ALL * sizeof(float)) == 0);
	pt_worker_close(w); // frees the two loans still out
	api_job_close(&j);
	free(g);
	free(prev);
	free(c);
}

// Values a reply does not hold aligned for floats are copied into the
// loan (the test hook moves each lent reply one byte off): the pointer
// handed out is aligned, the bytes are the server's, and the unaligned
// reply still carries the next request.
static void test_api_lent_unaligned(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q;
	pt_lent *l;
	const float *v;
	uint64_t r0, c0, r1, c1;
	int64_t step = 0;
	float *g = calloc(LENT_ALL, sizeof(float));
	float *prev = calloc(LENT_ALL, sizeof(float));
	PT_TEST_TRUE(g != NULL && prev != NULL);
	api_job_new(&j, LENT_N, 1, NULL);
	setenv("PSTRAIN_TEST_LEND_SKEW", "1", 1);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	unsetenv("PSTRAIN_TEST_LEND_SKEW"); // read as the worker opens
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, prev, &q));
	PT_TEST_OK(pt_wait(w, q));
	lent_counts(w, &r0, &c0);
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, LENT_ALL, NULL, &q));
	PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
	lent_counts(w, &r1, &c1);
	PT_TEST_TRUE(c1 - c0 == 1);
	PT_TEST_TRUE((uintptr_t)v % sizeof(float) == 0);
	PT_TEST_TRUE(memcmp(v, prev, LENT_ALL * sizeof(float)) == 0);
	pt_lent_free(w, l);
	lent_steps(w, &step, 5, 0, prev, g);
	lent_counts(w, &r1, &c1);
	PT_TEST_TRUE(c1 - c0 == 6 && r1 - r0 == 5);
	pt_worker_close(w);
	api_job_close(&j);
	free(g);
	free(prev);
}

// Loans still out when the worker closes are freed with it (make test
// runs this under AddressSanitizer's leak check).
static void test_api_lent_close_frees_loans(void)
{
	api_job j;
	pt_worker *w;
	pt_req *q, *q2;
	pt_lent *l, *l2;
	const float *v, *v2;
	api_job_new(&j, LENT_N, 2, NULL);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_OK(pt_pull(w, 0, 0, 100, NULL, &q));
	PT_TEST_OK(pt_pull(w, PT_ALL, LENT_N, 3, NULL, &q2));
	PT_TEST_OK(pt_wait_lent(w, q, &v, &l));
	PT_TEST_OK(pt_wait_lent(w, q2, &v2, &l2));
	PT_TEST_TRUE(lent_sum(v, 100) != 0 && lent_sum(v2, 3) == 0);
	pt_worker_close(w);
	api_job_close(&j);
}

// pstrain's own model through the API: a job declared with pt_job_model
// starts from pstrain run's initial values, and a worker that computes its
// gradient with pt_net and pushes it over the whole key space moves the
// servers' parameters by lr x that gradient (sync, one worker, 2 servers
// cutting the CNN's variables); the loss on its batch goes down.
static void test_api_net_trains_model(void)
{
	enum { B = 4, DIM = 64, CLASSES = 3 };
	api_job j;
	pt_worker *w;
	pt_net *net;
	pt_req *q;
	pti_layout l;
	float x[B * DIM];
	uint8_t y[B] = {0, 1, 2, 1};
	double loss, first = 0;
	memset(&j, 0, sizeof(j));
	PT_TEST_OK(pt_job_alloc(&j.job));
	PT_TEST_OK(pt_job_model(j.job, "cnn:2,4", DIM, CLASSES));
	PT_TEST_OK(pt_job_set(j.job, "servers", "2"));
	PT_TEST_OK(pt_job_set(j.job, "lr", "0.5"));
	for (uint32_t i = 0; i < 2; i++) {
		char url[256];
		PT_TEST_OK(pt_server_open(&j.s[i], j.job, i,
		    "tcp://127.0.0.1:0"));
		PT_TEST_OK(pt_server_url(j.s[i], url, sizeof(url)));
		snprintf(j.urls + strlen(j.urls),
		    sizeof(j.urls) - strlen(j.urls), "%s%s", i ? "," : "", url);
		pthread_create(&j.t[i], NULL, serve_cb, j.s[i]);
		j.n++;
	}
	PT_TEST_OK(pt_net_alloc(&net, j.job, B));
	PT_TEST_OK(pti_layout_init(&l, "cnn:2,4", DIM, CLASSES));
	uint64_t n = pt_net_size(net);
	PT_TEST_TRUE(n == l.n_params && n > 100);
	float *p = malloc(n * sizeof(float)), *p0 = malloc(n * sizeof(float));
	float *g = malloc(n * sizeof(float));
	PT_TEST_TRUE(p != NULL && p0 != NULL && g != NULL);
	pti_layout_init_values(p0, &l, 1, 0, n); // pstrain run's, seed 1
	for (int i = 0; i < B * DIM; i++)
		x[i] = (float)((i * 37) % 11) / 11.0f;
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_OK(pt_pull(w, PT_ALL, 0, n, p, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_TRUE(memcmp(p, p0, n * sizeof(float)) == 0);
	for (int64_t step = 0; step < 5; step++) {
		memcpy(p0, p, n * sizeof(float));
		PT_TEST_OK(pt_net_grad(net, g, &loss, p, x, y, B));
		if (step == 0)
			first = loss;
		PT_TEST_OK(pt_pushpull(w, step, PT_ALL, 0, n, g, p, &q));
		PT_TEST_OK(pt_wait(w, q));
		for (uint64_t i = 0; i < n; i++)
			PT_TEST_NEAR(p[i], p0[i] - 0.5f * g[i], 1e-6);
	}
	PT_TEST_OK(pt_net_grad(net, g, &loss, p, x, y, B));
	PT_TEST_TRUE(loss < first);
	double sum;
	uint32_t correct = 99;
	PT_TEST_OK(pt_net_eval(net, &sum, &correct, p, x, y, B));
	PT_TEST_NEAR(sum / B, loss, 1e-5);
	PT_TEST_TRUE(correct <= B);
	PT_TEST_OK(pt_worker_done(w));
	pt_worker_close(w);
	pt_net_free(net);
	free(p);
	free(p0);
	free(g);
	api_job_close(&j);
}

// What pt_job_model and pt_net refuse, by name.
static void test_api_net_refusals(void)
{
	pt_job *a, *b;
	pt_net *net;
	float prm[200] = {0}, g[200];
	float x[2 * 4] = {0};
	uint8_t y[2] = {0, 9};
	double loss;
	PT_TEST_OK(pt_job_alloc(&a));
	PT_TEST_TRUE(pt_job_var(a, "v", 4, 0) == 0);
	PT_TEST_ERR(pt_net_alloc(&net, a, 8), PT_EINVAL); // no model
	PT_TEST_ERR(pt_job_model(a, "mlp:4", 4, 2), PT_EINVAL); // has vars
	PT_TEST_TRUE(strstr(pt_errmsg(PT_EINVAL), "variables") != NULL);
	PT_TEST_OK(pt_job_alloc(&b));
	PT_TEST_ERR(pt_job_model(b, "mlp:x", 4, 2), PT_EINVAL);
	PT_TEST_ERR(pt_job_model(b, "cnn:4", 50, 2), PT_EINVAL); // no square
	PT_TEST_ERR(pt_job_model(b, NULL, 4, 2), PT_EINVAL);
	PT_TEST_OK(pt_job_model(b, "mlp:4", 4, 3));
	PT_TEST_TRUE(pt_job_var(b, "v", 4, 0) < 0); // the model's already
	PT_TEST_ERR(pt_job_model(b, "mlp:4", 4, 3), PT_EINVAL); // twice
	PT_TEST_ERR(pt_net_alloc(&net, b, 0), PT_EINVAL);
	PT_TEST_OK(pt_net_alloc(&net, b, 2));
	PT_TEST_TRUE(pt_net_size(net) == 4 * 4 + 4 + 4 * 3 + 3);
	PT_TEST_ERR(pt_net_grad(net, g, &loss, prm, x, y, 2), PT_EINVAL);
	y[1] = 2;
	PT_TEST_ERR(pt_net_grad(net, g, &loss, prm, x, y, 3), PT_EINVAL);
	PT_TEST_OK(pt_net_grad(net, g, &loss, prm, x, y, 2));
	PT_TEST_NEAR(loss, 1.0986123, 1e-5); // zeros: ln 3
	pt_net_free(net);
	pt_net_free(NULL);
	pt_job_free(a);
	pt_job_free(b);
}

// ---------------------------------------------------------------- rows

// A worker of the rows cases: steps of pushes (ids with repeats, and
// ids the other worker pushes too), each pulling rows 0..15 of the step
// that closed, into out (16 x 4).
typedef struct rows_worker {
	pt_worker *w;
	int rank, steps;
	float out[64];
	int rv;
} rows_worker;

static void *rows_worker_cb(void *arg)
{
	rows_worker *r = arg;
	uint64_t ids[2][3] = {{3, 3, 7}, {3, 9, 12}};
	uint64_t all[16];
	float g[3 * 4];
	for (int i = 0; i < 16; i++)
		all[i] = (uint64_t)i;
	for (int step = 0; step < r->steps && r->rv == 0; step++) {
		for (int i = 0; i < 12; i++)
			g[i] = (float)((r->rank * 3 + i / 4 + 1) * (step + 1)) +
			       0.1f * (float)(i % 4);
		r->rv = pt_pushpull_rows(r->w, 0, step, 3, ids[r->rank], g, 16,
		    all, r->out);
	}
	return NULL;
}

// rows_sync runs 2 workers for `steps` sync steps over `servers`
// servers; out gets worker 0's last rows, init the rows before.
static void rows_sync(uint32_t servers, int steps, float out[64],
    float init[64])
{
	static const char *const opts[] = {"workers", "2", "table",
	    "emb:4:0.5", NULL};
	api_job j;
	rows_worker r[2];
	pthread_t t[2];
	uint64_t all[16];
	for (int i = 0; i < 16; i++)
		all[i] = (uint64_t)i;
	api_job_new(&j, 5, servers, opts);
	for (int i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].rank = i;
		r[i].steps = steps;
		PT_TEST_OK(pt_worker_open(&r[i].w, j.job, (uint32_t)i, j.urls));
	}
	PT_TEST_OK(pt_pull_rows(r[0].w, 0, 16, all, init));
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, rows_worker_cb, &r[i]);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		PT_TEST_OK(r[i].rv);
	}
	// Both workers read the same rows of the closed step.
	PT_TEST_TRUE(memcmp(r[0].out, r[1].out, sizeof(r[0].out)) == 0);
	memcpy(out, r[0].out, sizeof(r[0].out));
	for (int i = 0; i < 2; i++)
		pt_worker_close(r[i].w);
	api_job_close(&j);
}

// Sync rows: each pushed row moves once a step by lr x the mean of the
// workers' gradients (a row given twice by one worker summed first);
// rows never pushed keep their initial values; and 1 or 2 servers give
// the same bits, at every step.
static void test_api_rows_sync(void)
{
	float one[64], init[64], init2[64], out1[64], out2[64];
	rows_sync(1, 1, one, init);
	for (int e = 0; e < 4; e++) {
		float d = 0.1f * (float)e;
		// row 3: worker 0 twice (1, 2), worker 1 once (4); row 7:
		// worker 0 (3); row 9: worker 1 (5); row 12: worker 1 (6).
		PT_TEST_NEAR(one[3 * 4 + e],
		    init[3 * 4 + e] - 0.5 * (1 + 2 + 4 + 3 * d) / 2, 1e-5);
		PT_TEST_NEAR(one[7 * 4 + e], init[7 * 4 + e] - 0.5 * (3 + d) / 2,
		    1e-5);
		PT_TEST_NEAR(one[9 * 4 + e], init[9 * 4 + e] - 0.5 * (5 + d) / 2,
		    1e-5);
		PT_TEST_NEAR(one[12 * 4 + e],
		    init[12 * 4 + e] - 0.5 * (6 + d) / 2, 1e-5);
		PT_TEST_TRUE(one[5 * 4 + e] == init[5 * 4 + e]);
		PT_TEST_TRUE(init[e] >= -0.5f && init[e] <= 0.5f);
	}
	rows_sync(1, 3, out1, init);
	rows_sync(2, 3, out2, init2);
	PT_TEST_TRUE(memcmp(init, init2, sizeof(init)) == 0);
	PT_TEST_TRUE(memcmp(out1, out2, sizeof(out1)) == 0);
	PT_TEST_TRUE(memcmp(out1, one, sizeof(out1)) != 0);
}

// Async rows: each push is applied as it comes, and a row's staleness
// is the updates it had between the pull a worker read it from and
// that worker's push (server-0.json). Bad requests name what is wrong.
static void test_api_rows_async(void)
{
	char dir[] = "/tmp/pstrain-rows-XXXXXX";
	PT_TEST_TRUE(mkdtemp(dir) != NULL);
	const char *const opts[] = {"workers", "2", "mode", "async", "table",
	    "emb:2:0.1", "out", dir, NULL};
	api_job j;
	pt_worker *w0, *w1;
	uint64_t id = 77;
	float v0[2], v[2], g[2] = {1, 2};
	api_job_new(&j, 5, 1, opts);
	PT_TEST_OK(pt_worker_open(&w0, j.job, 0, j.urls));
	PT_TEST_OK(pt_worker_open(&w1, j.job, 1, j.urls));
	PT_TEST_OK(pt_pull_rows(w0, 0, 1, &id, v0));
	PT_TEST_OK(pt_push_rows(w1, 0, 0, 1, &id, g)); // never read: not
	PT_TEST_OK(pt_push_rows(w1, 0, 1, 1, &id, g)); // counted
	PT_TEST_OK(pt_pushpull_rows(w0, 0, 0, 1, &id, g, 1, &id, v));
	for (int e = 0; e < 2; e++)
		PT_TEST_NEAR(v[e], v0[e] - 3 * 0.5 * g[e], 1e-6);
	// Refusals: no such table, a push without a step, NULL rows.
	PT_TEST_ERR(pt_pull_rows(w0, 1, 1, &id, v), PT_ERANGE);
	PT_TEST_STR_HAS(pt_errmsg(PT_ERANGE), "table 1");
	PT_TEST_ERR(pt_push_rows(w0, 0, -1, 1, &id, g), PT_EINVAL);
	PT_TEST_ERR(pt_push_rows(w0, 0, 0, 1, &id, NULL), PT_EINVAL);
	pt_worker_close(w0);
	pt_worker_close(w1);
	api_job_close(&j);
	char path[64];
	snprintf(path, sizeof(path), "%s/server-0.json", dir);
	json_t *o = json_load_file(path, 0, NULL);
	PT_TEST_TRUE(o != NULL);
	json_t *t = json_array_get(json_object_get(o, "tables"), 0);
	PT_TEST_TRUE(json_integer_value(json_object_get(t, "rows")) == 1);
	PT_TEST_TRUE(json_integer_value(json_object_get(t,
	    "rows_pushed")) == 3);
	PT_TEST_TRUE(json_integer_value(json_object_get(t,
	    "row_staleness_max")) == 2);
	PT_TEST_TRUE(json_integer_value(json_object_get(t,
	    "row_staleness_sum")) == 2);
	json_decref(o);
	unlink(path);
	rmdir(dir);
}

// table_stats: table 0's counter key in DIR/server-0.json.
static long long table_stat(const char *dir, const char *key)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/server-0.json", dir);
	json_t *o = json_load_file(path, 0, NULL);
	json_t *t = json_array_get(json_object_get(o, "tables"), 0);
	long long v = json_is_integer(json_object_get(t, key))
			  ? json_integer_value(json_object_get(t, key))
			  : -1;
	json_decref(o);
	return v;
}

// A table's capacity and admission threshold, set as the job's options:
// past 4 rows each new one evicts one, which reads as its initial
// values again; an id becomes a row at its second push, its first
// gradient dropped.
static void test_api_rows_capacity(void)
{
	char dir[] = "/tmp/pstrain-rows-XXXXXX";
	PT_TEST_TRUE(mkdtemp(dir) != NULL);
	const char *const opts[] = {"mode", "async", "table", "emb:2:0.1",
	    "table-capacity", "4", "table-admit", "2", "out", dir, NULL};
	api_job j;
	pt_worker *w;
	uint64_t ids[10];
	float g[20], v0[20], v[20];
	for (int i = 0; i < 10; i++)
		ids[i] = (uint64_t)(100 + i);
	for (int i = 0; i < 20; i++)
		g[i] = 1;
	api_job_new(&j, 5, 1, opts);
	PT_TEST_OK(pt_worker_open(&w, j.job, 0, j.urls));
	PT_TEST_OK(pt_pull_rows(w, 0, 10, ids, v0));
	// Once: not admitted, nothing changes.
	PT_TEST_OK(pt_pushpull_rows(w, 0, 0, 1, ids, g, 1, ids, v));
	PT_TEST_TRUE(v[0] == v0[0] && v[1] == v0[1]);
	// Twice: a row, moved by lr x 1 (its first gradient dropped).
	PT_TEST_OK(pt_pushpull_rows(w, 0, 1, 1, ids, g, 1, ids, v));
	PT_TEST_NEAR(v[0], v0[0] - 0.5, 1e-6);
	// Ten ids twice each: 4 rows stay, the rest were evicted.
	for (int k = 0; k < 2; k++)
		PT_TEST_OK(pt_push_rows(w, 0, 2 + k, 10, ids, g));
	PT_TEST_OK(pt_pull_rows(w, 0, 10, ids, v));
	int moved = 0;
	for (int i = 0; i < 10; i++)
		moved += v[2 * i] != v0[2 * i];
	PT_TEST_TRUE(moved == 4);
	pt_worker_close(w);
	api_job_close(&j);
	PT_TEST_TRUE(table_stat(dir, "rows") == 4);
	PT_TEST_TRUE(table_stat(dir, "rows_created") == 10);
	PT_TEST_TRUE(table_stat(dir, "evictions") == 6);
	PT_TEST_TRUE(table_stat(dir, "admission_refusals") == 10);
	char path[128];
	snprintf(path, sizeof(path), "%s/server-0.json", dir);
	unlink(path);
	rmdir(dir);
}

// Async over shared memory (option shm): values change while workers
// read them where the server keeps them. Worker 0 pushes a gradient of
// ones as fast as it can while worker 1 pulls the whole variable over
// and over. The values start at 0 and move alike, so a copy of one
// version holds one value throughout: worker 1 never gets a mix of two
// (the seqlock of common/shm.h), and it saw them move (else the case
// proves nothing).
#define SHM_N (1 << 18)
#define SHM_STEPS 400

typedef struct shm_pusher {
	pt_job *job;
	const char *url;
	atomic_int done;
	int rv;
} shm_pusher;

static void *shm_push_cb(void *arg)
{
	shm_pusher *p = arg;
	pt_worker *w = NULL;
	pt_req *q;
	float *g = malloc(SHM_N * sizeof(float));
	int rv = g == NULL ? PT_ENOMEM : pt_worker_open(&w, p->job, 0, p->url);
	for (uint64_t i = 0; g != NULL && i < SHM_N; i++)
		g[i] = 1.0f;
	for (int64_t t = 0; rv == 0 && t < SHM_STEPS; t++)
		if ((rv = pt_push(w, t, 0, 0, SHM_N, g, &q)) == 0)
			rv = pt_wait(w, q);
	atomic_store(&p->done, 1);
	if (rv == 0)
		rv = pt_worker_done(w);
	pt_worker_close(w);
	free(g);
	p->rv = rv;
	return NULL;
}

// shm_job: an async job of `workers` workers over shared memory, its
// variable v of SHM_N zeros, lr 0.001, served by a thread (*ts) on an
// ipc address in dir (url).
static void shm_job(pt_job **job, pt_server **s, pthread_t *ts,
    const char *workers, char dir[256], char url[300])
{
	PT_TEST_OK(pti_test_tmpdir(dir, 256, "pt-api-shm"));
	snprintf(url, 300, "ipc://%s/s0", dir);
	PT_TEST_OK(pt_job_alloc(job));
	PT_TEST_TRUE(pt_job_var(*job, "v", SHM_N, 0.0) == 0);
	PT_TEST_OK(pt_job_set(*job, "mode", "async"));
	PT_TEST_OK(pt_job_set(*job, "workers", workers));
	PT_TEST_OK(pt_job_set(*job, "shm", "1"));
	PT_TEST_OK(pt_job_set(*job, "lr", "0.001"));
	PT_TEST_OK(pt_server_open(s, *job, 0, url));
	pthread_create(ts, NULL, serve_cb, *s);
}

static void test_api_shm_async_reads_whole(void)
{
	char dir[256], url[300];
	pt_server *s;
	pt_worker *w;
	pthread_t ts, tp;
	pt_req *q;
	shm_pusher p = {0};
	float *v = calloc(SHM_N, sizeof(float));
	PT_TEST_TRUE(v != NULL);
	shm_job(&p.job, &s, &ts, "2", dir, url);
	PT_TEST_OK(pt_worker_open(&w, p.job, 1, url));
	p.url = url;
	pthread_create(&tp, NULL, shm_push_cb, &p);
	uint64_t reads = 0, torn = 0, moves = 0;
	float last = 0;
	while (!atomic_load(&p.done)) {
		PT_TEST_OK(pt_pull(w, 0, 0, SHM_N, v, &q));
		PT_TEST_OK(pt_wait(w, q));
		uint64_t i = 1;
		while (i < SHM_N && v[i] == v[0])
			i++;
		torn += i < SHM_N;
		moves += v[0] != last;
		last = v[0];
		reads++;
	}
	printf("# %llu reads, %llu of them torn, the values moved %llu "
	       "times between two\n", (unsigned long long)reads,
	    (unsigned long long)torn, (unsigned long long)moves);
	PT_TEST_TRUE(torn == 0);
	PT_TEST_TRUE(moves >= 2);
	// At the end: SHM_STEPS updates of lr x 1, one value throughout.
	PT_TEST_OK(pt_pull(w, 0, 0, SHM_N, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_NEAR(v[0], -0.001 * SHM_STEPS, 1e-4);
	PT_TEST_TRUE(v[SHM_N - 1] == v[0]);
	PT_TEST_OK(pt_worker_done(w)); // the job ends once both said so
	pthread_join(tp, NULL);
	PT_TEST_OK(p.rv);
	pt_worker_close(w);
	pthread_join(ts, NULL);
	pt_server_close(s);
	pt_job_free(p.job);
	pti_test_rmdir(dir);
	free(v);
}

// Two pushes of one range under way at once over shared memory: the
// second cannot go where the server may not have read the first yet,
// so its values go in its message; both are applied as given (1, then
// 2: every value at -0.001 x 3).
static void test_api_shm_pushes_in_flight(void)
{
	char dir[256], url[300];
	pt_job *job;
	pt_server *s;
	pt_worker *w;
	pthread_t ts;
	pt_req *q1, *q2, *q;
	float *g1 = malloc(SHM_N * sizeof(float));
	float *g2 = malloc(SHM_N * sizeof(float));
	float *v = malloc(SHM_N * sizeof(float));
	PT_TEST_TRUE(g1 != NULL && g2 != NULL && v != NULL);
	for (uint64_t i = 0; i < SHM_N; i++) {
		g1[i] = 1.0f;
		g2[i] = 2.0f;
	}
	shm_job(&job, &s, &ts, "1", dir, url);
	PT_TEST_OK(pt_worker_open(&w, job, 0, url));
	PT_TEST_OK(pt_push(w, 0, 0, 0, SHM_N, g1, &q1));
	PT_TEST_OK(pt_push(w, 1, 0, 0, SHM_N, g2, &q2));
	PT_TEST_OK(pt_wait(w, q1));
	PT_TEST_OK(pt_wait(w, q2));
	PT_TEST_OK(pt_pull(w, 0, 0, SHM_N, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	uint64_t wrong = 0;
	for (uint64_t i = 0; i < SHM_N; i++)
		wrong += fabsf(v[i] + 0.003f) > 1e-6f;
	PT_TEST_TRUE(wrong == 0);
	PT_TEST_OK(pt_worker_done(w));
	pt_worker_close(w);
	pthread_join(ts, NULL);
	pt_server_close(s);
	pt_job_free(job);
	pti_test_rmdir(dir);
	free(g1);
	free(g2);
	free(v);
}

static const pti_test_case cases[] = {
    {"test_api_net_trains_model", test_api_net_trains_model},
    {"test_api_net_refusals", test_api_net_refusals},
    {"test_api_ranges_across_servers", test_api_ranges_across_servers},
    {"test_api_sync_mean", test_api_sync_mean},
    {"test_api_default_lr", test_api_default_lr},
    {"test_api_log", test_api_log},
    {"test_api_version", test_api_version},
    {"test_api_var_values", test_api_var_values},
    {"test_api_records", test_api_records},
    {"test_api_refusals", test_api_refusals},
    {"test_api_lent_matches_copy", test_api_lent_matches_copy},
    {"test_api_lent_spanning_refused", test_api_lent_spanning_refused},
    {"test_api_lent_wait_mismatch", test_api_lent_wait_mismatch},
    {"test_api_lent_reuse", test_api_lent_reuse},
    {"test_api_lent_unaligned", test_api_lent_unaligned},
    {"test_api_lent_close_frees_loans", test_api_lent_close_frees_loans},
    {"test_api_rows_sync", test_api_rows_sync},
    {"test_api_rows_async", test_api_rows_async},
    {"test_api_rows_capacity", test_api_rows_capacity},
    {"test_api_shm_async_reads_whole", test_api_shm_async_reads_whole},
    {"test_api_shm_pushes_in_flight", test_api_shm_pushes_in_flight},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	setenv("PSTRAIN_SECRET", "0123456789abcdef0123456789abcdef", 1);
	return pti_test_main(argc, argv, cases);
}
