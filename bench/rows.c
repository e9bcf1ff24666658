// bench/rows.c - an embedding table's rows through one server, against
// raw nng moving the same bytes: a pstrain server (one process of its
// own, as in a job) holds table "t" of POOL rows of DIM floats, and this
// process, its worker, reads K rows a request (pt_pull_rows: row
// lookups), then pushes K rows' gradients and reads K rows
// (pt_pushpull_rows, async: lookups and updates), each request's ids
// drawn at random from the pool. The raw side is a REP socket in the
// same serving process, its connection widened as pstrain's is,
// answering a request of the ids' bytes (pull: K x 8; pushpull: pushed
// ids and gradients, and pulled ids, K x (16 + 4 DIM)) with the rows'
// bytes (K x 4 DIM), copied at each end: the transport's part of the
// work. Rounds interleaved.
//
//   rows URL_PREFIX DIM K POOL ROUNDS ITERS   e.g. rows ipc:///tmp/d 16 4096 1048576 5 50
//
// Prints one line per round: "raw_pull_us ps_pull_us raw_pushpull_us
// ps_pushpull_us" (mean per request of ITERS after a warm-up), for
// bench/run.sh to turn into rows per second and take the medians of.
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include <pstrain.h>

#define BENCH_PROG "rows"
#include "bench/bench.h"

// job_make: the job both ends declare: one float of variable "d" (a
// job needs one), table "t" of dim floats, async, plain SGD at lr 0 (the
// rows' values stay as pushed first; the work is the same).
static pt_job *job_make(uint32_t dim)
{
	pt_job *job;
	int rv;
	if ((rv = pt_job_alloc(&job)) != 0)
		die("job", rv, 0);
	if (pt_job_var(job, "d", 1, 0.0) < 0 ||
	    pt_job_table(job, "t", dim, 0.01) < 0)
		die("job", PT_EINVAL, 0);
	if ((rv = pt_job_set(job, "mode", "async")) != 0 ||
	    (rv = pt_job_set(job, "lr", "0")) != 0)
		die("job", rv, 0);
	return job;
}

static void *ps_serve(void *arg)
{
	pt_server_serve(arg);
	return NULL;
}

// serve: the serving process: a pstrain server and a raw one, their
// addresses said on fd `up`, until `down` closes.
static void serve(const char *prefix, uint32_t dim, uint64_t k, int up,
    int down)
{
	char raw[512], ps[512];
	raw_srv rs;
	pt_server *s;
	int rv;
	pt_job *job = job_make(dim);
	snprintf(raw, sizeof(raw), "%s-raw", prefix);
	snprintf(ps, sizeof(ps), "%s-ps", prefix);
	raw_open(&rs, raw, sizeof(raw), (size_t)k * dim * sizeof(float), 1);
	if ((rv = pt_server_open(&s, job, 0, ps)) != 0 ||
	    (rv = pt_server_url(s, ps, sizeof(ps))) != 0)
		die("pstrain server", rv, 0);
	dprintf(up, "%s\n%s\n", raw, ps);
	close(up);
	// The server's loop on a thread of its own, the raw server on nng's.
	pthread_t t;
	pthread_create(&t, NULL, ps_serve, s);
	char c;
	while (read(down, &c, 1) > 0)
		;
	pt_server_stop(s);
	pthread_join(t, NULL);
	pt_server_close(s);
	raw_close(&rs);
	pt_job_free(job);
}

static uint64_t mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: rows URL_PREFIX DIM K POOL ROUNDS "
				"ITERS\n");
		return 2;
	}
	mallopt(M_ARENA_MAX, 1); // as bin/pstrain does (cli/main.c)
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	const char *prefix = argv[1];
	uint32_t dim = (uint32_t)strtoul(argv[2], NULL, 10);
	uint64_t k = strtoull(argv[3], NULL, 10);
	uint64_t pool = strtoull(argv[4], NULL, 10);
	int rounds = atoi(argv[5]), iters = atoi(argv[6]), rv;
	if (dim == 0 || k == 0 || pool < k || rounds < 1 || iters < 1) {
		fprintf(stderr, "rows: DIM, K, ROUNDS and ITERS are > 0, "
				"POOL >= K\n");
		return 2;
	}
	int up[2], down[2];
	if (pipe(up) != 0 || pipe(down) != 0)
		die("pipe", PT_EIO, 0);
	pid_t child = fork(); // before nng starts any thread
	if (child < 0)
		die("fork", PT_EIO, 0);
	if (child == 0) {
		close(up[0]);
		close(down[1]);
		serve(prefix, dim, k, up[1], down[0]);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	char raw[512], ps[512];
	FILE *f = fdopen(up[0], "r");
	if (f == NULL || fscanf(f, "%511s %511s", raw, ps) != 2)
		die("the serving process", PT_EIO, 0);
	fclose(f);

	pt_job *job = job_make(dim);
	pt_worker *w;
	nng_socket req;
	if ((rv = pt_worker_open(&w, job, 0, ps)) != 0)
		die("pstrain worker", rv, 0);
	raw_dial(&req, raw, 1);
	// The pool's ids (random 64-bit, as hashed features are), and
	// ITERS + a tenth requests' worth of draws from it.
	uint64_t seed = 35, *ids = malloc(pool * sizeof(*ids));
	int reqs = iters + iters / 10 + 1;
	uint64_t *draw = malloc((size_t)reqs * k * sizeof(*draw));
	float *vals = malloc((size_t)k * dim * sizeof(float));
	float *grads = calloc((size_t)k * dim, sizeof(float));
	size_t pull_b = k * 8, pp_b = k * (16 + 4 * (size_t)dim);
	float *rq = calloc(pp_b / sizeof(float) + 1, sizeof(float));
	if (ids == NULL || draw == NULL || vals == NULL || grads == NULL ||
	    rq == NULL)
		die("memory", PT_ENOMEM, 0);
	for (uint64_t i = 0; i < pool; i++)
		ids[i] = mix(&seed);
	for (size_t i = 0; i < (size_t)reqs * k; i++)
		draw[i] = ids[mix(&seed) % pool];
	int64_t step = pt_worker_start(w);
	// Every row of the pool pushed once: it exists on the server.
	for (uint64_t i = 0; i < pool; i += k) {
		uint64_t n = pool - i < k ? pool - i : k;
		if ((rv = pt_push_rows(w, 0, step++, n, ids + i, grads)) != 0)
			die("push rows", rv, 0);
	}
	for (int r = 0; r < rounds; r++) {
		double t[4] = {0, 0, 0, 0};
		for (int j = 0; j < 4; j++) {
			int which = (r + j) % 4;
			if (which == 0)
				t[0] = raw_round(req, rq, pull_b, iters);
			else if (which == 2)
				t[2] = raw_round(req, rq, pp_b, iters);
			else {
				double t0 = 0;
				for (int i = -iters / 10 - 1; i < iters; i++) {
					const uint64_t *d = draw +
					    (size_t)(i + iters / 10 + 1) * k;
					if (i == 0)
						t0 = now_us();
					rv = which == 1
						 ? pt_pull_rows(w, 0, k, d, vals)
						 : pt_pushpull_rows(w, 0,
						       step++, k, d, grads, k,
						       d, vals);
					if (rv != 0)
						die(which == 1 ? "pull rows"
							       : "pushpull rows",
						    rv, 0);
				}
				t[which] = (now_us() - t0) / iters;
			}
		}
		printf("%.2f %.2f %.2f %.2f\n", t[0], t[1], t[2], t[3]);
		fflush(stdout);
	}
	pt_worker_close(w);
	pt_job_free(job);
	nng_close(req);
	close(down[1]);
	waitpid(child, NULL, 0);
	free(ids), free(draw), free(vals), free(grads), free(rq);
	return 0;
}
