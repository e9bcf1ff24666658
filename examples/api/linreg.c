// examples/api/linreg.c - linear regression trained through pstrain's
// public API (pstrain.h) only: a model pstrain does not ship, with its
// own data, in any mode.
//
// The model is y = w . x + b on D features. Every worker draws its own
// examples from a fixed teacher (w*_j = sin(j + 1), b* = 0.5, noise
// 0.01), so the result can be checked: w should come close to w*.
//
//   linreg server RANK URL [options]     serve shard RANK at URL
//   linreg worker RANK URL,URL... [opts] train as worker RANK
//   linreg local [options]               every server and worker as
//                                        threads of this one process
// options: --mode sync|async|ssp (sync) --servers S (2) --workers W (2)
//          --steps N (300) --batch B (64) --lr LR (0.1) --features D (50)
//
// Processes of one job share a secret: set PSTRAIN_SECRET to the same
// hex string (e.g. `openssl rand -hex 32`) for each. Build against an
// installed pstrain with
//   cc -o linreg linreg.c $(pkg-config --cflags --libs pstrain) -lm
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pstrain.h>

typedef struct opts {
	const char *mode;
	int servers, workers, steps, batch, features;
	const char *lr;
} opts;

static int fail(const char *what, int rv)
{
	fprintf(stderr, "linreg: %s: %s\n", what, pt_errmsg(rv));
	return 1;
}

// The job every process builds alike: two variables and the rules.
static int make_job(pt_job **out, const opts *o)
{
	char buf[32];
	pt_job *j;
	int rv = pt_job_alloc(&j);
	if (rv != 0)
		return fail("job", rv);
	if (pt_job_var(j, "w", (uint64_t)o->features, 0.0) < 0 ||
	    pt_job_var(j, "b", 1, 0.0) < 0)
		return fail("variables", PT_EINVAL);
	snprintf(buf, sizeof(buf), "%d", o->servers);
	if ((rv = pt_job_set(j, "servers", buf)) != 0)
		return fail("servers", rv);
	snprintf(buf, sizeof(buf), "%d", o->workers);
	if ((rv = pt_job_set(j, "workers", buf)) != 0)
		return fail("workers", rv);
	snprintf(buf, sizeof(buf), "%d", o->batch);
	if ((rv = pt_job_set(j, "mode", o->mode)) != 0 ||
	    (rv = pt_job_set(j, "batch", buf)) != 0 ||
	    (rv = pt_job_set(j, "lr", o->lr)) != 0 ||
	    (strcmp(o->mode, "ssp") == 0 &&
		(rv = pt_job_set(j, "staleness", "2")) != 0)) {
		pt_job_free(j);
		return fail("options", rv);
	}
	*out = j;
	return 0;
}

// A uniform draw in [-1, 1) from (a, b, c): each worker's data depend
// only on its rank and step.
static float draw(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ b * 0xbf58476d1ce4e5b9ULL ^
		     c * 0x94d049bb133111ebULL;
	x ^= x >> 31;
	x *= 0xd6e8feb86659fd39ULL;
	x ^= x >> 29;
	return (float)((double)(x >> 11) / 4503599627370496.0 - 1.0);
}

static int train(const pt_job *job, const opts *o, int rank,
    const char *urls)
{
	int d = o->features, b = o->batch / o->workers;
	float *w = calloc((size_t)d, 4), *gw = calloc((size_t)d, 4);
	float *x = malloc((size_t)d * 4), bias = 0, gb;
	pt_worker *wk;
	pt_req *q[4];
	double loss = 0;
	int rv;
	if (!w || !gw || !x)
		return fail("memory", PT_ENOMEM);
	if ((rv = pt_worker_open(&wk, job, (uint32_t)rank, urls)) != 0)
		return fail("worker", rv);
	// Begin from the servers' values (a resumed job has others).
	if ((rv = pt_pull(wk, 0, 0, (uint64_t)d, w, &q[0])) != 0 ||
	    (rv = pt_pull(wk, 1, 0, 1, &bias, &q[1])) != 0 ||
	    (rv = pt_wait(wk, q[0])) != 0 || (rv = pt_wait(wk, q[1])) != 0)
		return fail("pull", rv);
	for (int64_t t = pt_worker_start(wk); t < o->steps; t++) {
		memset(gw, 0, (size_t)d * 4);
		gb = 0;
		loss = 0;
		for (int i = 0; i < b; i++) {
			uint64_t ex = (uint64_t)t * 1000003u + (uint64_t)rank * b +
				      (uint64_t)i;
			float y = 0.5f + 0.01f * draw(ex, 7, 7), yh = bias;
			for (int j = 0; j < d; j++) {
				x[j] = draw(ex, (uint64_t)j, 1);
				y += sinf((float)j + 1) * x[j];
				yh += w[j] * x[j];
			}
			float e = yh - y;
			loss += (double)e * e / b;
			for (int j = 0; j < d; j++)
				gw[j] += 2 * e * x[j] / (float)b;
			gb += 2 * e / (float)b;
		}
		// Each variable pushed and pulled on its own; pstrain cuts
		// the ranges at the servers' shard edges.
		if ((rv = pt_push(wk, t, 0, 0, (uint64_t)d, gw, &q[0])) != 0 ||
		    (rv = pt_push(wk, t, 1, 0, 1, &gb, &q[1])) != 0 ||
		    (rv = pt_pull(wk, 0, 0, (uint64_t)d, w, &q[2])) != 0 ||
		    (rv = pt_pull(wk, 1, 0, 1, &bias, &q[3])) != 0)
			return fail("push/pull", rv);
		for (int k = 0; k < 4; k++)
			if ((rv = pt_wait(wk, q[k])) != 0)
				return fail("wait", rv);
	}
	double err = fabs(bias - 0.5);
	for (int j = 0; j < d; j++)
		err = fmax(err, fabs(w[j] - sinf((float)j + 1)));
	pt_stats st;
	if ((rv = pt_worker_stats(wk, &st)) != 0)
		return fail("stats", rv);
	printf("worker %d: %s, %d steps: loss %.6f, largest |w - w*| %.4f, "
	       "%llu updates, mean staleness %.2f\n", rank, o->mode, o->steps,
	    loss, err, (unsigned long long)st.updates, st.stale_mean);
	if ((rv = pt_worker_done(wk)) != 0)
		return fail("done", rv);
	pt_worker_close(wk);
	free(w), free(gw), free(x);
	return 0;
}

static int serve(const pt_job *job, int rank, const char *url)
{
	pt_server *s;
	char at[256];
	int rv = pt_server_open(&s, job, (uint32_t)rank, url);
	if (rv != 0)
		return fail("server", rv);
	if (pt_server_url(s, at, sizeof(at)) == 0)
		printf("server %d: serving at %s\n", rank, at);
	fflush(stdout);
	pt_server_serve(s); // until the last worker is done
	pt_server_close(s);
	return 0;
}

// ---------------------------------------------------------------- local

typedef struct thread_arg {
	const pt_job *job;
	const opts *o;
	int rank, rv;
	pt_server *s;
	const char *urls;
} thread_arg;

static void *serve_thread(void *arg)
{
	thread_arg *a = arg;
	pt_server_serve(a->s);
	return NULL;
}

static void *train_thread(void *arg)
{
	thread_arg *a = arg;
	a->rv = train(a->job, a->o, a->rank, a->urls);
	return NULL;
}

// local runs the whole job in this process: servers on free tcp ports,
// each served by a thread, and a thread per worker.
static int local(const pt_job *job, const opts *o)
{
	thread_arg sa[o->servers], wa[o->workers];
	pthread_t st[o->servers], wt[o->workers];
	char urls[4096] = "", at[256];
	int rv = 0;
	for (int i = 0; i < o->servers; i++) {
		sa[i] = (thread_arg){.job = job, .o = o, .rank = i};
		if ((rv = pt_server_open(&sa[i].s, job, (uint32_t)i,
			 "tcp://127.0.0.1:0")) != 0)
			return fail("server", rv);
		pt_server_url(sa[i].s, at, sizeof(at));
		snprintf(urls + strlen(urls), sizeof(urls) - strlen(urls),
		    "%s%s", i ? "," : "", at);
		pthread_create(&st[i], NULL, serve_thread, &sa[i]);
	}
	for (int i = 0; i < o->workers; i++) {
		wa[i] = (thread_arg){.job = job, .o = o, .rank = i,
		    .urls = urls};
		pthread_create(&wt[i], NULL, train_thread, &wa[i]);
	}
	for (int i = 0; i < o->workers; i++) {
		pthread_join(wt[i], NULL);
		rv |= wa[i].rv;
	}
	for (int i = 0; i < o->servers; i++) {
		pt_server_stop(sa[i].s); // the job has stopped them already
		pthread_join(st[i], NULL);
		pt_server_close(sa[i].s);
	}
	return rv;
}

int main(int argc, char **argv)
{
	opts o = {"sync", 2, 2, 300, 64, 50, "0.1"};
	const char *role = argc > 1 ? argv[1] : "", *url = NULL;
	int rank = 0, i = 2;
	pt_log_set(pt_log_stderr, NULL); // the library's messages on stderr
	if (strcmp(role, "server") == 0 || strcmp(role, "worker") == 0) {
		if (argc < 4) {
			fprintf(stderr, "linreg %s: needs RANK and URL\n", role);
			return 2;
		}
		rank = atoi(argv[2]);
		url = argv[3];
		i = 4;
	} else if (strcmp(role, "local") != 0) {
		fprintf(stderr, "usage: linreg server RANK URL | worker RANK "
				"URLS | local [--mode M --servers S --workers "
				"W --steps N --batch B --lr LR --features D]\n");
		return 2;
	}
	for (; i + 1 < argc; i += 2) {
		const char *f = argv[i], *v = argv[i + 1];
		if (strcmp(f, "--mode") == 0)
			o.mode = v;
		else if (strcmp(f, "--servers") == 0)
			o.servers = atoi(v);
		else if (strcmp(f, "--workers") == 0)
			o.workers = atoi(v);
		else if (strcmp(f, "--steps") == 0)
			o.steps = atoi(v);
		else if (strcmp(f, "--batch") == 0)
			o.batch = atoi(v);
		else if (strcmp(f, "--lr") == 0)
			o.lr = v;
		else if (strcmp(f, "--features") == 0)
			o.features = atoi(v);
		else {
			fprintf(stderr, "linreg: unknown option %s\n", f);
			return 2;
		}
	}
	if (i != argc || o.servers < 1 || o.workers < 1 || o.steps < 1 ||
	    o.features < 1 || o.batch < o.workers) {
		fprintf(stderr, "linreg: bad options (each takes a value; "
				"servers, workers, steps, features >= 1, batch "
				">= workers)\n");
		return 2;
	}
	pt_job *job;
	if (make_job(&job, &o) != 0)
		return 1;
	int rv = strcmp(role, "server") == 0   ? serve(job, rank, url)
		 : strcmp(role, "worker") == 0 ? train(job, &o, rank, url)
					       : local(job, &o);
	pt_job_free(job);
	return rv;
}
