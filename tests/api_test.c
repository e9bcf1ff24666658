// tests/api_test.c - the public API (pstrain.h) as a program of its own
// uses it: servers served by threads of this process on tcp ports, and
// workers pushing and pulling ranges of named variables through them.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pstrain.h"
#include "test.h"

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

// api_job_new: variables a (n_a floats) and b (3), the given options,
// then n servers listening on free ports, each served by a thread.
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
	for (; opts && *opts; opts += 2)
		PT_TEST_OK(pt_job_set(j->job, opts[0], opts[1]));
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
	PT_TEST_ERR(pt_worker_open(&x, j.job, 0, NULL), PT_EINVAL);
	// Still serving: the rest of the step goes through.
	PT_TEST_OK(pt_pushpull(w, 0, 0, 2, 2, v, a, &q2));
	PT_TEST_OK(pt_push(w, 0, 1, 0, 3, v, &q));
	PT_TEST_OK(pt_wait(w, q));
	PT_TEST_OK(pt_wait(w, q2));
	pt_worker_close(w);
	api_job_close(&j);
}

static const pt_test_case cases[] = {
    {"test_api_ranges_across_servers", test_api_ranges_across_servers},
    {"test_api_sync_mean", test_api_sync_mean},
    {"test_api_refusals", test_api_refusals},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	setenv("PSTRAIN_SECRET", "0123456789abcdef0123456789abcdef", 1);
	return pt_test_main(argc, argv, cases);
}
